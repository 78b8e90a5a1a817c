"""The waitlist: the waiting jobs in queue order, indexed by size and estimate, so that EASY's
backfilling finds the next job that could start without walking the whole queue.

On an overloaded machine the queue holds tens of thousands of jobs, most of which fit in the
free nodes but run past the head's shadow time. EASY's step 3 (:mod:`metaq_py.policy.backfill`)
looks for the jobs, in queue order, with ``min_size <= free`` and either ``min_size <= extra``
or ``now + estimate <= shadow time``. Which ones qualify depends on the shadow time, which only
the policy computes, so the driver cannot hand it a shorter queue; it can hand it this index.

Layout: the jobs sit in *blocks* of about :data:`LOAD` consecutive jobs, each block with the
*staircase* of its jobs' ``(min_size, estimate)`` points: the points no other job of the block
beats in both (sizes ascending, estimates strictly descending). A segment tree over the blocks
holds, at each node, the staircase of its blocks together. Some job of a node's blocks passes
the test above exactly when some point of its staircase does, so a search skips every block
with no candidate and finds the next candidate in a logarithmic number of steps. The
staircases are short (at most the number of distinct sizes or estimates among the jobs).

A driver keeps the waitlist in step with its waiting list (the simulator's
:class:`~sim.engine.waiting.Waiting` does): :meth:`Waitlist.append` for a job behind every
other, :meth:`Waitlist.insert_after` for one placed behind a given job (or at the head), and
:meth:`Waitlist.remove`. The estimate is the one decisions use, so a waitlist is built for one
``oracle`` setting. It is optional (:attr:`~metaq_py.policy.snapshot.Snapshot.waitlist`): EASY
decides the same with it or without it, and only uses it when it matches the queue it walks.
"""

from __future__ import annotations

from typing import Final

from metaq_py.policy.model import Job, JobId

LOAD: Final = 64
"""Jobs per block when the waitlist is packed; a block split in two passes twice this."""


class _Block:
    """Consecutive waiting jobs with their sizes, estimates and staircase."""

    __slots__ = ("est", "jobs", "leaf", "size", "stair_est", "stair_size")

    def __init__(self, leaf: int) -> None:
        self.jobs: list[Job] = []
        self.size: list[int] = []
        self.est: list[float] = []
        self.stair_size: list[int] = []
        self.stair_est: list[float] = []
        self.leaf = leaf
        """The block's place in :attr:`Waitlist._blocks` (and leaf of the tree)."""

    def restair(self) -> None:
        """Recompute the staircase from the block's jobs."""
        self.stair_size, self.stair_est = [], []
        size, est = self.size, self.est
        for i in range(len(size)):
            add_point(self.stair_size, self.stair_est, size[i], est[i])

    def find(self, job: Job) -> int:
        """Where ``job`` (this very object) sits in the block."""
        jobs = self.jobs
        for i in range(len(jobs)):
            if jobs[i] is job:
                return i
        raise KeyError(job.id)


def add_point(sizes: list[int], ests: list[float], size: int, est: float) -> bool:
    """Add ``(size, est)`` to the staircase ``(sizes, ests)`` in place; whether it changed."""
    n = len(sizes)
    p = 0
    while p < n and sizes[p] < size:
        p += 1
    # the point is beaten by the lowest estimate among sizes up to its own
    if p < n and sizes[p] == size:
        if ests[p] <= est:
            return False
    elif p > 0 and ests[p - 1] <= est:
        return False
    q = p
    while q < n and ests[q] >= est:  # the points it beats: size at least, estimate at least
        q += 1
    sizes[p:q] = [size]
    ests[p:q] = [est]
    return True


def merge(a_size: list[int], a_est: list[float], b_size: list[int],
          b_est: list[float]) -> tuple[list[int], list[float]]:
    """The staircase of the points of two staircases (one pass over both)."""
    sizes: list[int] = []
    ests: list[float] = []
    i, j, na, nb = 0, 0, len(a_size), len(b_size)
    last = 0.0
    while i < na or j < nb:
        # the smaller size first; on a tie the lower estimate (the other is then beaten)
        if j >= nb or (i < na and (a_size[i] < b_size[j] or (
                a_size[i] == b_size[j] and a_est[i] <= b_est[j]))):
            size, est = a_size[i], a_est[i]
            i += 1
        else:
            size, est = b_size[j], b_est[j]
            j += 1
        if not sizes or est < last:
            sizes.append(size)
            ests.append(est)
            last = est
    return sizes, ests


def passes(sizes: list[int], ests: list[float], free: int, extra: int, now: float,
           shadow: float) -> bool:
    """Whether some point of a staircase passes EASY's backfilling test (module docstring).

    For each size the staircase keeps the lowest estimate, so the test on its points is the
    test on every job they stand for: ``now + est`` only grows with ``est``, in floating point
    too.
    """
    for k in range(len(sizes)):
        size = sizes[k]
        if size > free:
            return False  # sizes ascend
        if size <= extra or now + ests[k] <= shadow:
            return True
    return False


class Waitlist:
    """The waiting jobs of one driver, in its queue order, for decisions with ``oracle``
    (see the module docstring)."""

    __slots__ = ("_block_of", "_blocks", "_cap", "_count", "_tree_est", "_tree_size", "oracle")

    def __init__(self, *, oracle: bool) -> None:
        self.oracle = oracle
        self._blocks: list[_Block] = []
        self._block_of: dict[JobId, _Block] = {}
        self._count = 0
        self._cap = 1  # leaves of the tree: a power of two, at least the number of blocks
        self._tree_size: list[list[int]] = [[], []]
        self._tree_est: list[list[float]] = [[], []]

    def __len__(self) -> int:
        return self._count

    def jobs(self) -> list[Job]:
        """Every job, in order (for tests and checks: a pass over the whole list)."""
        return [job for block in self._blocks for job in block.jobs]

    # --- keeping step with the driver -----------------------------------------------------

    def append(self, job: Job) -> None:
        """``job`` waits behind every other job."""
        blocks = self._blocks
        if not blocks or len(blocks[-1].jobs) >= LOAD:
            if len(blocks) > 2 * (self._count // LOAD) + 16:
                self._pack()  # most blocks are emptied ones: pack before growing
            if not blocks or len(blocks[-1].jobs) >= LOAD:
                self._new_block()
        self._put(blocks[-1], len(blocks[-1].jobs), job)

    def insert_after(self, before: Job | None, job: Job) -> None:
        """``job`` waits right behind ``before`` (a waiting job), or at the head when
        ``before`` is ``None``."""
        if before is None:
            if not self._blocks:
                self._new_block()
            block, at = self._blocks[0], 0
        else:
            block = self._block_of[before.id]
            at = block.find(before) + 1
        self._put(block, at, job)
        if len(block.jobs) > 2 * LOAD:
            self._split(block)

    def remove(self, job: Job) -> None:
        """``job`` no longer waits."""
        block = self._block_of.pop(job.id)
        i = block.find(job)
        size, est = block.size[i], block.est[i]
        del block.jobs[i], block.size[i], block.est[i]
        self._count -= 1
        stair_size, stair_est = block.stair_size, block.stair_est
        for k in range(len(stair_size)):
            # a job off the staircase is beaten by a point that stays; one on it may not be
            if stair_size[k] == size and stair_est[k] == est:
                block.restair()
                self._update(block.leaf)
                break

    def _put(self, block: _Block, at: int, job: Job) -> None:
        est = job.time_at(job.size, self.oracle)
        block.jobs.insert(at, job)
        block.size.insert(at, job.min_size)
        block.est.insert(at, est)
        self._block_of[job.id] = block
        self._count += 1
        if add_point(block.stair_size, block.stair_est, job.min_size, est):
            self._update(block.leaf)

    def _new_block(self) -> None:
        block = _Block(len(self._blocks))
        self._blocks.append(block)
        if len(self._blocks) > self._cap:
            self._rebuild()

    def _split(self, block: _Block) -> None:
        """Cut an overfull block in two halves."""
        half = len(block.jobs) // 2
        second = _Block(block.leaf + 1)
        second.jobs, second.size, second.est = \
            block.jobs[half:], block.size[half:], block.est[half:]
        del block.jobs[half:], block.size[half:], block.est[half:]
        for job in second.jobs:
            self._block_of[job.id] = second
        block.restair()
        second.restair()
        self._blocks.insert(block.leaf + 1, second)
        for k in range(block.leaf + 2, len(self._blocks)):
            self._blocks[k].leaf = k
        self._rebuild()

    def _pack(self) -> None:
        """Drop the empty blocks and rebuild the tree over the others."""
        blocks = [block for block in self._blocks if block.jobs]
        for k in range(len(blocks)):
            blocks[k].leaf = k
        self._blocks[:] = blocks
        self._rebuild()

    # --- the tree -------------------------------------------------------------------------

    def _rebuild(self) -> None:
        """The whole tree again, over as many leaves as the blocks need."""
        cap = 1
        while cap < len(self._blocks):
            cap *= 2
        self._cap = cap
        sizes: list[list[int]] = [[] for _ in range(2 * cap)]
        ests: list[list[float]] = [[] for _ in range(2 * cap)]
        for block in self._blocks:
            sizes[cap + block.leaf] = block.stair_size
            ests[cap + block.leaf] = block.stair_est
        for node in range(cap - 1, 0, -1):
            sizes[node], ests[node] = merge(sizes[2 * node], ests[2 * node],
                                            sizes[2 * node + 1], ests[2 * node + 1])
        self._tree_size, self._tree_est = sizes, ests

    def _update(self, leaf: int) -> None:
        """Block ``leaf``'s staircase changed: redo the nodes above it."""
        sizes, ests = self._tree_size, self._tree_est
        block = self._blocks[leaf]
        node = self._cap + leaf
        sizes[node], ests[node] = block.stair_size, block.stair_est
        node //= 2
        while node:
            size, est = merge(sizes[2 * node], ests[2 * node], sizes[2 * node + 1],
                              ests[2 * node + 1])
            if size == sizes[node] and est == ests[node]:
                return  # the nodes above are unchanged too
            sizes[node], ests[node] = size, est
            node //= 2

    def _next_block(self, leaf: int, free: int, extra: int, now: float,
                    shadow: float) -> int:
        """The first block from ``leaf`` on with a job that passes the test, or -1."""
        sizes, ests, cap = self._tree_size, self._tree_est, self._cap
        if leaf >= cap:
            return -1
        node = cap + leaf
        while True:
            if passes(sizes[node], ests[node], free, extra, now, shadow):
                while node < cap:  # down to the leftmost leaf that passes
                    node *= 2
                    if not passes(sizes[node], ests[node], free, extra, now, shadow):
                        node += 1
                return node - cap
            while node & 1:  # up past the subtrees already searched
                node //= 2
            if node == 0:
                return -1
            node += 1

    def cursor(self) -> Cursor:
        """A cursor at the head of the queue."""
        return Cursor(self)


class Cursor:
    """A walk over a :class:`Waitlist` in queue order, from the head, that stops only at jobs
    that pass EASY's backfilling test. The waitlist must not change during the walk."""

    __slots__ = ("_at", "_block", "_list")

    def __init__(self, waitlist: Waitlist) -> None:
        self._list = waitlist
        self._block = 0
        self._at = 0

    def next(self, free: int, extra: int, now: float, shadow: float) -> Job | None:
        """The next job, after those already returned, with ``min_size <= free`` and either
        ``min_size <= extra`` or ``now + estimate <= shadow``; ``None`` when none is left."""
        blocks = self._list._blocks
        b, at = self._block, self._at
        while b < len(blocks):
            block = blocks[b]
            size, est = block.size, block.est
            for i in range(at, len(size)):
                m = size[i]
                if m <= free and (m <= extra or now + est[i] <= shadow):
                    self._block, self._at = b, i + 1
                    return block.jobs[i]
            b = self._list._next_block(b + 1, free, extra, now, shadow)
            if b < 0:
                break
            at = 0
        self._block, self._at = len(blocks), 0
        return None
