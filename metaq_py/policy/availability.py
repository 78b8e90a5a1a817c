"""The availability profile of conservative backfilling (:mod:`metaq_py.policy.backfill`).

:class:`Profile` is the free nodes over time, as the running jobs release them and the
decision's starts and reservations take them; :class:`Shortest` and :func:`least_from` tell,
at each position of the queue, whether any job from there on might still start now, so that a
pass can stop once none can.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence

from metaq_py.policy.model import Job
from metaq_py.policy.work import Work

__all__ = ["Profile", "Shortest", "least_from"]


class Profile:
    """Free nodes over time, a step function: :meth:`level` ``(i)`` on ``[times[i],
    times[i+1])``.

    ``avail`` holds what the running jobs release and the holds that start later than now
    take. The holds that start now (the pass's starts) are kept apart, as their ends
    ascending (``now_ends``) and their nodes (``now_nodes``): such a hold covers every step
    from the first, so recording it costs a bisect and an insertion rather than a write to
    each of hundreds of steps. A step's level is its ``avail`` less the nodes of the holds
    from now that end after its start. Every hold still cuts the steps at both its ends, so
    the steps are those of a profile that writes each hold out.
    """

    __slots__ = ("avail", "now_ends", "now_nodes", "times")

    def __init__(self, work: Work) -> None:
        times, avail = [work.now], [work.free.count]
        for t, k in work.releases():
            if t == times[-1]:
                avail[-1] += k
            else:
                times.append(t)
                avail.append(avail[-1] + k)
        self.times, self.avail = times, avail
        self.now_ends: list[float] = []
        self.now_nodes: list[int] = []

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
        if i == 0:
            p = bisect_right(self.now_ends, t1)
            self.now_ends.insert(p, t1)
            self.now_nodes.insert(p, k)
            return
        avail = self.avail
        # a comprehension: compiled, a typed loop (map with k.__rsub__ makes a call per step)
        avail[i:j] = [a - k for a in avail[i:j]]

    def level(self, i: int) -> int:
        """The free nodes over step ``i``."""
        p = bisect_right(self.now_ends, self.times[i])
        return self.avail[i] - sum(self.now_nodes[p:])

    def largest_now(self, job: Job, now: float, end: float, oracle: bool, free: int) -> int:
        """The largest size at which ``job`` fits from now on, on at most the ``free`` nodes
        free now, without touching any hold.

        Try the largest size the free nodes allow; if the profile dips below it before the job
        would end, retry at the dip's level (a smaller size runs longer, so the dip can only
        deepen). Each round is a bisect and a walk of the steps up to the dip. ``free`` caps the
        first size because the profile's level now also counts the nodes of jobs past their
        expected end (released "now", but still running: a task may overrun its estimate).
        """
        k = min(job.size, self.level(0), free)
        while k >= job.min_size:
            finish = now + job.time_at(k, oracle)
            if finish > end:
                return 0
            low = self.lowest(finish, job.min_size)
            if low >= k:
                return k
            k = low
        return 0

    def lowest(self, until: float, floor: int) -> int:
        """The lowest level of the profile from now until ``until`` (over the first step at
        least), or the first level found below ``floor`` (the caller then needs no more)."""
        times, avail = self.times, self.avail
        ends, nodes = self.now_ends, self.now_nodes
        n = max(1, bisect_left(times, until))
        m = len(ends)
        p = 0
        held = sum(nodes)  # the nodes of the holds from now still on at the step
        low = 0
        # index loops over typed lists, with an early exit: compiled by mypyc, they run on
        # native values and read no step past the first one below ``floor``
        for x in range(n):
            t = times[x]
            while p < m and ends[p] <= t:
                held -= nodes[p]
                p += 1
            a = avail[x] - held
            if x == 0 or a < low:
                low = a
                if low < floor:
                    return low
        return low

    def reserve(self, job: Job, end: float, oracle: bool) -> bool:
        """Hold nodes for ``job`` at the earliest time it fits at the largest size the profile
        ever offers (its level once every running job has ended), if it ends by ``end``: the
        reservation backfilling gives a job it does not start now. False when it cannot end
        by ``end`` (it cannot run here); true otherwise, also when the profile never offers
        enough (reservations for notices hold the rest: it waits, and nothing is held)."""
        k = min(job.size, self.level(len(self.times) - 1))
        if k < job.min_size:
            return True
        duration = job.time_at(k, oracle)
        t = self.earliest(k, duration)
        if t + duration > end:
            return False
        self.hold(t, t + duration, k)
        return True

    def earliest(self, k: int, duration: float) -> float:
        """The earliest time ``k`` nodes stay free for ``duration`` (one pass over the steps).

        ``begin`` is the start of the current stretch of steps with room for ``k``; reaching
        a step ``duration`` after it means the stretch is long enough.
        """
        # an index loop over typed lists, and a flag rather than an optional float: compiled
        # by mypyc, this runs on native values without boxing
        times, avail = self.times, self.avail
        ends, nodes = self.now_ends, self.now_nodes
        m = len(ends)
        p = 0
        held = sum(nodes)
        inside = False
        begin = 0.0
        for i in range(len(times)):
            t = times[i]
            while p < m and ends[p] <= t:
                held -= nodes[p]
                p += 1
            if inside:
                if t - begin >= duration:
                    return begin
                if avail[i] - held < k:
                    inside = False
            elif avail[i] - held >= k:
                inside = True
                begin = t
        return begin if inside else math.inf


class Shortest:
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
        for row in runs.values():
            # suffix minima, in place: row[p] becomes the shortest run among the jobs at[m][p:]
            for p in range(len(row) - 2, -1, -1):
                if row[p + 1] < row[p]:
                    row[p] = row[p + 1]
        self.sizes = sorted(at)
        self.at, self.runs = at, runs

    def any_room(self, i: int, profile: Profile, now: float, free: int) -> bool:
        """Whether some job of ``queue[i:]`` might start now, on a machine with ``free``
        nodes free and ``profile`` holding the reservations made so far."""
        for m in self.sizes:
            if m > free:
                return False  # sizes ascend: no larger one fits either
            at = self.at[m]
            p = bisect_left(at, i)
            if p < len(at) and profile.lowest(now + self.runs[m][p], m) >= m:
                return True
        return False


def least_from(queue: Sequence[Job]) -> list[int]:
    """``least[i]``: the smallest ``min_size`` of ``queue[i:]``."""
    n = len(queue)
    least = [0] * n
    low = 0
    # a typed loop rather than accumulate(..., min): compiled, it runs on native ints
    for i in range(n - 1, -1, -1):
        m = queue[i].min_size
        if i == n - 1 or m < low:
            low = m
        least[i] = low
    return least
