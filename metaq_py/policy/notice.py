"""What happens between an advance notice and the on-demand job's arrival (Fan et al.,
"Hybrid Workload Scheduling on HPC Systems", IPDPS 2022, Sec. IV).

Strategies:

N
    Nothing happens until the job arrives.
CUA (collect until arrival)
    Reserve the idle nodes now, then keep collecting nodes as running jobs release them, until
    the reservation covers the notice. Never preempts.
CUP (collect until predicted)
    As CUA, and also count the nodes of the jobs expected to end before the estimated arrival.
    When those will not be enough, pick other running jobs in ascending order of preemption
    overhead (node-seconds, or seconds as PAA counts it: the scheduler's ``victim_order``)
    until the shortfall is covered, and preempt each before the arrival:
    a rigid job right after its last checkpoint that completes by the arrival (now, when none
    does), a malleable job ``warning`` seconds before the arrival (its two-minute warning: it
    loses only its setup whenever it goes, so it should go as late as possible). The decision
    asks to be woken at each planned preemption. When even preempting every candidate could not
    cover the notice, CUP preempts nothing and only collects
    (:attr:`~metaq_py.policy.choices.PreemptWhen.ALWAYS` plans every candidate even then, kept
    to measure what the choice moves). :attr:`CupTiming.AT_ARRIVAL`
    plans every preemption at the estimated arrival instead, rigid and malleable alike, kept
    to measure what the planned times move.

Several notices compete for free nodes: the earliest-issued notice is served first.

Reserved nodes that are still idle may run waiting work (``Start(..., borrowed=notice)``):
first any job that ends by the estimated arrival, then malleable jobs that would do useful work
before it (the arrival is later than now plus their setup). At arrival these borrowers are the
first jobs preempted, and only as many as the on-demand job needs.

A reservation whose job has not come ``release_after`` seconds (default 600) after the
estimated arrival is released, and the notice is dropped; the job, if it comes later, is an
on-demand job like any other.

The decision is recomputed from scratch at every call: CUP keeps no plan between decisions, so
a plan adapts at once when jobs end early or late.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from operator import attrgetter

from metaq_py.policy.checkpoint import last_checkpoint, lost_node_seconds, lost_seconds
from metaq_py.policy.choices import CupTiming, NoticeStrategy, PreemptWhen, VictimOrder
from metaq_py.policy.model import Job, JobId, Kind, Notice, Running
from metaq_py.policy.work import Work, ending_order

_NOW_EPS = 1e-6  # seconds: a planned instant this close to now is now
_notice_key = attrgetter("issued", "arrival", "id")


def notice_order(notices: Mapping[str, Notice]) -> list[Notice]:
    """Notices, earliest issued first (then earliest arrival, then id)."""
    return sorted(notices.values(), key=_notice_key)


def release_expired(
    work: Work, order: Sequence[Notice], awaited: Collection[str], *, release_after: float
) -> None:
    """Release every notice whose job is ``release_after`` late; wake for the next one.

    ``awaited`` names the notices whose job has arrived and waits: those are never released.
    """
    for notice in order:
        if notice.id in awaited or notice.id in work.closed:
            continue
        due = notice.arrival + release_after
        if work.now >= due:
            work.close(notice.id, release=True)
        else:
            work.wake_at(due)


def collect(work: Work, order: Sequence[Notice], strategy: NoticeStrategy, *,
            warning: float, timing: CupTiming = CupTiming.PLANNED,
            when: PreemptWhen = PreemptWhen.IT_STARTS,
            victim_order: VictimOrder = VictimOrder.NODE_SECONDS) -> None:
    """Reserve free nodes for each notice in turn (CUA, CUP), and plan CUP's preemptions
    (when, as ``timing`` says; whether even too few candidates are, as ``when`` says; in
    ascending overhead as ``victim_order`` counts it, as PAA's, R6 and R9)."""
    if strategy is NoticeStrategy.N:
        return
    claimed: set[JobId] = set()
    for notice in order:
        if notice.id in work.closed:
            continue
        need = notice.nodes - work.held(notice.id)
        if need <= 0:
            continue
        k = min(need, work.free.count)
        if k:
            work.reserve(notice.id, k)
            need -= k
        if need > 0 and strategy is NoticeStrategy.CUP:
            _plan_preemptions(work, notice, need, claimed, warning, timing, when,
                              victim_order is VictimOrder.NODE_SECONDS)


def _preempt_at(r: Running, now: float, arrival: float, warning: float,
                timing: CupTiming) -> float:
    """When CUP preempts ``r`` for a job arriving at ``arrival``."""
    if arrival <= now:
        return now
    if timing is CupTiming.AT_ARRIVAL:
        return arrival
    if r.job.kind is Kind.MALLEABLE:
        return max(now, arrival - warning)
    done = last_checkpoint(r, arrival)
    return done if done is not None and done > now else now


def _plan_preemptions(work: Work, notice: Notice, need: int, claimed: set[JobId],
                      warning: float, timing: CupTiming, when: PreemptWhen,
                      by_nodes: bool) -> None:
    now, arrival, gone = work.now, notice.arrival, work.gone
    for t, _, jid, _, borrowed in ending_order(work.snap, work.oracle):
        if t > arrival:
            break
        if borrowed is not None or jid in gone or jid in claimed:
            continue
        claimed.add(jid)
        need -= len(work.running(jid).nodes)
        if need <= 0:
            return
    candidates = []
    room = 0
    for jid, r0 in work.snap.running.items():
        if jid in claimed or jid in gone or r0.borrowed is not None \
                or r0.job.kind is Kind.ONDEMAND or r0.job.cores:
            continue
        r = work.running(jid)
        at = _preempt_at(r, now, arrival, warning, timing)
        overhead = lost_node_seconds(r, at) if by_nodes else lost_seconds(r, at)
        candidates.append((overhead, r.nodes[0], at, jid))
        room += len(r.nodes)
    if room < need and when is PreemptWhen.IT_STARTS:
        return
    candidates.sort()
    for _, _, at, jid in candidates:
        claimed.add(jid)
        k = len(work.running(jid).nodes)
        if at <= now + _NOW_EPS:
            work.preempt(jid)
            work.reserve(notice.id, min(k, need))
        else:
            work.wake_at(at)
        need -= k
        if need <= 0:
            return


def lend_reservations(work: Work, order: Sequence[Notice], queue: Sequence[Job]) -> None:
    """Backfill waiting batch jobs onto idle reserved nodes (see the module docstring)."""
    now, end, oracle, started = work.now, work.end, work.oracle, work.started
    for notice in order:
        if notice.id in work.closed:
            continue
        pool = work.reserved(notice.id)
        if pool.count == 0:
            continue
        window = min(notice.arrival, end) - now
        # a first pass keeps the batch jobs that fit in the pool now (it only shrinks) and
        # could end in the window at full size (a smaller size only runs longer)
        count = pool.count
        ondemand = Kind.ONDEMAND
        fits = [job for job in queue if job.min_size <= count and job.kind is not ondemand
                and not job.cores and job.time_at(job.size, oracle) <= window]
        for job in fits:
            count = pool.count
            if job.min_size > count or job.id in started:
                continue
            k = min(job.size, count)
            if job.time_at(k, oracle) <= window:
                work.start(job, pool.take(k), borrowed=notice.id)
                if pool.count == 0:
                    break
        count, malleable, arrival = pool.count, Kind.MALLEABLE, notice.arrival
        if count == 0:
            continue
        fits = [job for job in queue if job.kind is malleable and job.min_size <= count
                and now + job.setup < arrival]
        for job in fits:
            if pool.count == 0:
                break
            if job.kind is not Kind.MALLEABLE or job.min_size > pool.count \
                    or job.id in started or now + job.setup >= notice.arrival:
                continue
            k = min(job.size, pool.count)
            if now + job.time_at(k, oracle) <= end:
                work.start(job, pool.take(k), borrowed=notice.id)
