"""The scratch state of one decision.

A scheduler's ``decide`` builds one :class:`Work` from the snapshot, lets each stage (notice
releases, owed expansions, on-demand arrivals, reservations, backfilling) record actions on it,
and turns it into a :class:`~metaq_py.policy.model.Decision`. The Work mirrors what the actions
will do to the cluster (which nodes each stage may still use, which jobs are gone or resized), so
later stages see the effect of earlier ones without touching the snapshot. It lives for one
call only: schedulers keep no state between decisions.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

from metaq_py.policy.model import (
    NOTHING,
    Action,
    Decision,
    Ending,
    Expand,
    Job,
    JobId,
    NodeId,
    Nodes,
    Preempt,
    Release,
    Reserve,
    Running,
    Shrink,
    Start,
)
from metaq_py.policy.pool import NodePool
from metaq_py.policy.shares import ShareRoom
from metaq_py.policy.snapshot import Snapshot


def ending_order(snap: Snapshot, oracle: bool) -> Sequence[Ending]:
    """The running jobs in expected-end order (the snapshot's, or sorted here if it has none)."""
    given = snap.ending_true if oracle else snap.ending
    if given is not None:
        return given
    return sorted(
        (r.expected_end(oracle), min(r.nodes), jid, len(r.nodes), r.borrowed)
        for jid, r in snap.running.items() if not r.job.cores  # a share frees no node alone
    )


class Work:
    """What one decision has done so far, and what it may still use."""

    __slots__ = (
        "_down", "_reserved", "actions", "changed", "closed", "end", "free", "gone", "now",
        "oracle", "shares", "snap", "started", "wake",
    )

    def __init__(self, snap: Snapshot, *, oracle: bool, down: bool = False) -> None:
        self.snap = snap
        self.now = snap.now
        self.end = snap.end
        self.oracle = oracle
        self._down = down  # pools hand out their highest ids first (NodeOrder.HIGHEST_FIRST)
        self.free = NodePool(snap.free, down)
        self._reserved: dict[str, NodePool] = {}
        self.actions: list[Action] = []
        self.gone: set[JobId] = set()
        """Jobs preempted by this decision."""
        self.changed: dict[JobId, Running] = {}
        """Jobs shrunk or expanded by this decision, as they will be afterwards."""
        self.started: dict[JobId, tuple[float, int, str | None]] = {}
        """Jobs started by this decision: (expected end, nodes, borrowed notice)."""
        self.closed: set[str] = set()
        """Notices released or redeemed by this decision."""
        self.wake = math.inf
        self.shares = None if snap.shares is None else ShareRoom(snap.shares, oracle)
        """The shared nodes' room left for shares (``None``: the cluster runs no shares)."""

    # --- reading --------------------------------------------------------------------------

    def running(self, jid: JobId) -> Running:
        """A running job as it will be once the actions so far are applied."""
        return self.changed.get(jid) or self.snap.running[jid]

    def reserved(self, notice: str) -> NodePool:
        """The idle nodes held for ``notice`` that this decision has not used yet."""
        pool = self._reserved.get(notice)
        if pool is None:
            pool = NodePool(self.snap.reserved.get(notice, frozenset()), self._down)
            self._reserved[notice] = pool
        return pool

    def borrowers(self, notice: str) -> list[JobId]:
        """Running jobs backfilled onto ``notice``'s reservation and not preempted."""
        out = [j for j in self.snap.borrowers.get(notice, ()) if j not in self.gone]
        out.extend(j for j, s in self.started.items() if s[2] == notice)
        return out

    def held(self, notice: str) -> int:
        """Nodes committed to ``notice``: idle reserved ones plus those its borrowers run on."""
        total = self.reserved(notice).count
        for jid in self.borrowers(notice):
            s = self.started.get(jid)
            total += s[1] if s is not None else len(self.running(jid).nodes)
        return total

    def releases(self) -> Iterator[tuple[float, int]]:
        """``(time, nodes)`` in time order: when running jobs hand nodes to the free pool.

        Borrowers hand theirs back to their reservation instead, and are skipped. A shared
        node is handed back when its last share ends.
        """
        local = [(max(r.expected_end(self.oracle), self.now), len(r.nodes))
                 for r in self.changed.values() if r.borrowed is None or r.borrowed in self.closed]
        local += [(max(e, self.now), k) for e, k, b in self.started.values() if b is None and k]
        if self.shares is not None:
            local += self.shares.releases(self.now)
        local.sort()
        skip_ids = self.gone.union(self.changed) if self.gone or self.changed else None
        closed = self.closed
        i, n = 0, len(local)
        for e, _, jid, k, borrowed in ending_order(self.snap, self.oracle):
            if borrowed is not None and borrowed not in closed:
                continue
            if skip_ids is not None and jid in skip_ids:
                continue
            while i < n and local[i][0] <= e:
                yield local[i]
                i += 1
            yield (e if e > self.now else self.now), k
        while i < n:
            yield local[i]
            i += 1

    # --- acting ---------------------------------------------------------------------------

    def start(self, job: Job, nodes: Nodes, *, borrowed: str | None = None) -> None:
        """Start ``job`` on ``nodes``, ascending (as :meth:`NodePool.take` hands them out),
        already taken from a pool."""
        k = len(nodes)
        self.actions.append(Start(job.id, nodes, borrowed, job.shape))
        end = self.now + job.time_at(k, self.oracle)
        if job.cores:
            # a share frees no node by itself: its node's release is the ShareRoom's
            assert self.shares is not None
            self.shares.take(nodes[0], job.cores, job.gpus, end, job.mem)
            k = 0
        self.started[job.id] = (end, k, borrowed)

    def preempt(self, jid: JobId, *, for_job: JobId | None = None) -> tuple[NodeId, ...]:
        """Preempt a running job; its nodes go to its reservation if it borrowed, else free."""
        r = self.running(jid)
        self.actions.append(Preempt(jid, for_job))
        self.gone.add(jid)
        self.changed.pop(jid, None)
        if r.job.cores:
            return ()  # a share frees no node alone (see preempt_node)
        if r.borrowed is not None and r.borrowed not in self.closed:
            self.reserved(r.borrowed).give(r.nodes)
        else:
            self.free.give(r.nodes)
        return r.nodes

    def preempt_node(self, node: NodeId, *, for_job: JobId | None = None) -> None:
        """Preempt every share on shared ``node``; the node becomes free."""
        shared, room = self.snap.shares, self.shares
        assert shared is not None and room is not None
        for jid in list(shared.loads[node].jobs):
            self.preempt(jid, for_job=for_job)
        room.drop(node)
        self.free.give((node,))

    def shrink(self, jid: JobId, k: int, *, for_job: JobId | None) -> tuple[NodeId, ...]:
        """Take ``k`` nodes (its highest ids) from malleable ``jid``; return them."""
        r = self.running(jid)
        keep, lent = r.nodes[:-k], r.nodes[-k:]
        self.actions.append(Shrink(jid, lent, for_job))
        self.changed[jid] = resized(r, keep, self.now)
        return lent

    def expand(self, jid: JobId, nodes: tuple[NodeId, ...]) -> None:
        """Give ``nodes`` (already out of every pool) to malleable ``jid``."""
        r = self.running(jid)
        self.actions.append(Expand(jid, nodes))
        self.changed[jid] = resized(r, tuple(sorted(r.nodes + nodes)), self.now)

    def reserve(self, notice: str, k: int) -> None:
        """Move ``k`` free nodes to ``notice``'s reservation."""
        nodes = self.free.take(k)
        self.actions.append(Reserve(notice, nodes))
        self.reserved(notice).give(nodes)

    def close(self, notice: str, *, release: bool) -> None:
        """The notice ends (released, or redeemed by its job): idle reserved nodes become free."""
        if release:
            self.actions.append(Release(notice))
        pool = self.reserved(notice)
        self.free.give(pool.take(pool.count))
        self.closed.add(notice)

    def wake_at(self, t: float) -> None:
        """Ask the driver to decide again at ``t`` at the latest."""
        if self.now < t < self.wake:
            self.wake = t

    def decision(self) -> Decision:
        """The recorded actions and wake time, as a value."""
        if not self.actions and self.wake == math.inf:
            return NOTHING
        return Decision(tuple(self.actions), None if self.wake == math.inf else self.wake)


def resized(r: Running, nodes: tuple[NodeId, ...], now: float) -> Running:
    """``r`` moved to ``nodes`` at ``now``: remaining time scales by the job's slowdown on
    the new size over its slowdown on the old (:meth:`~metaq_py.policy.model.Job.slowdown`;
    old size / new size under linear speedup). Then the job's ``resize_cost`` moves its end
    later (:func:`resize_charge`); with a ``resize_cost`` of 0 resizing is free. Shared with
    :mod:`metaq_py.cluster`, so both sides agree."""
    job = r.job
    k = len(nodes)
    f = (len(r.nodes) / k if not job.serial
         else job.slowdown(k) / job.slowdown(len(r.nodes)))
    if job.fixed_setup:  # R2: what is left of the setup takes as long at any size
        setup_left = max(0.0, r.start + job.setup - now)
        end = now + _scaled(r.end - now, setup_left, f)
        true_end = None if r.true_end is None else now + _scaled(r.true_end - now,
                                                                  setup_left, f)
    else:
        end = now + max(0.0, r.end - now) * f
        true_end = None if r.true_end is None else now + max(0.0, r.true_end - now) * f
    if job.resize_cost:
        charge = resize_charge(job, k)
        end += charge
        if true_end is not None:
            true_end += charge
    return Running(r.job, nodes, r.start, end, true_end, r.last_checkpoint, r.borrowed)


def _scaled(left: float, setup_left: float, f: float) -> float:
    """``left`` seconds, of which the first ``setup_left`` (at most) are setup, with the rest
    scaled by ``f``."""
    left = max(0.0, left)
    fixed = min(left, setup_left)
    return fixed + (left - fixed) * f


def resize_charge(job: Job, nodes: int) -> float:
    """Seconds a shrink or expand to ``nodes`` nodes adds to ``job``'s run: its
    ``resize_cost`` (time at full size) times its slowdown on ``nodes``, as a resumed job's
    setup takes at the size it starts at; with ``resize_fixed`` the ``resize_cost`` itself,
    whatever the size (0 when resizing is free). The engine counts it, times ``nodes``, as
    lost work."""
    if not job.resize_cost or job.resize_fixed:
        return job.resize_cost
    return job.resize_cost * (job.size / nodes if not job.serial else job.slowdown(nodes))
