"""What happens when an on-demand job arrives (Fan et al., IPDPS 2022, Sec. IV).

The job takes nodes in this order, stopping as soon as it has enough:

1. the idle nodes reserved for its own notice;
2. the free nodes;
3. idle nodes reserved for other notices, latest-issued notice first: work that has arrived is
   certain, a notice is a forecast, and the notice keeps collecting until its own arrival
   (:attr:`OtherReservations.SPARED` skips this step, kept to measure what it moves);
4. the nodes of jobs borrowing its own reservation, preempted in ascending overhead and only
   as many as it needs (:attr:`Borrowers.AS_NEEDED`); :attr:`Borrowers.ALL`, the paper's
   rule, preempts every one of them at the arrival, kept to measure what the choice moves;
5. what its arrival strategy frees from the other running batch jobs:

   PAA (preempt at arrival)
       Preempt running rigid and malleable jobs in ascending order of preemption overhead until
       the request is met.
   SPAA (shrink, else preempt)
       Shrink malleable jobs as evenly as possible, never below their minimum, if shrinking alone
       covers the request; otherwise fall back to PAA, as the paper says.
   SPAA+ (our extension: shrink, then preempt)
       Shrink when that alone covers the request; otherwise preempt in ascending overhead only
       until shrinking the remaining malleable jobs covers the rest, then shrink.

Nothing is preempted or shrunk unless the job can then start: when even every candidate is not
enough, the job stays at the head of the queue (it gets EASY's protection there) and waits
(:attr:`PreemptWhen.IT_STARTS`). The paper is silent; :attr:`PreemptWhen.ALWAYS` preempts
every candidate even then, kept to measure what the choice moves: the job still waits, and
the nodes so freed are left free, to EASY, which protects the job at the head of the queue.
A shared node (:mod:`~metaq_py.policy.shares`) is one candidate, never a share alone: a share
frees no node, so the node is preempted whole, every share on it with it.
On-demand jobs are never preempted; borrowers of other notices' reservations are not
candidates either, since their nodes return to those reservations.

Overhead is measured in node-seconds lost (:func:`~metaq_py.policy.checkpoint.lost_node_seconds`)
rather than seconds: what a preemption wastes is machine time, and the utilisation metric counts
lost node-hours, so a small job that lost an hour is cheaper to stop than a 1,000-node job that
lost ten minutes. Ties go to the job holding the lowest node id, which keeps choices unique.
The other reading of "overhead", the seconds of its own work a job loses whatever its size
(:func:`~metaq_py.policy.checkpoint.lost_seconds`), is :attr:`VictimOrder.SECONDS`, kept to
measure what the choice moves; it orders borrowers and other victims alike.

"As evenly as possible" means water-filling on the nodes taken: every shrunk job gives the same
number of nodes, except that a job with less slack than its share gives all its slack and the
rest is spread over the others; leftover single nodes come from the jobs with the most slack.
Shrunk nodes are lent: when the on-demand job ends they are owed back to their lender.
"""

from __future__ import annotations

from collections.abc import Sequence

from metaq_py.policy.checkpoint import lost_node_seconds, lost_seconds
from metaq_py.policy.choices import (
    ArrivalStrategy,
    Borrowers,
    OtherReservations,
    PreemptWhen,
    VictimOrder,
)
from metaq_py.policy.model import Job, JobId, Kind, NodeId, Notice, Running
from metaq_py.policy.shares import SharedNode
from metaq_py.policy.work import Work

# One candidate victim: (overhead, lowest node, job id, nodes held, slack).
_Victim = tuple[float, NodeId, JobId, int, int]


def _overhead(r: Running, now: float, by_nodes: bool) -> float:
    """The overhead a preemption of ``r`` at ``now`` costs, as :class:`VictimOrder` counts it."""
    return lost_node_seconds(r, now) if by_nodes else lost_seconds(r, now)


def spread(slack: Sequence[tuple[int, NodeId, JobId]], amount: int) -> list[tuple[JobId, int]]:
    """Take ``amount`` nodes from jobs with the given ``(slack, lowest node, id)`` as evenly as
    possible (water-filling); returns ``(job, nodes taken)`` for every job that gives some.

    ``amount`` must not exceed the total slack.
    """
    items = sorted(slack)
    out: list[tuple[JobId, int]] = []
    m = len(items)
    for i, (s, _, jid) in enumerate(items):
        left = m - i
        q, r = divmod(amount, left)
        if s <= q:
            if s:
                out.append((jid, s))
            amount -= s
            continue
        # Every job from here on has more slack than q: q each, one more for the r largest.
        for j in range(i, m):
            take = q + (1 if j >= m - r else 0)
            if take:
                out.append((items[j][2], take))
        return out
    return out


def _victims(work: Work, by_nodes: bool) -> list[_Victim]:
    now, gone, closed, changed = work.now, work.gone, work.closed, work.changed
    malleable, ondemand = Kind.MALLEABLE, Kind.ONDEMAND
    out = []
    for jid, r in work.snap.running.items():
        kind = r.job.kind
        if kind is ondemand or jid in gone or r.job.cores:
            continue  # a share alone frees no node: shared nodes are preempted whole below
        if r.borrowed is not None and r.borrowed not in closed:
            continue
        if changed:
            r = changed.get(jid, r)
        k = len(r.nodes)
        slack = k - r.job.min_size if kind is malleable else 0
        out.append((_overhead(r, now, by_nodes), r.nodes[0], jid, k, slack))
    shares = work.snap.shares
    if shares is not None and shares.loads:
        # a shared node is one candidate: preempting it preempts every share on it, and its
        # overhead is their lost work, each weighed by its part of the node's cores (one node
        # held: the same figure in node-seconds and in seconds)
        running, cores = work.snap.running, shares.shape.cores
        for node, load in shares.loads.items():
            lost = sum(lost_node_seconds(running[j], now) * running[j].job.cores / cores
                       for j in load.jobs)
            out.append((lost, node, SharedNode(node), 1, 0))
    out.sort()
    return out


def _prefix(victims: Sequence[_Victim], need: int) -> list[JobId] | None:
    """The cheapest-first prefix of ``victims`` holding ``need`` nodes (None: not enough)."""
    out = []
    for v in victims:
        if need <= 0:
            break
        out.append(v[2])
        need -= v[3]
    return out if need <= 0 else None


def _plan(victims: list[_Victim], need: int,
          strategy: ArrivalStrategy) -> tuple[list[JobId], list[tuple[JobId, int]]] | None:
    """``(to preempt, to shrink)`` freeing ``need`` nodes, or None when impossible."""
    slack_total = sum(v[4] for v in victims)
    if strategy is not ArrivalStrategy.PAA and slack_total >= need:
        return [], spread([(v[4], v[1], v[2]) for v in victims if v[4]], need)
    if strategy is not ArrivalStrategy.SPAA_PLUS:
        chosen = _prefix(victims, need)
        return None if chosen is None else (chosen, [])
    if sum(v[3] for v in victims) < need:
        return None
    preempt: list[JobId] = []
    dropped: set[JobId] = set()
    for v in victims:
        if need <= slack_total:
            break
        preempt.append(v[2])
        dropped.add(v[2])
        need -= v[3]
        slack_total -= v[4]
    shrink = spread([(v[4], v[1], v[2]) for v in victims if v[4] and v[2] not in dropped],
                    max(0, need)) if need > 0 else []
    return preempt, shrink


def admit(work: Work, job: Job, strategy: ArrivalStrategy, order: Sequence[Notice],
          victim_order: VictimOrder = VictimOrder.NODE_SECONDS,
          borrowers_rule: Borrowers = Borrowers.AS_NEEDED,
          others: OtherReservations = OtherReservations.TAKEN,
          when: PreemptWhen = PreemptWhen.IT_STARTS) -> bool:
    """Start on-demand ``job`` now if the rules above can free enough nodes; else do nothing.

    ``order`` is the live notices, earliest issued first; ``victim_order`` what the ascending
    overhead of the victims counts; ``borrowers_rule`` which borrowers of its own reservation
    go; ``others`` whether it takes idle nodes reserved for other notices; ``when`` whether it
    preempts every candidate when they are too few. Returns whether the job started.
    """
    by_nodes = victim_order is VictimOrder.NODE_SECONDS
    closed = work.closed
    own = job.notice if job.notice in work.snap.notices and job.notice not in closed else None
    pools = [work.reserved(own)] if own is not None else []
    pools.append(work.free)
    if others is OtherReservations.TAKEN:
        pools.extend(work.reserved(n.id) for n in reversed(order)
                     if n.id != own and n.id not in closed)
    need = job.size - sum(p.count for p in pools)

    borrowers: list[JobId] = []
    every = borrowers_rule is Borrowers.ALL
    if (need > 0 or every) and own is not None:
        mine = [
            (_overhead(r, work.now, by_nodes), r.nodes[0], jid, len(r.nodes), 0)
            for jid in work.borrowers(own) if jid not in work.started
            for r in (work.running(jid),)
        ]
        mine.sort()
        chosen = None if every else _prefix(mine, need)
        if chosen is None:
            borrowers = [v[2] for v in mine]
            need -= sum(v[3] for v in mine)
        else:
            borrowers, need = chosen, 0
    plan: tuple[list[JobId], list[tuple[JobId, int]]] = ([], [])
    if need > 0:
        victims = _victims(work, by_nodes)
        found = _plan(victims, need, strategy)
        if found is None:
            if when is PreemptWhen.ALWAYS:
                _preempt_all(work, job, borrowers + [v[2] for v in victims])
            return False
        plan = found

    _preempt_all(work, job, borrowers + plan[0])
    nodes: list[NodeId] = []
    for jid, k in plan[1]:
        nodes.extend(work.shrink(jid, k, for_job=job.id))
    rest = job.size - len(nodes)
    for pool in pools:
        take = min(rest, pool.count)
        if take:
            nodes.extend(pool.take(take))
            rest -= take
    work.start(job, tuple(sorted(nodes)))
    if own is not None:
        work.close(own, release=False)
    return True


def _preempt_all(work: Work, job: Job, victims: Sequence[JobId]) -> None:
    """Preempt each of ``victims`` (a shared node whole) for ``job``."""
    for jid in victims:
        if isinstance(jid, SharedNode):
            work.preempt_node(jid.node, for_job=job.id)
        else:
            work.preempt(jid, for_job=job.id)
