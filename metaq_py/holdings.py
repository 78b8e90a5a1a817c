"""What a :class:`~metaq_py.cluster.Cluster` holds, and the moves that keep it consistent.

:class:`Holdings` keeps the books of one machine or allocation: the free pool, the running jobs
(with the runs of their nodes and their :class:`~metaq_py.policy.ending.EndOrder`), the advance
notices with the idle nodes reserved for each and the jobs borrowing them, and the on-demand
:class:`~metaq_py.policy.lending.Lending`. It offers the read-only views, the
:meth:`~Holdings.snapshot` a scheduler decides on, the invariant :meth:`~Holdings.check`, and
the primitive moves (record a start, forget a job, give nodes back, drop a notice), which trust
their caller.

:class:`~metaq_py.cluster.Cluster` is the one caller: it checks every action and event first,
then makes these moves. Read that module first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence, Set
from types import MappingProxyType

from metaq_py.policy.ending import ENDS, EndOrder
from metaq_py.policy.lending import Lending
from metaq_py.policy.model import (
    Ending,
    Job,
    JobId,
    NodeId,
    Nodes,
    Notice,
    Running,
)
from metaq_py.policy.shares import NodeLoad, NodeShape, Placement, SharedNodes
from metaq_py.policy.snapshot import Snapshot
from metaq_py.policy.spans import Bounds, Spans
from metaq_py.policy.waitlist import Waitlist

__all__ = ["ClusterError", "Holdings"]


class ClusterError(ValueError):
    """An action or event would break the cluster's bookkeeping."""


class Holdings:
    """Who holds which node, for concrete node ids ``0 .. total-1`` (see the module docstring).

    ``ends`` says which end-ordered indexes of the running jobs to keep up to date for
    snapshots: ``"both"`` (the default), or only ``"end"`` (by walltime, what decisions without
    ``oracle`` read) or only ``"true_end"`` (what ``oracle`` decisions read), when the driver
    knows which its scheduler reads. A snapshot then carries ``None`` for the other, and a
    decision that asks for it sorts the running jobs itself, to the same order.
    """

    def __init__(self, total: object, *, ends: str = "both",
                 shape: NodeShape | None = None) -> None:
        # typed object: a bad total gets this ClusterError, not a compiled int check's TypeError
        if isinstance(total, bool) or not isinstance(total, int) or total < 1:
            raise ClusterError(f"a cluster needs a positive whole number of nodes, got {total!r}")
        if ends not in ENDS:
            raise ClusterError(f"ends must be one of {', '.join(ENDS)}, got {ends!r}")
        self.total = total
        self._free = Spans.full(total)
        self._running: dict[JobId, Running] = {}
        self._reserved: dict[str, Spans] = {}
        self._runs: dict[JobId, Bounds] = {}
        """The runs of each running job's nodes, while known (a resize forgets them)."""
        self._notices: dict[str, Notice] = {}
        self._borrowers: dict[str, set[JobId]] = {}
        self._lending = Lending()
        self._ends = EndOrder(ends)
        self._shares = None if shape is None else SharedNodes(shape)
        """The shared nodes (``None``: the node shape is unknown, so no shares run here)."""
        self._placed: dict[JobId, Placement] = {}
        """Where each running share is: node, core ids, GPU ids."""

    # --- read-only views --------------------------------------------------------------------

    @property
    def free(self) -> Spans:
        """Idle nodes reserved for nobody (a live view: do not mutate)."""
        return self._free

    @property
    def running(self) -> Mapping[JobId, Running]:
        """Running jobs by id."""
        return MappingProxyType(self._running)

    @property
    def reserved(self) -> Mapping[str, Spans]:
        """Idle nodes held for each notice."""
        return MappingProxyType(self._reserved)

    @property
    def notices(self) -> Mapping[str, Notice]:
        """Live advance notices by id."""
        return MappingProxyType(self._notices)

    @property
    def owed(self) -> Mapping[JobId, Nodes]:
        """Nodes back from an on-demand job, waiting to be expanded into their lender."""
        return MappingProxyType(self._lending.owed)

    @property
    def returned(self) -> Mapping[JobId, Nodes]:
        """Free nodes back from an on-demand job that ended, by the job preempted for it
        (R12: the victim resumes on them first, if it still waits and can)."""
        return MappingProxyType(self._lending.returned)

    @property
    def loans(self) -> Mapping[JobId, Mapping[JobId, Nodes]]:
        """For each on-demand job, the nodes it holds on loan, by lender."""
        return MappingProxyType(self._lending.loans)

    @property
    def shares(self) -> SharedNodes | None:
        """The shared nodes with their free cores and GPUs (``None``: no shares here)."""
        return self._shares

    @property
    def placements(self) -> Mapping[JobId, Placement]:
        """Each running share's node, core ids and GPU ids."""
        return MappingProxyType(self._placed)

    @property
    def ending(self) -> Sequence[Ending]:
        """Running jobs sorted by walltime end."""
        return self._ends.walltime(self._running)

    def snapshot(self, *, now: float, waiting: Sequence[Job], end: float = math.inf,
                 ordered: bool = False, ondemand_waiting: int | None = None,
                 waitlist: Waitlist | None = None, shaped: bool | None = False) -> Snapshot:
        """The world as a scheduler sees it, over the live containers (no copies).

        ``ordered``: the driver keeps ``waiting`` in queue order
        (:mod:`metaq_py.policy.order`); ``ondemand_waiting``: it counts the on-demand
        jobs in it; ``waitlist``: it keeps them in a :class:`~metaq_py.policy.waitlist.Waitlist`
        too (:class:`~metaq_py.policy.snapshot.Snapshot`); ``shaped``: whether some waiting job
        has other shapes (``None``: the decision looks; the default, ``False``, is the
        simulator's, whose jobs have one shape each). Apply the decision before changing
        anything.
        """
        # positional, in field order: a decision per event builds one, and keywords cost more
        return Snapshot(now, self.total, self._free, self._running, waiting, self._reserved,
                        self._notices, self._lending.owed, end, self._borrowers, ordered,
                        self._ends.by_end, self._ends.by_true_end, ondemand_waiting,
                        self._shares, waitlist, shaped, self._lending.returned)

    def check(self) -> None:
        """Verify every invariant from scratch (O(nodes); for tests and debugging)."""
        seen: dict[NodeId, str] = {}

        def claim(nodes: Set[NodeId] | Sequence[NodeId], who: str) -> None:
            for n in nodes:
                if not 0 <= n < self.total:
                    raise ClusterError(f"{who} holds node {n}, outside 0..{self.total - 1}")
                if n in seen:
                    raise ClusterError(f"node {n} is held twice: by {seen[n]} and {who}")
                seen[n] = who

        claim(self._free, "the free pool")
        whole: dict[JobId, Running] = {}
        for jid, r in self._running.items():
            if r.job.cores:
                self._check_share(jid, r)
                continue
            whole[jid] = r
            claim(r.nodes, f"job {jid!r}")
            if not r.job.min_size <= len(r.nodes) <= r.job.size:
                raise ClusterError(f"job {jid!r} holds {len(r.nodes)} nodes, outside "
                                   f"{r.job.min_size}..{r.job.size}")
        for nid, pool in self._reserved.items():
            claim(pool, f"notice {nid!r}")
        for jid, nodes in self._lending.owed.items():
            claim(nodes, f"the debt to {jid!r}")
        for jid, nodes in self._lending.returned.items():
            if jid in self._running or not set(nodes) <= set(self._free):
                raise ClusterError(f"the nodes back to {jid!r} are not all free, or it runs")
        for jid, loans in self._lending.promised.items():
            for lender, nodes in loans.items():
                claim(nodes, f"the loan from {lender!r} to {jid!r}")
        if self._shares is not None:
            for node, load in self._shares.loads.items():
                claim((node,), f"the shares on node {node}")
                _check_load(load, self._shares.shape, self._placed)
        if len(seen) != self.total:
            raise ClusterError(f"{self.total - len(seen)} nodes are unaccounted for")
        if not self._ends.agrees(whole):
            raise ClusterError("an end-ordered index disagrees with the running jobs")

    def _check_share(self, jid: JobId, r: Running) -> None:
        placed = self._placed.get(jid)
        load = None if self._shares is None else self._shares.loads.get(r.nodes[0])
        if placed is None or load is None or jid not in load.jobs or placed.node != r.nodes[0]:
            raise ClusterError(f"share {jid!r} runs on node {r.nodes[0]}, which does not "
                               f"record it")
        if len(placed.cores) != r.job.cores or len(placed.gpus) != r.job.gpus or \
                placed.mem != r.job.mem:
            raise ClusterError(f"share {jid!r} holds {len(placed.cores)} cores, "
                               f"{len(placed.gpus)} GPUs and {placed.mem} bytes, not the "
                               f"{r.job.cores}, {r.job.gpus} and {r.job.mem} it asked for")

    # --- primitive moves (the caller has checked) ------------------------------------------

    def _started(self, job: Job, ordered: Nodes, now: float, borrowed: str | None,
                 bounds: Bounds) -> Running:
        """Record ``job`` as running on ``ordered`` (sorted, already out of every pool), whose
        runs are ``bounds``."""
        k = len(ordered)
        if job.fixed_setup:  # R2: only the time past the setup scales
            end = now + job.time_at(k, False)
            true_end = None if job.runtime is None else now + job.time_at(k, True)
        else:
            scale = job.size / k if not job.serial else job.slowdown(k)
            end = now + job.walltime * scale
            true_end = None if job.runtime is None else now + job.runtime * scale
        r = Running(job, ordered, now, end, true_end, None, borrowed)
        jid = job.id
        if self._lending.returned:
            self._lending.resumed(jid, ordered)
        self._running[jid] = r
        self._runs[jid] = bounds
        if borrowed is not None:
            self._borrowers.setdefault(borrowed, set()).add(jid)
        self._ends.add(r)
        return r

    def _started_share(self, job: Job, node: NodeId, now: float) -> Running:
        """Record share ``job`` on ``node`` (free, or shared with room: the caller checked),
        on its first free core and GPU ids."""
        shares = self._shares
        assert shares is not None
        end = now + job.walltime
        true_end = None if job.runtime is None else now + job.runtime
        r = Running(job, (node,), now, end, true_end, None, None)
        if self._lending.returned:
            self._lending.resumed(job.id, (node,))
        self._running[job.id] = r
        self._placed[job.id] = shares.add(node, job.id, job.cores, job.gpus, end,
                                          end if true_end is None else true_end,
                                          mem=job.mem)
        return r

    def _end_share(self, r: Running) -> None:
        """Forget a share; its node becomes free when it was the last share there."""
        shares = self._shares
        assert shares is not None
        jid = r.job.id
        del self._running[jid]
        del self._placed[jid]
        if shares.remove(r.nodes[0], jid):
            self._free.add(r.nodes)

    def _get(self, job_id: JobId, verb: str) -> Running:
        r = self._running.get(job_id)
        if r is None:
            raise ClusterError(f"cannot {verb} job {job_id!r}: it is not running")
        return r

    def _replace(self, old: Running, new: Running) -> None:
        self._ends.replace(old, new)
        if new.nodes is not old.nodes:
            self._runs.pop(old.job.id, None)  # recomputed from the nodes when needed
        self._running[new.job.id] = new

    def _remove(self, r: Running) -> Bounds | None:
        """Forget a running job; a lender's debts and claims die with it. Returns the runs of
        its nodes when they are known."""
        jid, borrowed = r.job.id, r.borrowed
        self._ends.remove(r)
        del self._running[jid]
        bounds = self._runs.pop(jid, None)
        owed = self._lending.lender_gone(jid)
        if owed:
            self._free.add(owed)
        if borrowed is not None:
            group = self._borrowers.get(borrowed)
            if group is not None:
                group.discard(jid)
                if not group:
                    del self._borrowers[borrowed]
        return bounds

    def _put_back(self, r: Running, bounds: Bounds | None) -> None:
        """Return a removed job's nodes (whose runs are ``bounds`` when known) to the
        reservation it borrowed, or to the free pool."""
        pool = self._reserved.get(r.borrowed) if r.borrowed is not None else None
        if pool is None:
            pool = self._free
        if bounds is None:
            pool.add(r.nodes)
        elif not pool.give_back(bounds):
            raise ClusterError(f"job {r.job.id!r} gives back nodes that are idle already")

    def _drop_notice(self, notice_id: str) -> None:
        del self._notices[notice_id]
        pool = self._reserved.pop(notice_id, None)
        if pool:
            self._free.add(pool)
        for jid in self._borrowers.pop(notice_id, ()):
            r = self._running[jid]
            new = Running(job=r.job, nodes=r.nodes, start=r.start, end=r.end,
                          true_end=r.true_end, last_checkpoint=r.last_checkpoint)
            self._replace(r, new)



def _check_load(load: NodeLoad, shape: NodeShape, placed: Mapping[JobId, Placement]) -> None:
    """Every core and GPU of a shared node is free or given to exactly one of its shares."""
    cores = list(load.free_cores)
    gpus = list(load.free_gpus)
    cpu_only = 0
    for jid in load.jobs:
        p = placed.get(jid)
        if p is None:
            raise ClusterError(f"node {load.node} records share {jid!r}, which is not running")
        cores += p.cores
        gpus += p.gpus
        if not p.gpus:
            cpu_only += len(p.cores)
    if sorted(cores) != list(range(shape.cores)) or sorted(gpus) != list(range(shape.gpus)):
        raise ClusterError(f"node {load.node}: a core or GPU is given twice or lost "
                           f"(cores {sorted(cores)}, GPUs {sorted(gpus)})")
    if load.cpu_room != shape.cpu_only - cpu_only or load.cpu_room < 0:
        raise ClusterError(f"node {load.node}: shares without GPUs hold {cpu_only} cores, "
                           f"more than the {shape.cpu_only} they may")
    mem = sum(placed[jid].mem for jid in load.jobs)
    if load.mem_room != shape.mem_room - mem or load.mem_room < 0:
        raise ClusterError(f"node {load.node}: its shares hold {mem} bytes of memory, more "
                           f"than its {shape.mem} bytes, or its room of {load.mem_room} "
                           f"is miscounted")
    if not load.jobs:
        raise ClusterError(f"node {load.node} is shared by no share")
