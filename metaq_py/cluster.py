"""Node bookkeeping shared by the live runner and the simulator.

A :class:`Cluster` knows, for concrete node ids ``0 .. total-1``, which are free, which each
running job holds, which are reserved (idle) for which notice, which an on-demand job holds on
loan from which shrunk malleable job, and which have come back and are owed to their lender.
Drivers build a :class:`~metaq_py.policy.model.Snapshot` from it, ask a scheduler to decide, and
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

import math
from bisect import bisect_left, insort
from collections.abc import Mapping, Sequence, Set
from types import MappingProxyType

from metaq_py.policy.model import (
    Ending,
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
    Snapshot,
    Start,
)
from metaq_py.policy.spans import Bounds, Spans, size
from metaq_py.policy.work import resized


class ClusterError(ValueError):
    """An action or event would break the cluster's bookkeeping."""


ENDS = ("both", "end", "true_end")
"""Which end-ordered indexes a :class:`Cluster` keeps (its ``ends`` argument)."""


class Cluster:
    """The nodes of one machine (simulator) or one allocation (live runner).

    ``ends`` says which end-ordered indexes of the running jobs to keep up to date for
    snapshots: ``"both"`` (the default), or only ``"end"`` (by walltime, what decisions without
    ``oracle`` read) or only ``"true_end"`` (what ``oracle`` decisions read), when the driver
    knows which its scheduler reads. A snapshot then carries ``None`` for the other, and a
    decision that asks for it sorts the running jobs itself, to the same order.
    """

    def __init__(self, total: object, *, ends: str = "both") -> None:
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
        self._owed: dict[JobId, Nodes] = {}
        self._promised: dict[JobId, dict[JobId, Nodes]] = {}
        self._loans: dict[JobId, dict[JobId, Nodes]] = {}
        self._by_end: list[Ending] | None = [] if ends != "true_end" else None
        self._by_true_end: list[Ending] | None = [] if ends != "end" else None
        # the kept indexes, each with whether it orders by true end (see _key)
        self._indexes: tuple[tuple[list[Ending], bool], ...] = tuple(
            (lst, true) for lst, true in ((self._by_end, False), (self._by_true_end, True))
            if lst is not None)

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
        return MappingProxyType(self._owed)

    @property
    def loans(self) -> Mapping[JobId, Mapping[JobId, Nodes]]:
        """For each on-demand job, the nodes it holds on loan, by lender."""
        return MappingProxyType(self._loans)

    @property
    def ending(self) -> Sequence[Ending]:
        """Running jobs sorted by walltime end."""
        if self._by_end is not None:
            return self._by_end
        return sorted(self._key(r, False) for r in self._running.values())

    def snapshot(self, *, now: float, waiting: Sequence[Job], end: float = math.inf,
                 ordered: bool = False, ondemand_waiting: int | None = None) -> Snapshot:
        """The world as a scheduler sees it, over the live containers (no copies).

        ``ordered``: the driver keeps ``waiting`` in queue order
        (:mod:`metaq_py.policy.order`); ``ondemand_waiting``: it counts the on-demand
        jobs in it (:class:`~metaq_py.policy.model.Snapshot`). Apply the decision before
        changing anything.
        """
        # positional, in field order: a decision per event builds one, and keywords cost more
        return Snapshot(now, self.total, self._free, self._running, waiting, self._reserved,
                        self._notices, self._owed, end, self._borrowers, ordered, self._by_end,
                        self._by_true_end, ondemand_waiting)

    # --- actions -----------------------------------------------------------------------------

    def apply(self, action: object, *, now: float, job: Job | None = None) -> Running | None:
        """Apply one scheduler action at ``now``; ``job`` is the waiting job a Start names.

        ``action`` is typed ``object`` because anything else gets a ClusterError here."""
        if isinstance(action, Start):
            if job is None or job.id != action.job:
                raise ClusterError(f"starting job {action.job!r} needs its waiting Job record")
            return self.start(job, action.nodes, now=now, borrowed=action.borrowed)
        if isinstance(action, Preempt):
            return self.preempt(action.job, now=now)
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
        ordinary jobs).
        """
        if job.id in self._running:
            raise ClusterError(f"job {job.id!r} is already running")
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
        promised = self._promised.get(job.id, {}) if ondemand else {}
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
                self._loans[job.id] = dict(promised)
                del self._promised[job.id]
        r = self._started(job, ordered, now, borrowed, bounds)
        if ondemand and job.notice is not None and job.notice in self._notices:
            self._drop_notice(job.notice)
        return r

    def _started(self, job: Job, ordered: Nodes, now: float, borrowed: str | None,
                 bounds: Bounds) -> Running:
        """Record ``job`` as running on ``ordered`` (sorted, already out of every pool), whose
        runs are ``bounds``."""
        k = len(ordered)
        scale = job.size / k
        end = now + job.walltime * scale
        true_end = None if job.runtime is None else now + job.runtime * scale
        r = Running(job, ordered, now, end, true_end, None, borrowed)
        jid = job.id
        self._running[jid] = r
        self._runs[jid] = bounds
        if borrowed is not None:
            self._borrowers.setdefault(borrowed, set()).add(jid)
        for lst, true in self._indexes:  # _index(r), inlined: one start per job
            insort(lst, (true_end if true and true_end is not None else end, ordered[0], jid, k,
                         borrowed))
        return r

    def preempt(self, job_id: JobId, *, now: float) -> Running:
        """Stop a running batch job; returns its record (requeue ``resumed(record, now)``).

        Its nodes return to the reservation it borrowed, or become free.
        """
        r = self._get(job_id, "preempt")
        if r.job.kind is Kind.ONDEMAND:
            raise ClusterError(f"on-demand job {job_id!r} is never preempted")
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
            loans = self._promised.setdefault(for_job, {})
            loans[job_id] = loans.get(job_id, ()) + lent
        return new

    def expand(self, job_id: JobId, nodes: Sequence[NodeId], *, now: float) -> Running:
        """Give a malleable job free nodes or the nodes it is owed, up to its maximum."""
        r = self._get(job_id, "expand")
        if r.job.kind is not Kind.MALLEABLE:
            raise ClusterError(f"job {job_id!r} is {r.job.kind}, only malleable jobs expand")
        given = set(nodes)
        owed = set(self._owed.get(job_id, ()))
        if len(given) != len(nodes) or _outside(given - owed, self._free):
            raise ClusterError(f"job {job_id!r} can only expand onto distinct free or owed nodes")
        if len(r.nodes) + len(given) > r.job.size:
            raise ClusterError(f"expanding job {job_id!r} to {len(r.nodes) + len(given)} nodes "
                               f"exceeds its maximum of {r.job.size}")
        # the given nodes are free or owed, so none is the job's already: no union needed, and
        # sorting two ascending runs is one merge
        new = resized(r, tuple(sorted(r.nodes + tuple(nodes))), now)
        self._replace(r, new)
        self._free.remove(given - owed)
        left = owed - given
        if left:
            self._owed[job_id] = tuple(sorted(left))
        else:
            self._owed.pop(job_id, None)
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

    def finish(self, job_id: JobId, *, now: float) -> Running:
        """A running job ended on its own. Borrowers' nodes go back to their reservation; an
        on-demand job's borrowed nodes become owed to lenders that still run; the rest is free.
        """
        r = self._running.get(job_id)
        if r is None:
            raise ClusterError(f"cannot finish job {job_id!r}: it is not running")
        bounds = self._remove(r)
        loans = self._loans.pop(job_id, None)
        if loans:
            held = set(r.nodes)
            for lender, lent in loans.items():
                back = held.intersection(lent)
                held -= back
                lr = self._running.get(lender)
                if lr is not None and back:
                    # a lender never regrows past its maximum, whatever happened since
                    room = lr.job.size - len(lr.nodes) - len(self._owed.get(lender, ()))
                    give = tuple(sorted(back))[:max(0, room)]
                    if give:
                        self._owed[lender] = self._owed.get(lender, ()) + give
                    self._free.add(back.difference(give))
                else:
                    self._free.add(back)
            self._free.add(held)
            return r
        self._put_back(r, bounds)
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
        for jid, r in self._running.items():
            claim(r.nodes, f"job {jid!r}")
            if not r.job.min_size <= len(r.nodes) <= r.job.size:
                raise ClusterError(f"job {jid!r} holds {len(r.nodes)} nodes, outside "
                                   f"{r.job.min_size}..{r.job.size}")
        for nid, pool in self._reserved.items():
            claim(pool, f"notice {nid!r}")
        for jid, nodes in self._owed.items():
            claim(nodes, f"the debt to {jid!r}")
        for jid, loans in self._promised.items():
            for lender, nodes in loans.items():
                claim(nodes, f"the loan from {lender!r} to {jid!r}")
        if len(seen) != self.total:
            raise ClusterError(f"{self.total - len(seen)} nodes are unaccounted for")
        for lst, true in self._indexes:
            if sorted(self._key(r, true) for r in self._running.values()) != lst:
                raise ClusterError("an end-ordered index disagrees with the running jobs")

    # --- internals ----------------------------------------------------------------------------

    def _get(self, job_id: JobId, verb: str) -> Running:
        r = self._running.get(job_id)
        if r is None:
            raise ClusterError(f"cannot {verb} job {job_id!r}: it is not running")
        return r

    @staticmethod
    def _key(r: Running, true: bool) -> Ending:
        # written out inline in _started and _remove too (one start and one end per job):
        # keep the three alike; check() compares the indexes with this one
        e = r.true_end if true and r.true_end is not None else r.end
        return (e, r.nodes[0], r.job.id, len(r.nodes), r.borrowed)

    def _index(self, r: Running) -> None:
        for lst, true in self._indexes:
            insort(lst, self._key(r, true))

    def _unindex(self, r: Running) -> None:
        for lst, true in self._indexes:
            del lst[bisect_left(lst, self._key(r, true))]

    def _replace(self, old: Running, new: Running) -> None:
        self._unindex(old)
        if new.nodes is not old.nodes:
            self._runs.pop(old.job.id, None)  # recomputed from the nodes when needed
        self._running[new.job.id] = new
        self._index(new)

    def _remove(self, r: Running) -> Bounds | None:
        """Forget a running job; a lender's debts and claims die with it. Returns the runs of
        its nodes when they are known."""
        jid, nodes, borrowed = r.job.id, r.nodes, r.borrowed
        for lst, true in self._indexes:  # _unindex(r), inlined: one end per job
            e = r.true_end if true and r.true_end is not None else r.end
            del lst[bisect_left(lst, (e, nodes[0], jid, len(nodes), borrowed))]
        del self._running[jid]
        bounds = self._runs.pop(jid, None)
        owed = self._owed.pop(jid, None)
        if owed:
            self._free.add(owed)
        for loans in self._loans.values():
            loans.pop(jid, None)
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
