"""Backfilling: which waiting jobs start now on the free nodes.

One pass (:func:`backfill`) takes the queue in order (:mod:`metaq_py.policy.order`) and the
free nodes of the decision's working pool (:class:`~metaq_py.policy.work.Work`, a copy of the
cluster's free pool, as Flux's sched-backfill works on a copy of its resource graph), and a
*reservation depth*, as Flux's ``sched-simple``/``qmanager`` take one:

1. Start jobs in queue order while they fit.
2. The first job that does not fit is the *head*; it and the jobs after it that must wait each
   get a reservation, up to ``depth`` of them: the earliest time the nodes it needs stay free,
   given the running jobs' expected ends and the reservations made before it.
3. Any other job starts now only if it fits in the free nodes and delays no reservation.

EASY (Mu'alem and Feitelson, "Utilization, predictability, workloads, and user runtime
estimates in scheduling the IBM SP2 with backfilling", IEEE TPDS 12(6), 2001) is depth 1
(:data:`EASY`); conservative backfilling (the same paper) reserves for every job that waits
(:data:`ALL`), so no job is ever delayed by one behind it.

With one reservation the availability profile is two numbers, EASY's own: the head's *shadow
time* (walk the running jobs in expected-end order, adding the nodes each releases to the free
ones, until the head fits) and the *extra nodes* left over then. A later job may start now if it
fits in the free nodes and either ends by the shadow time or uses only extra nodes (which it
then consumes). On a long queue that test is served by the snapshot's waitlist
(:mod:`metaq_py.policy.waitlist`) when the driver keeps one: it hands over, in queue order, only
the jobs that pass it, so the pass costs the jobs it starts rather than the length of the
queue. From two reservations on, the reservations are an availability profile
(:class:`~metaq_py.policy.availability.Profile`), and the pass stops once no job left could
start now: none fits in the nodes free now, or none has room from now for its shortest run
(:class:`~metaq_py.policy.availability.Shortest`). Holds only take nodes away, so a job that
cannot start now cannot start later in the pass.

Estimates: decisions use requested walltimes; with ``oracle`` they use actual runtimes (what
CQSim does), for like-for-like comparisons with it.

Malleable start size: a malleable job starts at the largest size in ``[min_size, size]`` that is
allowed now. Linear speedup means a larger size ends sooner, so this size is also the one most
likely to end by the shadow time; only when that fails does EASY try the extra nodes, with the
size capped by them. A malleable head of EASY is promised ``min_size`` nodes at the shadow time
(the earliest it can start at all); the profile reserves a malleable job at the largest size it
ever offers (:meth:`~metaq_py.policy.availability.Profile.reserve`). docs/model.md, "One
backfill", says why the two differ.

The wall clock of the allocation (``snapshot.end``) is a resource: a job whose estimate at its
chosen size does not end by ``end`` never starts; a job that cannot end by ``end`` even at its
largest size, or even from the earliest time it could start, is skipped entirely: it takes no
reservation, since time only runs out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

from metaq_py.policy.availability import Profile, Shortest, least_from
from metaq_py.policy.model import NOTHING, Decision, Job
from metaq_py.policy.order import in_order_view
from metaq_py.policy.shares import ShareRoom
from metaq_py.policy.snapshot import Snapshot
from metaq_py.policy.waitlist import Waitlist
from metaq_py.policy.work import Work

EASY: Final = 1
"""EASY backfilling's reservation depth: the head's alone."""
ALL: Final = 1 << 62
"""Conservative backfilling's reservation depth: every job that waits (more than any queue
holds)."""


def decision(snap: Snapshot, *, depth: int, oracle: bool, down: bool = False) -> Decision:
    """One backfilling decision over ``snap`` with reservation ``depth``: a baseline's whole
    decision, and an on-demand mechanism's at an instant with no notice, no owed node and no
    on-demand job waiting. It lives here rather than in
    :mod:`~metaq_py.policy.mechanisms`, which stays Python (``setup.py``), so that each
    simulated decision runs in compiled code throughout. ``down`` hands out the highest node
    ids first (:class:`~metaq_py.policy.pool.NodeOrder`).
    """
    if not snap.waiting or (not snap.free and (snap.shares is None or not snap.shares.open)):
        return NOTHING
    work = Work(snap, oracle=oracle, down=down)
    backfill(work, in_order_view(snap.waiting, ordered=snap.ordered), depth)
    return work.decision()


def backfill(work: Work, queue: Sequence[Job], depth: int) -> None:
    """One backfilling pass over ``queue`` with at most ``depth`` reservations (at least 1),
    recording starts on ``work`` (see the module docstring).

    On a cluster that runs shares (``work.shares``), a share (``job.cores`` > 0) joins a
    shared node with room, or opens a free node as a one-node job would; behind EASY's head
    it must not hold a node past the shadow time that would have freed by then, and with a
    profile it joins a shared node only within the node's expected end. docs/model.md,
    "Shares".
    """
    if work.snap.shaped is not False:  # a driver that knows no job has shapes says False
        from metaq_py.policy.shapes import in_shapes
        queue = in_shapes(work, queue)
    room = work.shares
    if room is not None and depth != EASY:
        # the profile's walk from the head of the queue, then shares joining shared nodes
        begin = _reserving(work, queue, 0, depth, room) if work.free.count else 0
        _shares_joining(work, queue, room, begin)
        return
    pool = work.free
    now, end, oracle, started = work.now, work.end, work.oracle, work.started
    for i, job in enumerate(queue):
        if pool.count == 0 and (room is None or not room.any_open()):
            return
        if job.id in started or _never(work, job):
            continue
        if room is not None and job.cores:
            if not room.shape.fits(job.cores, job.gpus, job.mem) or \
                    _share_start(work, room, job, math.inf, 0) >= 0:
                continue
        else:
            k = min(job.size, pool.count)
            if k >= job.min_size and now + job.time_at(k, oracle) <= end:
                work.start(job, pool.take(k))
                continue
        # the head: a share at the head waits for a whole node (its shadow time is when one
        # frees), so the protection never counts cores
        if depth != EASY:
            _reserving(work, queue, i, depth, None)
            return
        found = shadow(work, job)
        if found is None:
            continue  # it cannot end by the allocation's end: it cannot run here
        waitlist = None if room is not None else _waitlist(work, queue)
        if room is not None:
            _backfill_shares(work, room, queue[i + 1:], *found)
        elif waitlist is None:
            _backfill(work, queue[i + 1:], *found)
        else:
            _backfill_waitlist(work, waitlist, job, *found)
        return


def _never(work: Work, job: Job) -> bool:
    """Whether ``job`` can never run here: too big for the machine, or too long for the time
    left even at its largest size."""
    return job.min_size > work.snap.total or work.now + job.time_at(job.size, work.oracle) > \
        work.end


def shadow(work: Work, job: Job) -> tuple[float, int] | None:
    """EASY's ``(shadow time, extra nodes)`` for head ``job``, from the work's free pool.

    ``(inf, 0)`` when running jobs never release enough (reservations hold the rest), and
    ``None`` when the head could not end by the allocation's end even starting at its shadow
    time: it cannot run here, and the pass skips it, as it skips a job too long for the time
    left now (conservative's profile holds nothing for such a job either).
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


def _waitlist(work: Work, queue: Sequence[Job]) -> Waitlist | None:
    """The snapshot's waitlist when it holds exactly ``queue`` (the snapshot's own waiting
    jobs, not a queue a mechanism reordered) with this decision's estimates."""
    waitlist = work.snap.waitlist
    if waitlist is None or queue is not work.snap.waiting or waitlist.oracle != work.oracle \
            or len(waitlist) != len(queue):
        return None
    return waitlist


def _backfill(work: Work, rest: Sequence[Job], shadow_time: float, extra: int) -> None:
    """Step 3 behind EASY's head: start the jobs of ``rest`` that delay it not (see the
    module docstring)."""
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
    """Start ``job`` (with ``min_size`` at most the free nodes) if step 3 behind EASY's head
    allows it; the extra nodes left."""
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


def _reserving(work: Work, queue: Sequence[Job], begin: int, depth: int,
               room: ShareRoom | None) -> int:
    """Steps 2 and 3 with an availability profile, from ``queue[begin]`` on: a job starts now
    at the largest size the profile allows, or else takes a reservation while fewer than
    ``depth`` were made. Returns the index from which on no job can start on a free node now
    (the pass stops there; see the module docstring).

    With shares (``room``), a share first joins a shared node within the node's expected end
    (:func:`_settled`), or else is a one-node job that opens a free node.
    """
    pool = work.free
    now, end, oracle = work.now, work.end, work.oracle
    least = least_from(queue)
    profile = Profile(work)
    shortest = Shortest(queue, oracle)
    reserved = 0
    for i in range(begin, len(queue)):
        job = queue[i]
        if least[i] > pool.count or not shortest.any_room(i, profile, now, pool.count):
            return i
        if job.id in work.started or _never(work, job) or (
                room is not None and _settled(work, room, job)):
            continue
        k = profile.largest_now(job, now, end, oracle, pool.count) \
            if job.min_size <= pool.count else 0
        if k:
            nodes = pool.take(k)
            if room is not None and job.cores:
                room.open_node(nodes[0])
            work.start(job, nodes)
            profile.hold(now, now + job.time_at(k, oracle), k)
        elif reserved < depth and profile.reserve(job, end, oracle):
            reserved += 1
    return len(queue)


# --- shares of nodes (see backfill) -------------------------------------------------------


def _share_start(work: Work, room: ShareRoom, job: Job, shadow_time: float,
                 extra: int) -> int:
    """Start share ``job`` now if EASY allows it: ``-1`` when it cannot start, else how many
    extra nodes it used (0 or 1). It joins a shared node when that does not hold the node
    past ``shadow_time`` (when the node would have freed by then), or else opens a free node
    that it leaves by ``shadow_time`` or that is one of the ``extra`` nodes."""
    finish = work.now + job.time_at(1, work.oracle)
    if finish > work.end:
        return -1
    node = room.join(job.cores, job.gpus, finish, shadow=shadow_time, mem=job.mem)
    if node is not None:
        work.start(job, (node,))
        return 0
    if work.free.count == 0 or not room.shape.fits(job.cores, job.gpus, job.mem):
        return -1
    if finish > shadow_time and extra < 1:
        return -1
    nodes = work.free.take(1)
    room.open_node(nodes[0])
    work.start(job, nodes)
    return 0 if finish <= shadow_time else 1


def _backfill_shares(work: Work, room: ShareRoom, rest: Sequence[Job], shadow_time: float,
                     extra: int) -> None:
    """Step 3 behind EASY's head over whole-node jobs and shares."""
    pool = work.free
    for job in rest:
        if pool.count == 0 and not room.any_open():
            return
        if job.id in work.started:
            continue
        if job.cores:
            if room.shape.fits(job.cores, job.gpus, job.mem):
                extra -= max(0, _share_start(work, room, job, shadow_time, extra))
        elif job.min_size <= pool.count:
            extra = _offer(work, job, shadow_time, extra)


def _settled(work: Work, room: ShareRoom, job: Job) -> bool:
    """Whether ``job`` needs no free node in this pass: it is a share that can never run
    here (too big for the node), or one that joined a shared node now, within the node's
    expected end."""
    if not job.cores:
        return False
    if not room.shape.fits(job.cores, job.gpus, job.mem):
        return True
    finish = work.now + job.time_at(1, work.oracle)
    node = room.join(job.cores, job.gpus, finish, shadow=math.inf, extend=False,
                     mem=job.mem)
    if node is None:
        return False
    work.start(job, (node,))
    return True


def _shares_joining(work: Work, queue: Sequence[Job], room: ShareRoom, begin: int) -> None:
    """After the profile's walk on a cluster with shares: from ``queue[begin]`` on, shares
    join shared nodes; nothing else can start now, and joins within a node's expected end
    never read the profile."""
    for i in range(begin, len(queue)):
        if not room.any_open():
            return
        job = queue[i]
        if job.cores and job.id not in work.started and not _never(work, job):
            _settled(work, room, job)
