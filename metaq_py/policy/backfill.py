"""Backfilling: which waiting jobs start now on the free nodes.

Both policies take the queue in order (:mod:`metaq_py.policy.order`) and the free nodes of the
decision's working pool (:class:`~metaq_py.policy.work.Work`, a copy of the cluster's free pool,
as Flux's sched-backfill works on a copy of its resource graph).

EASY (Mu'alem and Feitelson, "Utilization, predictability, workloads, and user runtime
estimates in scheduling the IBM SP2 with backfilling", IEEE TPDS 12(6), 2001):

1. Start jobs in queue order while they fit.
2. The first job that does not fit is the *head*. Walk the running jobs in expected-end order,
   adding the nodes each releases to the free ones, until the head fits: that instant is the
   *shadow time*, and the nodes left over then are the *extra nodes*.
3. Any later job may start now if it fits in the free nodes and either ends by the shadow time
   or uses only extra nodes (which it then consumes). Either way the head still starts at its
   shadow time.

Conservative backfilling (the same paper): every waiting job in order gets a reservation at the
earliest time the availability profile has room for it, and a job starts now only if that
earliest time is now. No job is ever delayed by one behind it. The walk stops once no node is
free now, since later reservations cannot change what starts now.

On a long queue, step 3 takes the snapshot's waitlist (:mod:`metaq_py.policy.waitlist`) when
the driver keeps one: it hands over, in queue order, only the jobs that pass the test step 3
starts with, so the pass costs the jobs it starts rather than the length of the queue. The jobs
it walks past would have been skipped, so the decision is the same.

Estimates: decisions use requested walltimes; with ``oracle`` they use actual runtimes (what
CQSim does), for like-for-like comparisons with it.

Malleable start size: a malleable job starts at the largest size in ``[min_size, size]`` that is
allowed now. Linear speedup means a larger size ends sooner, so this size is also the one most
likely to end by the shadow time; only when that fails does EASY try the extra nodes, with the
size capped by them. The head of EASY waits for ``min_size`` nodes.

The wall clock of the allocation (``snapshot.end``) is a resource: a job whose estimate at its
chosen size does not end by ``end`` never starts; a job that cannot end by ``end`` even at its
largest size is skipped entirely and never becomes the head, since time only runs out.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Sequence
from itertools import accumulate

from metaq_py.policy.model import NOTHING, Decision, Job, Snapshot
from metaq_py.policy.order import in_order_view
from metaq_py.policy.shapes import in_shapes
from metaq_py.policy.shares import ShareRoom
from metaq_py.policy.waitlist import Waitlist
from metaq_py.policy.work import Work

Fill = Callable[[Work, Sequence[Job]], None]
"""A backfilling pass: :func:`easy` or :func:`conservative`."""


def decision(snap: Snapshot, *, fill: Fill, oracle: bool) -> Decision:
    """One backfilling decision over ``snap`` with ``fill``: a baseline's whole decision, and
    an on-demand mechanism's at an instant with no notice, no owed node and no on-demand job
    waiting. It lives here rather than in :mod:`~metaq_py.policy.mechanisms`, which stays
    Python (``setup.py``), so that each simulated decision runs in compiled code throughout.
    """
    if not snap.waiting or (not snap.free and (snap.shares is None or not snap.shares.open)):
        return NOTHING
    work = Work(snap, oracle=oracle)
    fill(work, in_order_view(snap.waiting, ordered=snap.ordered))
    return work.decision()


def shadow(work: Work, job: Job) -> tuple[float, int] | None:
    """EASY's ``(shadow time, extra nodes)`` for head ``job``, from the work's free pool.

    ``(inf, 0)`` when running jobs never release enough (reservations hold the rest), and
    ``None`` when the head could not end by the allocation's end even starting at its shadow
    time (it is then not protected).
    """
    need = job.min_size
    avail = work.free.count
    when = math.inf
    for t, k in work.releases():
        if t > when:
            break
        # every node freed at the shadow time itself counts, not only the first job's:
        # otherwise the extra nodes would depend on which of several simultaneous ends is seen
        # first
        avail += k
        if avail >= need:
            when = t
    if when == math.inf:
        return math.inf, 0
    if when + job.time_at(min(job.size, avail), work.oracle) > work.end:
        return None
    return when, avail - need


def easy(work: Work, queue: Sequence[Job]) -> None:
    """One EASY pass over ``queue``, recording starts on ``work``."""
    queue = in_shapes(work, queue)
    if work.shares is not None:
        _easy_shares(work, queue, work.shares)
        return
    pool = work.free
    if pool.count == 0:
        return
    now, end, oracle, started = work.now, work.end, work.oracle, work.started
    total = work.snap.total
    for i, job in enumerate(queue):
        if job.id in started:
            continue
        # a job too big for the machine or for the time left can never run here
        if job.min_size > total or now + job.time_at(job.size, oracle) > end:
            continue
        k = min(job.size, pool.count)
        if k >= job.min_size and now + job.time_at(k, oracle) <= end:
            work.start(job, pool.take(k))
            if pool.count == 0:
                return
            continue
        found = shadow(work, job)
        if found is not None:
            waitlist = _waitlist(work, queue)
            if waitlist is None:
                _backfill(work, queue[i + 1:], *found)
            else:
                _backfill_waitlist(work, waitlist, job, *found)
            return


def _waitlist(work: Work, queue: Sequence[Job]) -> Waitlist | None:
    """The snapshot's waitlist when it holds exactly ``queue`` (the snapshot's own waiting
    jobs, not a queue a mechanism reordered) with this decision's estimates."""
    waitlist = work.snap.waitlist
    if waitlist is None or queue is not work.snap.waiting or waitlist.oracle != work.oracle \
            or len(waitlist) != len(queue):
        return None
    return waitlist


def _backfill(work: Work, rest: Sequence[Job], shadow_time: float, extra: int) -> None:
    """EASY's step 3: start the jobs of ``rest`` that protect the head (see the module
    docstring)."""
    pool = work.free
    now, started = work.now, work.started
    oracle = work.oracle
    # A filter keeps only the jobs that could start: they fit in the nodes free now, and fit
    # in the extra nodes or end by the shadow time at full size (a smaller size only runs
    # longer). Both limits only shrink during the pass, so the loop below still checks
    # everything. A generator over slotted attributes is the cheapest filter in CPython 3.11
    # (cheaper than compress/map/attrgetter), most of a long queue fails it, and the rest of
    # the queue is not looked at once the free nodes are used up.
    free_now = pool.count
    fits = (job for job in rest if job.min_size <= free_now and (
        job.min_size <= extra or now + job.time_at(job.size, oracle) <= shadow_time))
    for job in fits:
        if job.min_size > pool.count or job.id in started:
            continue
        extra = _offer(work, job, shadow_time, extra)
        if pool.count == 0:
            return


def _backfill_waitlist(work: Work, waitlist: Waitlist, head: Job, shadow_time: float,
                       extra: int) -> None:
    """:func:`_backfill` over the waitlist, from the head of the queue: the same jobs, in the
    same order, but only those that pass the test with the free and extra nodes left at each
    step (the others would be skipped). A job ahead of the head that did not start in step 1
    was started earlier in the decision, or is too big for the machine or too long for the
    allocation's end: it is skipped here too.
    """
    pool = work.free
    started = work.started
    cursor = waitlist.cursor()
    while True:
        job = cursor.next(pool.count, extra, work.now, shadow_time)
        if job is None:
            return
        if job is head or job.id in started:
            continue
        extra = _offer(work, job, shadow_time, extra)
        if pool.count == 0:
            return


def _offer(work: Work, job: Job, shadow_time: float, extra: int) -> int:
    """Start ``job`` (with ``min_size`` at most the free nodes) if EASY's step 3 allows it;
    the extra nodes left."""
    pool = work.free
    now, end, oracle = work.now, work.end, work.oracle
    k = min(job.size, pool.count)
    finish = now + job.time_at(k, oracle)
    if finish > end:
        return extra
    if finish <= shadow_time:
        work.start(job, pool.take(k))
    elif extra >= job.min_size:
        k = min(k, extra)
        if now + job.time_at(k, oracle) <= end:
            work.start(job, pool.take(k))
            return extra - k
    return extra


class _Profile:
    """Free nodes over time, a step function: ``avail[i]`` on ``[times[i], times[i+1])``."""

    __slots__ = ("avail", "times")

    def __init__(self, work: Work) -> None:
        times, avail = [work.now], [work.free.count]
        for t, k in work.releases():
            if t == times[-1]:
                avail[-1] += k
            else:
                times.append(t)
                avail.append(avail[-1] + k)
        self.times, self.avail = times, avail

    def _cut(self, t: float) -> int:
        """Make ``t`` a breakpoint; return its index."""
        times = self.times
        i = bisect_left(times, t)
        if i < len(times) and times[i] == t:
            return i
        times.insert(i, t)
        self.avail.insert(i, self.avail[i - 1])
        return i

    def hold(self, t0: float, t1: float, k: int) -> None:
        """Take ``k`` nodes over ``[t0, t1)``."""
        i = self._cut(t0)
        j = self._cut(t1) if t1 != math.inf else len(self.times)
        avail = self.avail
        avail[i:j] = map(k.__rsub__, avail[i:j])  # a - k for each step, at C level

    def largest_now(self, job: Job, now: float, end: float, oracle: bool) -> int:
        """The largest size at which ``job`` fits from now on without touching any hold.

        Try the largest size the free nodes allow; if the profile dips below it before the job
        would end, retry at the dip's level (a smaller size runs longer, so the dip can only
        deepen). Each round is a bisect and a C-level ``min`` over a slice.
        """
        times, avail = self.times, self.avail
        k = min(job.size, avail[0])
        while k >= job.min_size:
            finish = now + job.time_at(k, oracle)
            if finish > end:
                return 0
            low = min(avail[:max(1, bisect_left(times, finish))])
            if low >= k:
                return k
            k = low
        return 0

    def reserve(self, job: Job, end: float, oracle: bool) -> None:
        """Hold nodes for ``job`` at the earliest time it fits at the largest size the profile
        ever offers (its level once every running job has ended), if it ends by ``end``: the
        reservation conservative backfilling gives every job it does not start now."""
        k = min(job.size, self.avail[-1])
        if k < job.min_size:
            return
        duration = job.time_at(k, oracle)
        t = self.earliest(k, duration)
        if t + duration <= end:
            self.hold(t, t + duration, k)

    def earliest(self, k: int, duration: float) -> float:
        """The earliest time ``k`` nodes stay free for ``duration`` (one pass over the steps).

        ``begin`` is the start of the current stretch of steps with room for ``k``; reaching
        a step ``duration`` after it means the stretch is long enough.
        """
        # an index loop over typed lists, and a flag rather than an optional float: compiled
        # by mypyc, this runs on native values without boxing
        times, avail = self.times, self.avail
        inside = False
        begin = 0.0
        for i in range(len(times)):
            t = times[i]
            if inside:
                if t - begin >= duration:
                    return begin
                if avail[i] < k:
                    inside = False
            elif avail[i] >= k:
                inside = True
                begin = t
        return begin if inside else math.inf


def conservative(work: Work, queue: Sequence[Job]) -> None:
    """One conservative-backfilling pass over ``queue``, recording starts on ``work``.

    The pass stops once no job left in the queue could start now: none fits in the nodes free
    now, or none has room from now for its shortest run (:class:`_Shortest`). Holds only take
    nodes away, so a job that cannot start now cannot start later in the pass, and the
    reservations of the jobs after it could not change what starts now.
    """
    queue = in_shapes(work, queue)
    if work.shares is not None:
        _conservative_shares(work, queue, work.shares)
        return
    pool = work.free
    if pool.count == 0:
        return
    now, end, oracle, started = work.now, work.end, work.oracle, work.started
    total = work.snap.total
    least = _least_from(queue)
    profile = _Profile(work)
    shortest = _Shortest(queue, oracle)
    for i, job in enumerate(queue):
        if least[i] > pool.count or not shortest.any_room(i, profile, now, pool.count):
            return
        # skip a job too big for the machine or for the time left
        if job.id in started or job.min_size > total \
                or now + job.time_at(job.size, oracle) > end:
            continue
        k = profile.largest_now(job, now, end, oracle) if job.min_size <= pool.count else 0
        if k:
            work.start(job, pool.take(k))
            profile.hold(now, now + job.time_at(k, oracle), k)
            if pool.count == 0:
                return
            continue
        profile.reserve(job, end, oracle)


class _Shortest:
    """For each ``min_size`` among the queue's jobs, the shortest run at full size of the jobs
    from each position on. A job of that ``min_size`` can start now only if at least
    ``min_size`` nodes stay free from now for that long: it needs at least ``min_size`` nodes,
    for at least its run at full size (a malleable job runs longer when smaller)."""

    __slots__ = ("at", "runs", "sizes")

    def __init__(self, queue: Sequence[Job], oracle: bool) -> None:
        at: dict[int, list[int]] = {}
        runs: dict[int, list[float]] = {}
        for i, job in enumerate(queue):
            m = job.min_size
            if m not in at:
                at[m], runs[m] = [], []
            at[m].append(i)
            runs[m].append(job.time_at(job.size, oracle))
        for m, row in runs.items():
            # suffix minima: runs[m][p] is the shortest run among the jobs at[m][p:]
            suffix = list(accumulate(reversed(row), min))
            suffix.reverse()
            runs[m] = suffix
        self.sizes = sorted(at)
        self.at, self.runs = at, runs

    def any_room(self, i: int, profile: _Profile, now: float, free: int) -> bool:
        """Whether some job of ``queue[i:]`` might start now, on a machine with ``free``
        nodes free and ``profile`` holding the reservations made so far."""
        times, avail = profile.times, profile.avail
        for m in self.sizes:
            if m > free:
                return False  # sizes ascend: no larger one fits either
            at = self.at[m]
            p = bisect_left(at, i)
            if p < len(at) and min(avail[:max(1, bisect_left(
                    times, now + self.runs[m][p]))]) >= m:
                return True
        return False


def _least_from(queue: Sequence[Job]) -> list[int]:
    """``least[i]``: the smallest ``min_size`` of ``queue[i:]``."""
    least = list(accumulate([job.min_size for job in reversed(queue)], min))
    least.reverse()
    return least


# --- with shares of nodes ------------------------------------------------------------------
#
# On a cluster that runs shares (Work.shares is set), the passes below replace the two above,
# which stay untouched for whole-node clusters (the simulator's, whose schedules must not
# change). A whole-node job is handled exactly as above; a share (job.cores > 0) joins a shared
# node with room, or opens a free node as a one-node job would. docs/model.md, "Shares".


def _share_start(work: Work, room: ShareRoom, job: Job, shadow_time: float,
                 extra: int) -> int:
    """Start share ``job`` now if EASY allows it: ``-1`` when it cannot start, else how many
    extra nodes it used (0 or 1). It joins a shared node when that does not hold the node
    past ``shadow_time`` (when the node would have freed by then), or else opens a free node
    that it leaves by ``shadow_time`` or that is one of the ``extra`` nodes."""
    finish = work.now + job.time_at(1, work.oracle)
    if finish > work.end:
        return -1
    node = room.join(job.cores, job.gpus, finish, shadow=shadow_time)
    if node is not None:
        work.start(job, (node,))
        return 0
    if work.free.count == 0 or not room.shape.fits(job.cores, job.gpus):
        return -1
    if finish > shadow_time and extra < 1:
        return -1
    nodes = work.free.take(1)
    room.open_node(nodes[0])
    work.start(job, nodes)
    return 0 if finish <= shadow_time else 1


def _easy_shares(work: Work, queue: Sequence[Job], room: ShareRoom) -> None:
    """EASY over whole-node jobs and shares (see above). A share at the head waits for a
    whole node (its shadow time is when one frees): the protection never counts cores."""
    pool = work.free
    now, end, oracle, started = work.now, work.end, work.oracle, work.started
    total = work.snap.total
    for i, job in enumerate(queue):
        if pool.count == 0 and not room.any_open():
            return
        if job.id in started or job.min_size > total \
                or now + job.time_at(job.size, oracle) > end:
            continue
        if job.cores:
            if not room.shape.fits(job.cores, job.gpus) or \
                    _share_start(work, room, job, math.inf, 0) >= 0:
                continue
        else:
            k = min(job.size, pool.count)
            if k >= job.min_size and now + job.time_at(k, oracle) <= end:
                work.start(job, pool.take(k))
                continue
        found = shadow(work, job)
        if found is not None:
            _backfill_shares(work, room, queue[i + 1:], *found)
        return


def _backfill_shares(work: Work, room: ShareRoom, rest: Sequence[Job], shadow_time: float,
                     extra: int) -> None:
    """EASY's step 3 over whole-node jobs and shares."""
    pool = work.free
    now, end, oracle, started = work.now, work.end, work.oracle, work.started
    for job in rest:
        if pool.count == 0 and not room.any_open():
            return
        if job.id in started:
            continue
        if job.cores:
            if room.shape.fits(job.cores, job.gpus):
                extra -= max(0, _share_start(work, room, job, shadow_time, extra))
            continue
        count = pool.count
        if job.min_size > count:
            continue
        k = min(job.size, count)
        finish = now + job.time_at(k, oracle)
        if finish > end:
            continue
        if finish <= shadow_time:
            work.start(job, pool.take(k))
        elif extra >= job.min_size:
            k = min(k, extra)
            if now + job.time_at(k, oracle) <= end:
                work.start(job, pool.take(k))
                extra -= k


def _conservative_shares(work: Work, queue: Sequence[Job], room: ShareRoom) -> None:
    """Conservative backfilling over whole-node jobs and shares. A share joins a shared node
    now only if it ends by the node's expected end (so no reservation counting that node is
    delayed); otherwise it is a one-node job of the availability profile."""
    pool = work.free
    now, end, oracle, started = work.now, work.end, work.oracle, work.started
    total = work.snap.total
    profile = _Profile(work)
    for job in queue:
        if pool.count == 0 and not room.any_open():
            return
        if job.id in started or job.min_size > total \
                or now + job.time_at(job.size, oracle) > end:
            continue
        if job.cores:
            if not room.shape.fits(job.cores, job.gpus):
                continue
            finish = now + job.time_at(1, oracle)
            node = room.join(job.cores, job.gpus, finish, shadow=math.inf, extend=False)
            if node is not None:
                work.start(job, (node,))
                continue
        if pool.count == 0:
            # nothing more starts on a free node now, whatever is reserved later, and a share
            # joining a node within its end touches no reservation: only joins are left
            continue
        k = profile.largest_now(job, now, end, oracle) if job.min_size <= pool.count else 0
        if k:
            nodes = pool.take(k)
            if job.cores:
                room.open_node(nodes[0])
            work.start(job, nodes)
            profile.hold(now, now + job.time_at(k, oracle), k)
            continue
        profile.reserve(job, end, oracle)
