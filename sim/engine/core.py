"""The simulated driver: a trace replayed through the live runner's own scheduler and Cluster.

The loop, once per instant at which anything happens:

1. advance the injected clock to the next event time (a :class:`~metaq_py.clock.Clock` by
   default; a :class:`~metaq_py.clock.WallClock` would make the same loop run in real time, as
   SimPy's ``RealtimeEnvironment`` does);
2. pop every event at that instant, in the heap's order (:mod:`sim.engine.agenda`): finishes, then
   notices, then submits, then wake-ups. Finishes and notices go to the Cluster; submits join
   the waiting list, which is kept sorted by the one queue order
   (:func:`~metaq_py.policy.order.queue_key`), so every decision is told ``ordered=True``;
3. if anything changed (or the scheduler's wake time came), take one snapshot, call
   ``decide`` once, time it, and apply its actions through the Cluster in order;
4. turn the actions into future events: a Start schedules the job's end from its true
   runtime at the size it got; a Preempt requeues the job (:func:`resumed`: original submit,
   remaining work per the checkpoint model) and counts the work it lost; a Shrink or Expand
   reschedules the end (linear speedup). Each job carries a version number, bumped whenever
   its end moves, so an end event scheduled earlier is recognised as stale and ignored.

The heap only ever holds the ends of running jobs, the next submit, the next notice and one
wake-up: arrivals are fed lazily from sorted streams (:mod:`sim.engine.arrivals`), so the cost of an
event depends on the machine and the queue, never on the length of the trace.

Decisions that provably cannot act are skipped (``skip_inert``, on by default; results are
identical, which the tests check by running both ways, failures included). The backfilling
policies (``easy``, ``conservative``) keep nothing between calls and leave a state in which
deciding again would start nothing. A job appended at the tail of the queue is behind every
other job, so it changes nothing for them; and when it needs more nodes than are free it
cannot start itself. An instant that brings only such submits (and, for a baseline, notices)
therefore cannot change the decision, and on Theta 2022 that spares about 30% of the calls.
Likewise, when every waiting job needs more nodes than are free, a backfilling pass starts
nothing, whatever else happened: that spares another quarter.

An on-demand mechanism's decision is its backfilling pass alone while the machine is
*plain*: no notice is live, no node is owed to a lender, and no on-demand job waits (its other
stages then have nothing to look at). So the same two rules hold for it at a plain instant,
the first one only when the previous decision was also taken at a plain instant (a decision
that preempted or released leaves work the backfilling has not seen yet). The first rule holds
at any instant, too, after a decision that did nothing at all, when the submits are batch jobs
that fit neither in the free nodes nor in any reservation's idle nodes (where the lending stage
would put them), and no notice came: what every other stage looks at is as that decision saw
it, and what depends on the time only shrinks (a backfilled job's window, a lent job's window)
or was asked for as a wake-up (a release, a CUP preemption). On the W5 hybrid workloads of
Theta 2022 this spares about 40% of the calls.

Checkpoints need no events: a rigid job's checkpoints follow a fixed schedule from its start
(:mod:`metaq_py.policy.checkpoint`), from which the policy and the preemption accounting both
compute the last one at any instant. The live runner, which hears about real checkpoints,
records them with :meth:`Cluster.checkpoint`; here that would add events and change nothing.
"""

from __future__ import annotations

import math
import time
from array import array
from bisect import bisect_left, insort
from collections.abc import Callable
from dataclasses import replace
from heapq import heappop, heappush
from itertools import count
from math import isnan
from typing import cast

import numpy as np

from metaq_py.clock import Clock
from metaq_py.cluster import Cluster, ClusterError
from metaq_py.policy.checkpoint import lost_node_seconds, resumed
from metaq_py.policy.mechanisms import Scheduler, make_scheduler
from metaq_py.policy.model import (
    Expand,
    Job,
    JobId,
    Kind,
    Notice,
    Preempt,
    Running,
    Shrink,
    Start,
)
from metaq_py.policy.order import queue_key
from sim.engine.agenda import Event, EventKind
from sim.engine.arrivals import Feed, feed
from sim.engine.errors import SimulationError
from sim.engine.failures import NodeFailures
from sim.run.metrics import KIND_CODE, Columns
from sim.run.result import Outcomes, Series, SimulationResult
from sim.trace.loader import Trace
from sim.workload.model import HybridWorkload

Progress = Callable[[int], None]
"""Called now and then with the number of jobs finished so far."""

_FINISH = int(EventKind.FINISH)
_NOTICE = int(EventKind.NOTICE)
_SUBMIT = int(EventKind.SUBMIT)
_FAILURE = int(EventKind.FAILURE)
_REPAIR = int(EventKind.REPAIR)
_WAKE = int(EventKind.WAKE)
_PROGRESS_EVERY = 4096  # events between progress calls: cheap, and smooth enough for a bar


class _Ledger:
    """Every job's outcome as columns, one row per submitted job in submit order.

    A row is opened at submit, not started and not ended (NaN); the engine then writes the
    job's start, preemptions, shrinks, lost work and end into it in place. ``version`` is the
    engine's own bookkeeping: bumped whenever the job's end moves, so that an end event
    scheduled earlier is recognised as stale. The metrics compute on the columns
    (:class:`~sim.run.metrics.Columns`), and :class:`~sim.run.metrics.JobOutcome` objects are built
    from them only when someone reads them (:class:`~sim.run.result.Outcomes`): a compact ledger
    costs a few array stores per job, and a million jobs take tens of bytes each instead of a
    few hundred.
    """

    __slots__ = ("end", "id", "kind", "lost", "preemptions", "runtime", "shrinks", "size",
                 "start", "submit", "version")

    def __init__(self) -> None:
        self.id: list[JobId] = []
        self.kind = array("b")
        self.size, self.preemptions, self.shrinks = array("q"), array("q"), array("q")
        self.version = array("q")
        self.submit, self.runtime = array("d"), array("d")
        self.start, self.end, self.lost = array("d"), array("d"), array("d")

    def open(self, job: Job) -> None:
        """A job was submitted: its row is the next one, not started, not ended (NaN)."""
        self.id.append(job.id)
        self.kind.append(KIND_CODE[job.kind])
        self.size.append(job.size)
        self.submit.append(job.submit)
        self.runtime.append(job.runtime if job.runtime is not None else job.walltime)
        self.start.append(math.nan)
        self.end.append(math.nan)
        self.lost.append(0.0)
        self.preemptions.append(0)
        self.shrinks.append(0)
        self.version.append(0)

    def columns(self) -> Columns:
        """The rows as arrays."""
        def floats(a: array) -> np.ndarray:
            return np.frombuffer(a, dtype=np.float64).copy()

        start, submit, runtime = floats(self.start), floats(self.submit), floats(self.runtime)
        size = np.frombuffer(self.size, dtype=np.int64).copy()
        return Columns(
            kind=np.frombuffer(self.kind, dtype=np.int8).copy(), size=size, submit=submit,
            start=start, end=floats(self.end), runtime=runtime, useful=runtime * size,
            preemptions=np.frombuffer(self.preemptions, dtype=np.int64).copy(),
            shrinks=np.frombuffer(self.shrinks, dtype=np.int64).copy(), lost=floats(self.lost),
            instant=start == submit)


def simulate(source: Trace | HybridWorkload, *, policy: str | Scheduler = "easy",
             oracle: bool = False, cqsim_oracle: bool = False, clock: Clock | None = None,
             progress: Progress | None = None,
             failures: NodeFailures | None = None) -> SimulationResult:
    """Replay ``source`` under ``policy`` and return what happened.

    ``source`` is a plain trace (every job rigid, no setup, no checkpoints) or a hybrid
    workload. ``policy`` is a scheduler name from :data:`metaq_py.policy.MECHANISMS` (built
    with ``oracle``) or a ready :class:`~metaq_py.policy.Scheduler`. ``cqsim_oracle`` is
    CQSim's half oracle (implies ``oracle``): waiting jobs are planned by their true runtimes
    but running jobs by their requested walltimes, as CQSim's node bookkeeping does; it exists
    to compare with CQSim like for like (``docs/model.md``). ``clock`` defaults to a simulated
    clock starting at the first event. ``failures`` adds node failures (:mod:`sim.engine.failures`):
    the source picks the node and does its bookkeeping; the engine requeues the killed job.
    """
    return Engine(source, policy=policy, oracle=oracle, cqsim_oracle=cqsim_oracle, clock=clock,
                  progress=progress, failures=failures).run()


class Engine:
    """One simulation run; :meth:`run` may be called once."""

    def __init__(self, source: Trace | HybridWorkload, *, policy: str | Scheduler = "easy",
                 oracle: bool = False, cqsim_oracle: bool = False, clock: Clock | None = None,
                 progress: Progress | None = None, skip_inert: bool = True,
                 failures: NodeFailures | None = None) -> None:
        oracle = oracle or cqsim_oracle
        if isinstance(policy, Scheduler):
            if oracle and not policy.oracle:
                raise ValueError("oracle=True was asked of a scheduler built without oracle; "
                                 "build it with make_scheduler(..., oracle=True)")
            self.scheduler = policy
        else:
            self.scheduler = make_scheduler(policy, oracle=oracle)
        self.feed: Feed = feed(source)
        # keep only the end order the scheduler reads (CQSim's half oracle reads the walltime
        # one, see run())
        reads_true = self.scheduler.oracle and not cqsim_oracle
        self.cluster = Cluster(self.feed.nodes, ends="true_end" if reads_true else "end")
        self.clock = clock
        self.progress = progress
        self.cqsim_oracle = cqsim_oracle
        self.failures = failures
        self.skip_inert = skip_inert
        self._ran = False

    def run(self) -> SimulationResult:
        """Simulate until every job has ended (or nothing more can happen)."""
        if self._ran:
            raise RuntimeError("an Engine runs once; build a new one for another run")
        self._ran = True
        wall0 = time.perf_counter()
        feed_, cluster, scheduler = self.feed, self.cluster, self.scheduler
        hybrid = feed_.hybrid
        progress = self.progress
        skip_inert = self.skip_inert
        cqsim_oracle = self.cqsim_oracle
        free = cluster.free
        reserved = cluster.reserved  # live views: bound once
        notices_live, owed_live = cluster.notices, cluster.owed
        baseline = scheduler.arrival is None
        ondemand = Kind.ONDEMAND
        ondemand_waiting = 0
        # whether deciding again now would do nothing unless something changed: the last
        # decision was the backfilling's alone, or it did nothing (module docstring)
        settled = True

        # The agenda of sim.engine.agenda, inlined: a plain list of (time, kind, seq, subject,
        # version) tuples and the C heap functions, with no method call per event.
        heap: list[Event] = []
        seq = count(1)
        jobs = feed_.jobs()
        notices = feed_.notices()
        first = next(jobs, None)
        if first is not None:
            heappush(heap, (first.submit, _SUBMIT, next(seq), first, 0))
        notice = next(notices, None)
        if notice is not None:
            heappush(heap, (notice.issued, _NOTICE, next(seq), notice, 0))
        clock = self.clock if self.clock is not None else Clock(heap[0][0] if heap else 0.0)
        failures = self.failures
        if failures is not None and failures.next_time() != math.inf:
            heappush(heap, (failures.next_time(), _FAILURE, next(seq), None, 0))

        ledger = _Ledger()
        started_at, ended_at, lost = ledger.start, ledger.end, ledger.lost
        preemptions, shrinks, versions = ledger.preemptions, ledger.shrinks, ledger.version
        live: dict[JobId, int] = {}  # the ledger row of every job submitted and not ended
        waiting: list[Job] = []
        waiting_by_id: dict[JobId, Job] = {}
        # the min_sizes of the waiting jobs: how many have each, and the distinct ones in
        # ascending order (smallest[0] is the least any waiting job needs)
        sizes: dict[int, int] = {}
        smallest: list[int] = []
        rows = 0
        finished = 0
        busy = 0
        events = 0
        wake_version = 0
        timings = array("d")
        s_time, s_busy, s_queued, s_reserved = array("d"), array("l"), array("l"), array("l")

        while heap:
            now = heap[0][0]
            clock.advance_to(now)
            changed = False
            inert = skip_inert
            # the smallest min_size of this instant's submits at the tail (more than any pool
            # holds while there are none)
            tail_least = cluster.total + 1
            while heap and heap[0][0] == now:
                _, kind, _, subject, version = heappop(heap)
                events += 1
                if kind == _FINISH:
                    row = live.get(subject)
                    if row is None or versions[row] != version:
                        continue  # the job was preempted or resized since
                    busy -= len(cluster.finish(cast(JobId, subject), now=now).nodes)
                    del live[subject]
                    ended_at[row] = now
                    finished += 1
                    changed = True
                    inert = False
                elif kind == _SUBMIT:
                    job = cast(Job, subject)
                    live[job.id] = rows
                    ledger.open(job)
                    rows += 1
                    waiting_by_id[job.id] = job
                    _count_in(sizes, smallest, job.min_size)
                    if job.kind is ondemand:
                        ondemand_waiting += 1
                        if not baseline:
                            inert = False  # its arrival strategy may preempt or shrink
                    if not waiting or queue_key(job) >= queue_key(waiting[-1]):
                        waiting.append(job)
                        if job.min_size <= free.count:
                            inert = False
                        elif job.min_size < tail_least:
                            tail_least = job.min_size
                    else:
                        insort(waiting, job, key=queue_key)
                        inert = False
                    arriving = next(jobs, None)
                    if arriving is not None:
                        heappush(heap, (arriving.submit, _SUBMIT, next(seq), arriving, 0))
                    changed = True
                elif kind == _NOTICE:
                    cluster.add_notice(cast(Notice, subject))
                    notice = next(notices, None)
                    if notice is not None:
                        heappush(heap, (notice.issued, _NOTICE, next(seq), notice, 0))
                    changed = True
                    if not baseline:
                        inert = False  # its notice strategy may reserve or preempt
                elif kind == _FAILURE:
                    strike = failures.strike(cluster, now)  # type: ignore[union-attr]
                    if strike.repair is not None and strike.repaired_at is not None:
                        heappush(heap, (strike.repaired_at, _REPAIR, next(seq), strike.repair,
                                        0))
                    if strike.kill is not None:
                        r = strike.kill.running
                        versions[live[r.job.id]] += 1  # its end event is stale now
                        busy -= len(r.nodes)
                        back = strike.kill.requeued
                        waiting_by_id[back.id] = back
                        insort(waiting, back, key=queue_key)
                        _count_in(sizes, smallest, back.min_size)
                        if back.kind is ondemand:
                            ondemand_waiting += 1
                    upcoming = failures.next_time()  # type: ignore[union-attr]
                    if upcoming != math.inf and (live or rows < feed_.count):
                        # failures stop with the work
                        heappush(heap, (upcoming, _FAILURE, next(seq), None, 0))
                    changed = True
                    inert = False
                elif kind == _REPAIR:
                    failures.repaired(cluster, subject, now)  # type: ignore[union-attr]
                    changed = True
                    inert = False
                elif version == wake_version:
                    changed = True
                    inert = False
                if progress is not None and events % _PROGRESS_EVERY == 0:
                    progress(finished)
            if not changed:
                continue
            plain = baseline or not (notices_live or owed_live or ondemand_waiting)
            if skip_inert:
                if not settled:
                    inert = False
                elif inert and not plain:
                    # the lending stage may also start a batch job on a reservation's idle nodes
                    inert = all([tail_least > pool.count for pool in reserved.values()])
                if plain and not inert:
                    # the backfilling starts only jobs that fit in the free nodes
                    inert = not smallest or free.count < smallest[0]
            if inert:
                # Only submits at the tail of the queue that fit in no idle nodes (and, for a
                # baseline, notices) since a decision that left nothing to do, or no waiting job
                # fits at a plain instant: deciding could not act (module docstring).
                settled = True
                s_time.append(now)
                s_busy.append(busy)
                s_queued.append(len(waiting))
                s_reserved.append(sum([pool.count for pool in reserved.values()])
                                  if reserved else 0)
                continue

            snap = cluster.snapshot(now=now, waiting=waiting, ordered=True,
                                    ondemand_waiting=ondemand_waiting)
            if cqsim_oracle:
                # the scheduler then sees running jobs end at their walltime, as in CQSim
                snap = replace(snap, ending_true=snap.ending)
            t0 = time.perf_counter()
            decision = scheduler.decide(snap)
            timings.append(time.perf_counter() - t0)
            settled = plain or not decision.actions
            wake_version += 1
            if decision.wake is not None and decision.wake > now:
                heappush(heap, (decision.wake, _WAKE, next(seq), None, wake_version))

            if decision.actions:
                requeued: list[Job] = []
                started: list[Job] = []
                for action in decision.actions:
                    try:
                        if type(action) is Start:
                            job = waiting_by_id.pop(action.job)
                            # what apply() does for a Start, without its dispatch
                            r = cluster.start(job, action.nodes, now=now,
                                              borrowed=action.borrowed)
                            row = live[job.id]
                            if isnan(started_at[row]):  # its first start, not a resumption
                                started_at[row] = now
                            versions[row] += 1
                            heappush(heap, (_end_of(r), _FINISH, next(seq), job.id,
                                            versions[row]))
                            busy += len(r.nodes)
                            started.append(job)
                            if job.kind is ondemand:
                                ondemand_waiting -= 1
                        elif type(action) is Preempt:
                            r = cluster.preempt(action.job, now=now)
                            row = live[action.job]
                            preemptions[row] += 1
                            lost[row] += lost_node_seconds(r, now)
                            versions[row] += 1
                            busy -= len(r.nodes)
                            back = resumed(r, now)
                            requeued.append(back)
                            if back.kind is ondemand:
                                ondemand_waiting += 1
                            waiting_by_id[back.id] = back
                        elif type(action) is Shrink or type(action) is Expand:
                            before = len(cluster.running[action.job].nodes)
                            if type(action) is Shrink:
                                r = cluster.shrink(action.job, action.nodes, now=now,
                                                   for_job=action.for_job)
                                shrinks[live[action.job]] += 1
                            else:
                                r = cluster.expand(action.job, action.nodes, now=now)
                            row = live[action.job]
                            versions[row] += 1
                            heappush(heap, (_end_of(r), _FINISH, next(seq), action.job,
                                            versions[row]))
                            busy += len(r.nodes) - before
                        else:
                            cluster.apply(action, now=now)
                    except (ClusterError, KeyError) as e:
                        raise SimulationError(
                            f"at t={now:g} the {scheduler.name} scheduler's {action!r} was "
                            f"refused: {e}") from e
                if started:
                    _drop(waiting, started)
                    for job in started:
                        _count_out(sizes, smallest, job.min_size)
                for back in requeued:
                    insort(waiting, back, key=queue_key)
                    _count_in(sizes, smallest, back.min_size)

            s_time.append(now)
            s_busy.append(busy)
            s_queued.append(len(waiting))
            s_reserved.append(sum([pool.count for pool in reserved.values()])
                              if reserved else 0)

        if progress is not None:
            progress(finished)
        categories = feed_.categories
        series = Series(time=np.frombuffer(s_time, dtype=np.float64).copy(),
                        busy=np.asarray(s_busy, dtype=np.int64),
                        queued=np.asarray(s_queued, dtype=np.int64),
                        reserved=np.asarray(s_reserved, dtype=np.int64))
        return SimulationResult(
            policy=scheduler.name, oracle=scheduler.oracle, cqsim_oracle=cqsim_oracle,
            nodes=cluster.total, hybrid=hybrid,
            outcomes=Outcomes(ledger.columns(), ledger.id, categories),
            decision_seconds=np.frombuffer(timings, dtype=np.float64).copy(),
            series=series, events=events, wall_seconds=time.perf_counter() - wall0)


def _drop(waiting: list[Job], jobs: list[Job]) -> None:
    """Remove ``jobs`` from ``waiting``, which is sorted by queue key: a bisect each, rather
    than a pass over a queue that is often hundreds of jobs long."""
    for job in jobs:
        if waiting[0] is job:  # the head, where a decision starts jobs first: no search
            del waiting[0]
            continue
        i = bisect_left(waiting, queue_key(job), key=queue_key)
        while waiting[i] is not job:  # past the jobs with an equal key
            i += 1
        del waiting[i]


def _count_in(sizes: dict[int, int], smallest: list[int], size: int) -> None:
    """One more waiting job needs ``size`` nodes at least."""
    n = sizes.get(size)
    if n:
        sizes[size] = n + 1
    else:
        sizes[size] = 1
        insort(smallest, size)


def _count_out(sizes: dict[int, int], smallest: list[int], size: int) -> None:
    """One waiting job that needs ``size`` nodes at least has started."""
    n = sizes[size]
    if n > 1:
        sizes[size] = n - 1
    else:
        del sizes[size]
        del smallest[bisect_left(smallest, size)]


def _end_of(r: Running) -> float:
    """When the engine ends a running job: at its true end, or killed at its walltime end."""
    true_end = r.true_end
    return r.end if true_end is None or true_end > r.end else true_end
