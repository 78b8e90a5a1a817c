"""Node bookkeeping shared by the live runner and the simulator.

A :class:`Cluster` knows, for concrete node ids ``0 .. total-1``, which are free, which each
running job holds, which are reserved (idle) for which notice, which an on-demand job holds on
loan from which shrunk malleable job, and which have come back and are owed to their lender.
Drivers build a :class:`~metaq_py.policy.snapshot.Snapshot` from it, ask a scheduler to decide, and
apply the returned actions here, one by one, in order::

    snap = cluster.snapshot(now=now, waiting=queue, end=alloc_end, ordered=True)
    decision = scheduler.decide(snap)
    for action in decision.actions:
        effect = cluster.apply(action, now=now, job=waiting_by_id.get(getattr(action, "job", None)))
        # Start -> new Running; Preempt -> the removed Running (requeue resumed(effect, now));
        # Shrink/Expand -> the resized Running; Reserve/Release -> None

plus the events only a driver sees: :meth:`finish`, :meth:`checkpoint`, :meth:`add_notice` and
:meth:`remove_notice`.

Every operation checks its invariants first and raises :class:`ClusterError`, with one sentence
saying what is wrong, before changing anything: no node is ever held twice, a job starts only on
nodes it may use, a shrink never goes below the job's minimum, and so on.

Cost: the free pool and each reservation are :class:`~metaq_py.policy.spans.Spans`, sorted
runs of ids, so starting or ending a job costs a bisect and a splice per run of its nodes (and
C-level tuple work), never a step per node or per machine node; the running jobs are kept
sorted by expected end (bisect on a list), so a snapshot is O(1).
"""

from __future__ import annotations

from collections.abc import Sequence, Set

from metaq_py.holdings import ClusterError, Holdings
from metaq_py.policy.ending import ENDS
from metaq_py.policy.model import (
    Expand,
    Job,
    JobId,
    Kind,
    NodeId,
    Nodes,
    Notice,
    Preempt,
    Release,
    Reserve,
    Running,
    Shrink,
    Start,
)
from metaq_py.policy.spans import Spans, size
from metaq_py.policy.work import resized

__all__ = ["ENDS", "Cluster", "ClusterError"]


class Cluster(Holdings):
    """The nodes of one machine (simulator) or one allocation (live runner).

    It keeps its books as :class:`~metaq_py.holdings.Holdings` (views, snapshot, check);
    every method here checks an action or event first, then moves them.
    ``ends``: which end-ordered indexes to keep (see :class:`~metaq_py.holdings.Holdings`).
    ``shape``: what each node has (cores, GPUs), for shares of a node
    (:mod:`metaq_py.policy.shares`); ``None`` runs whole-node jobs only, as the simulator does.
    """

    # --- actions -----------------------------------------------------------------------------

    def apply(self, action: object, *, now: float, job: Job | None = None) -> Running | None:
        """Apply one scheduler action at ``now``; ``job`` is the waiting job a Start names.

        ``action`` is typed ``object`` because anything else gets a ClusterError here."""
        if isinstance(action, Start):
            if job is None or job.id != action.job:
                raise ClusterError(f"starting job {action.job!r} needs its waiting Job record")
            if action.shape != job.shape:
                try:
                    job = job.in_shape(action.shape)
                except ValueError as e:
                    raise ClusterError(str(e)) from None
            return self.start(job, action.nodes, now=now, borrowed=action.borrowed)
        if isinstance(action, Preempt):
            return self.preempt(action.job, now=now, for_job=action.for_job)
        if isinstance(action, Shrink):
            return self.shrink(action.job, action.nodes, now=now, for_job=action.for_job)
        if isinstance(action, Expand):
            return self.expand(action.job, action.nodes, now=now)
        if isinstance(action, Reserve):
            self.reserve(action.notice, action.nodes)
            return None
        if isinstance(action, Release):
            self.release(action.notice)
            return None
        raise ClusterError(f"{action!r} is not a scheduler action")

    def start(self, job: Job, nodes: Sequence[NodeId], *, now: float,
              borrowed: str | None = None) -> Running:
        """``job`` starts on exactly ``nodes``.

        A batch job takes free nodes, or only nodes reserved for ``borrowed``. An on-demand job
        may also take nodes shrunk for it and idle nodes reserved for any notice; starting it
        redeems its own notice (leftover reserved nodes become free, borrowers stay as
        ordinary jobs). A share takes the first free core and GPU ids of its node."""
        if job.id in self._running:
            raise ClusterError(f"job {job.id!r} is already running")
        if job.cores:
            return self._start_share(job, nodes, now=now, borrowed=borrowed)
        if borrowed is None and job.kind is not Kind.ONDEMAND and \
                job.min_size <= len(nodes) <= job.size:
            # the common start, a batch job on free nodes named in ascending order (as a
            # decision names them), moved as whole runs; else the general path below decides,
            # and words the error
            fast = self._free.claim(nodes)
            if fast is not None:
                return self._started(job, fast[1], now, None, fast[0])
        free = self._free
        # ascending ids, as a decision names them, are distinct: no set, no sort
        found = free.runs(nodes) if type(nodes) is tuple else None
        if found is None:
            picked = set(nodes)
            if len(picked) != len(nodes):
                raise ClusterError(f"job {job.id!r} names a node twice in {tuple(nodes)}")
        k = len(nodes)
        if not job.min_size <= k <= job.size:
            raise ClusterError(f"job {job.id!r} needs {job.min_size}..{job.size} nodes, "
                               f"not {k}")
        ondemand = job.kind is Kind.ONDEMAND
        promised = self._lending.promised.get(job.id, {}) if ondemand else {}
        if found is None:
            found = _runs(free, picked)
            if found is None:
                raise ClusterError(f"job {job.id!r} cannot start on nodes that are not node "
                                   f"ids here: {_few(_outside(picked, set(free.ids)))}")
        bounds, ordered = found
        if borrowed is not None:
            if ondemand:
                raise ClusterError(f"on-demand job {job.id!r} cannot borrow a reservation")
            pool = self._reserved.get(borrowed)
            if pool is None:
                raise ClusterError(f"job {job.id!r} borrows from unknown notice {borrowed!r}")
            inside, outside = pool.split(bounds)
            if outside:
                raise ClusterError(f"job {job.id!r} may only borrow nodes reserved for "
                                   f"{borrowed!r}, and {list(pool.nodes(outside)[:5])} are not")
            pool.take_runs(inside)
        else:
            # the nodes are free, or (on-demand) shrunk for the job, or reserved for a notice:
            # cut the runs by those pools in turn
            in_free, rest = free.split(bounds)
            lent = free.empty()
            for nodes_lent in promised.values():
                lent.add(nodes_lent)
            from_lent, rest = lent.split(rest)
            taken: list[tuple[Spans, list[int]]] = []
            if rest and ondemand:
                for pool in self._reserved.values():
                    hit, rest = pool.split(rest)
                    if hit:
                        taken.append((pool, hit))
            if rest:
                raise ClusterError(f"job {job.id!r} cannot start on nodes that are not free: "
                                   f"{list(free.nodes(rest)[:5])}")
            if size(from_lent) != len(lent):
                raise ClusterError(f"on-demand job {job.id!r} must use all nodes shrunk for it")
            for pool, hit in taken:
                pool.take_runs(hit)
            free.take_runs(in_free)
            if promised:
                self._lending.redeem(job.id)
        r = self._started(job, ordered, now, borrowed, bounds)
        if ondemand and job.notice is not None and job.notice in self._notices:
            self._drop_notice(job.notice)
        return r

    def _start_share(self, job: Job, nodes: Sequence[NodeId], *, now: float,
                     borrowed: str | None) -> Running:
        """A share starts on its one node: a free node, or a shared node with room."""
        shares = self._shares
        if shares is None:
            raise ClusterError(f"job {job.id!r} asks for {job.cores} cores of a node, and "
                               f"this cluster does not know its nodes' cores")
        if borrowed is not None:
            raise ClusterError(f"share {job.id!r} cannot borrow a reservation")
        if len(nodes) != 1:
            raise ClusterError(f"share {job.id!r} runs on one node, not {len(nodes)}")
        node = nodes[0]
        load = shares.loads.get(node)
        if load is None:
            if node not in self._free:
                raise ClusterError(f"share {job.id!r} cannot start on node {node!r}, which "
                                   f"is neither free nor shared")
            if not shares.shape.fits(job.cores, job.gpus, job.mem):
                raise ClusterError(f"share {job.id!r} needs {job.cores} cores, {job.gpus} "
                                   f"GPUs and {job.mem} bytes, more than a node has for it")
            self._free.remove((node,))
        elif not load.fits(job.cores, job.gpus, job.mem):
            raise ClusterError(f"share {job.id!r} needs {job.cores} cores, {job.gpus} GPUs "
                               f"and {job.mem} bytes, and node {node} has "
                               f"{len(load.free_cores)} cores, {len(load.free_gpus)} GPUs "
                               f"and {load.mem_room} bytes free for it")
        return self._started_share(job, node, now)

    def preempt(self, job_id: JobId, *, now: float, for_job: JobId | None = None) -> Running:
        """Stop a running batch job; returns its record (requeue ``resumed(record, now)``).

        Its nodes return to the reservation it borrowed, or become free. With ``for_job``
        (the on-demand job it is preempted for) they come back to it when that job ends, if
        it still waits then (:attr:`returned`; the paper's completion rule, R12).
        """
        r = self._get(job_id, "preempt")
        if r.job.kind is Kind.ONDEMAND:
            raise ClusterError(f"on-demand job {job_id!r} is never preempted")
        if for_job is not None:
            self._lending.preempted_for(for_job, job_id, r.nodes)
        if r.job.cores:
            self._end_share(r)
            return r
        self._put_back(r, self._remove(r))
        return r

    def shrink(self, job_id: JobId, nodes: Sequence[NodeId], *, now: float,
               for_job: JobId | None = None) -> Running:
        """Take ``nodes`` from a malleable job; with ``for_job`` they are lent to that
        on-demand job (kept for its Start), otherwise they become free."""
        r = self._get(job_id, "shrink")
        if r.job.kind is not Kind.MALLEABLE:
            raise ClusterError(f"job {job_id!r} is {r.job.kind}, only malleable jobs shrink")
        taken = set(nodes)
        k = len(nodes)
        if k and tuple(nodes) == r.nodes[-k:]:
            keep = r.nodes[:-k]  # a decision gives up the highest ids: no scan needed
        elif len(taken) != k or not taken or not taken <= set(r.nodes):
            raise ClusterError(f"job {job_id!r} can only give up distinct nodes it holds")
        else:
            keep = tuple(n for n in r.nodes if n not in taken)
        if len(keep) < r.job.min_size:
            raise ClusterError(f"shrinking job {job_id!r} to {len(keep)} nodes goes below its "
                               f"minimum of {r.job.min_size}")
        if for_job is not None and for_job in self._running:
            raise ClusterError(f"cannot lend nodes to {for_job!r}, which is already running")
        new = resized(r, keep, now)
        self._replace(r, new)
        lent = tuple(sorted(taken))
        if for_job is None:
            self._free.add(lent)
        else:
            self._lending.promise(for_job, job_id, lent)
        return new

    def expand(self, job_id: JobId, nodes: Sequence[NodeId], *, now: float) -> Running:
        """Give a malleable job free nodes or the nodes it is owed, up to its maximum."""
        r = self._get(job_id, "expand")
        if r.job.kind is not Kind.MALLEABLE:
            raise ClusterError(f"job {job_id!r} is {r.job.kind}, only malleable jobs expand")
        given = set(nodes)
        owed = set(self._lending.owed.get(job_id, ()))
        if len(given) != len(nodes) or _outside(given - owed, self._free):
            raise ClusterError(f"job {job_id!r} can only expand onto distinct free or owed nodes")
        if len(r.nodes) + len(given) > r.job.size:
            raise ClusterError(f"expanding job {job_id!r} to {len(r.nodes) + len(given)} nodes "
                               f"exceeds its maximum of {r.job.size}")
        # the given nodes are free or owed, so none is the job's already: no union needed, and
        # sorting two ascending runs is one merge
        new = resized(r, tuple(sorted(r.nodes + tuple(nodes))), now)
        self._replace(r, new)
        if given - owed:
            self._free.remove(given - owed)
            self._lending.returned.clear()  # free nodes taken: the victims' claims lapse
        self._lending.paid(job_id, given)
        return new

    def reserve(self, notice_id: str, nodes: Sequence[NodeId]) -> None:
        """Hold free ``nodes`` for a live notice."""
        if notice_id not in self._notices:
            raise ClusterError(f"cannot reserve nodes for unknown notice {notice_id!r}")
        found = self._free.runs(nodes) if type(nodes) is tuple else None
        if found is None:
            picked = set(nodes)
            found = _runs(self._free, picked) if len(picked) == len(nodes) else None
        if found is None or not self._free.covers(found[0]):
            raise ClusterError(f"notice {notice_id!r} can only reserve distinct free nodes")
        self._free.take_runs(found[0])
        self._lending.returned.clear()  # free nodes taken: the victims' claims lapse
        pool = self._reserved.get(notice_id)
        if pool is None:
            pool = self._reserved[notice_id] = self._free.empty()
        pool.give_runs(found[0])

    def release(self, notice_id: str) -> None:
        """Drop a notice: its idle reserved nodes become free, its borrowers ordinary jobs."""
        if notice_id not in self._notices:
            raise ClusterError(f"cannot release unknown notice {notice_id!r}")
        self._drop_notice(notice_id)

    # --- driver events -----------------------------------------------------------------------

    def add_notice(self, notice: Notice) -> None:
        """An advance notice was issued."""
        if notice.id in self._notices:
            raise ClusterError(f"notice {notice.id!r} exists already")
        if not 1 <= notice.nodes <= self.total:
            raise ClusterError(f"notice {notice.id!r} asks for {notice.nodes} nodes, the "
                               f"machine has {self.total}")
        self._notices[notice.id] = notice

    def remove_notice(self, notice_id: str) -> None:
        """A notice was withdrawn (same effect as a Release)."""
        self.release(notice_id)

    def reclaim(self, node: NodeId) -> JobId:
        """An idle ``node`` owed back to a shrunk lender becomes free and is no longer owed;
        the lender runs on as it is (an expand and a shrink would rescale its end twice, and
        charge it its ``resize_cost`` twice). A failure source takes a node to repair this
        way. Returns the lender."""
        for lender, owed in self._lending.owed.items():
            if node in owed:
                self._lending.paid(lender, {node})
                self._free.add((node,))
                return lender
        raise ClusterError(f"node {node} is owed to no lender")

    def finish(self, job_id: JobId, *, now: float) -> Running:
        """A running job ended on its own. Borrowers' nodes go back to their reservation; an
        on-demand job's borrowed nodes become owed to lenders that still run; the rest is free.
        """
        r = self._running.get(job_id)
        if r is None:
            raise ClusterError(f"cannot finish job {job_id!r}: it is not running")
        if r.job.cores:
            self._end_share(r)
            return r
        bounds = self._remove(r)
        freed = self._lending.settle(job_id, r.nodes, self._running)
        if freed is None:
            self._put_back(r, bounds)
        else:
            self._free.add(freed)
        if job_id in self._lending.victims:
            self._lending.give_back(job_id, set(r.nodes) if freed is None else freed,
                                    self._running)
        return r

    def checkpoint(self, job_id: JobId, *, at: float) -> Running:
        """A running job completed a checkpoint at ``at``."""
        r = self._get(job_id, "checkpoint")
        if not r.start <= at:
            raise ClusterError(f"job {job_id!r} cannot checkpoint at {at}, before its start "
                               f"at {r.start}")
        new = Running(job=r.job, nodes=r.nodes, start=r.start, end=r.end, true_end=r.true_end,
                      last_checkpoint=at, borrowed=r.borrowed)
        self._running[job_id] = new
        return new

    def know_memory(self, mem: int) -> None:
        """The nodes' memory became known (``mem`` bytes each; the live driver asks the batch
        system only once a task says its ``MEM``): shares are packed by it from now on."""
        shares = self._shares
        if shares is None or mem == shares.shape.mem:
            return
        if mem < 1:
            raise ClusterError(f"a node has at least 1 byte of memory, not {mem}")
        for node, load in shares.loads.items():
            held = sum(p.mem for p, _, _ in load.jobs.values())
            if held > mem:
                raise ClusterError(f"node {node}'s shares hold {held} bytes, more than the "
                                   f"{mem} it has")
        shares.know_memory(mem)


def _runs(pool: Spans, nodes: set[NodeId]) -> tuple[list[int], Nodes] | None:
    """``(runs, ascending tuple)`` of distinct ``nodes``; ``None`` unless all are node ids."""
    try:
        ordered = sorted(nodes)
    except TypeError:
        return None
    return pool.runs(ordered)


def _outside(nodes: set[NodeId], pool: Set[NodeId]) -> set[NodeId]:
    """The ``nodes`` that are not in ``pool``."""
    return {n for n in nodes if n not in pool}


def _few(nodes: set[NodeId]) -> list[NodeId]:
    """Up to five of ``nodes``, for an error message (sorted when they compare)."""
    try:
        return sorted(nodes)[:5]
    except TypeError:
        return list(nodes)[:5]
