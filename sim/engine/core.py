"""The simulated driver: a trace replayed through the live runner's own scheduler and Cluster.

The loop (:meth:`Engine.run`), once per instant at which anything is due:

1. advance the injected clock to the next agenda item's time (a :class:`~metaq_py.clock.Clock`
   by default; a :class:`~metaq_py.clock.WallClock` would make the same loop run in real time,
   as SimPy's ``RealtimeEnvironment`` does);
2. pop every agenda item due at that instant, in the agenda's order (:mod:`sim.engine.agenda`):
   finishes, then notices, then submits, then wake-ups (:meth:`Engine._take_instant`).
   Finishes and notices go to the Cluster; submits join the waiting jobs
   (:mod:`sim.engine.waiting`), kept in the one queue order, so every decision is told
   ``ordered=True``, and for EASY, while the queue is long, in a waitlist too
   (:mod:`metaq_py.policy.waitlist`), which the snapshot carries so that a decision need not
   walk the queue;
3. if anything changed (or the scheduler's wake time came) and the skipping rules below do not
   say deciding is inert (:meth:`Engine._can_skip`), take one snapshot, call ``decide`` once,
   time it (:meth:`Engine._decide`), and apply its actions through :meth:`Cluster.apply` in
   order (:meth:`Engine._apply`);
4. turn the actions into agenda items: a Start schedules the job's end from its true
   runtime at the size it got; a Preempt requeues the job (:func:`resumed`: original submit,
   or the preemption time under ``requeue="at-preemption"``; remaining work per the
   checkpoint model) and counts the work it lost in the ledger
   (:mod:`sim.engine.ledger`); a Shrink or Expand reschedules the end (linear speedup), and
   counts the setup a charged resize repeats (:func:`~metaq_py.policy.work.resize_charge`)
   as lost work. Each job carries a version number, bumped whenever its end moves, so a
   finish put on the agenda earlier is recognised as stale and ignored;
5. sample the machine (busy nodes, queue length, reserved nodes) for the run's series.

Hand-inlining, kept here only (the policy core and the Cluster are written plainly, as the
reference): the agenda is a bare ``heapq`` list of tuples rather than an object with methods,
and the engine's state lives in attributes of one (compiled) object rather than being passed
around. Every action still goes through :meth:`Cluster.apply`, the same call the live runner
makes.

The agenda only ever holds the ends of running jobs, the next submit, the next notice and one
wake-up: arrivals are fed lazily from sorted streams (:mod:`sim.engine.arrivals`), so the cost of
an agenda item depends on the machine and the queue, never on the length of the trace.

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

Checkpoints need no agenda items: a rigid job's checkpoints follow a fixed schedule from its
start (:mod:`metaq_py.policy.checkpoint`), from which the policy and the preemption accounting
both compute the last one at any instant. The live runner, which hears about real checkpoints,
records them with :meth:`Cluster.checkpoint`; here that would add items and change nothing.
"""

from __future__ import annotations

import math
import time
from array import array
from collections.abc import Callable, Iterator
from dataclasses import replace
from heapq import heappop, heappush
from itertools import count
from math import isnan
from typing import cast

import numpy as np

from metaq_py.clock import Clock
from metaq_py.cluster import Cluster, ClusterError
from metaq_py.policy.checkpoint import lost_node_seconds, resumed
from metaq_py.policy.mechanisms import Backfill, Scheduler, make_scheduler
from metaq_py.policy.model import (
    Action,
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
from metaq_py.policy.work import resize_charge
from sim.engine.agenda import AgendaItem, AgendaKind, DecisionPace, InstantOrder
from sim.engine.arrivals import Feed, Precedence, feed
from sim.engine.errors import SimulationError
from sim.engine.failures import NodeFailures
from sim.engine.ledger import Ledger
from sim.engine.samples import MachineSamples
from sim.engine.waiting import Waiting
from sim.run.result import Outcomes, SimulationResult
from sim.trace.loader import Trace
from sim.workload.model import HybridWorkload

Progress = Callable[[int], None]
"""Called now and then with the number of jobs finished so far."""

_NOTICE = int(AgendaKind.NOTICE)
_FAILURE = int(AgendaKind.FAILURE)
_REPAIR = int(AgendaKind.REPAIR)
_WAKE = int(AgendaKind.WAKE)
_PROGRESS_EVERY = 4096  # agenda items between progress calls: cheap, and smooth enough for a bar


def simulate(source: Trace | HybridWorkload, *, policy: str | Scheduler = "easy",
             oracle: bool = False, cqsim_oracle: bool = False, clock: Clock | None = None,
             progress: Progress | None = None, failures: NodeFailures | None = None,
             dependencies: bool = False, requeue: str = "original",
             malleable_start: str = "largest",
             decisions: str = "per-instant",
             instant_order: str = "finishes-first") -> SimulationResult:
    """Replay ``source`` under ``policy`` and return what happened.

    ``source`` is a plain trace (every job rigid, no setup, no checkpoints) or a hybrid
    workload. ``policy`` is a scheduler name from :data:`metaq_py.policy.MECHANISMS` (built
    with ``oracle``) or a ready :class:`~metaq_py.policy.Scheduler`. ``cqsim_oracle`` is
    CQSim's half oracle (implies ``oracle``): waiting jobs are planned by their true runtimes
    but running jobs by their requested walltimes, as CQSim's node bookkeeping does; it exists
    to compare with CQSim like for like (``docs/model.md``). ``clock`` defaults to a simulated
    clock starting at the first agenda item. ``failures`` adds node failures
    (:mod:`sim.engine.failures`): the source picks the node and does its bookkeeping; the
    engine requeues the killed job. ``dependencies`` honours the trace's preceding jobs and
    think times (SWF fields 17 and 18): a job that waits for another arrives at the later of
    its own submit time and the other's final end plus the think time (``docs/model.md``).
    ``requeue`` is where a preempted job waits again (:class:`~sim.engine.waiting.Requeue`):
    ``original`` (its place) or ``at-preemption`` (the back of the queue); a job a failure
    killed keeps its place either way. ``malleable_start`` is the smallest size a malleable
    job may start at (:class:`~sim.engine.waiting.MalleableStart`): ``largest`` (its minimum,
    so it starts at the largest size the policy allows) or ``full`` (the policy sees it wait
    with its minimum at its full size; it keeps its real minimum once started).
    ``decisions`` is ``per-instant`` or ``per-item`` (:class:`~sim.engine.agenda.DecisionPace`);
    ``instant_order`` ``finishes-first`` or ``submits-first``
    (:class:`~sim.engine.agenda.InstantOrder`).
    """
    return Engine(source, policy=policy, oracle=oracle, cqsim_oracle=cqsim_oracle, clock=clock,
                  progress=progress, failures=failures, dependencies=dependencies,
                  requeue=requeue, malleable_start=malleable_start,
                  decisions=decisions, instant_order=instant_order).run()


# Over 300 lines (304): the run's state and every step of the loop stay on one class, which
# mypyc compiles; the hot path then reaches the state through native attributes, where a
# split would add a call and an object hop per agenda item (see docs/notebook.md, "Simulator
# speed").
class Engine:
    """One simulation run; :meth:`run` may be called once.

    :meth:`run` is the loop of the module docstring, one named step per stage:
    :meth:`_take_instant` (pop and handle what is due now), :meth:`_can_skip` (the skipping
    rules), :meth:`_decide` (one decision) with :meth:`_apply` (its actions) and
    its :class:`~sim.engine.samples.MachineSamples` (the machine over time). The run's state
    lives on the engine, created here.
    """

    def __init__(self, source: Trace | HybridWorkload, *, policy: str | Scheduler = "easy",
                 oracle: bool = False, cqsim_oracle: bool = False, clock: Clock | None = None,
                 progress: Progress | None = None, skip_inert: bool = True,
                 failures: NodeFailures | None = None, dependencies: bool = False,
                 requeue: str = "original", malleable_start: str = "largest",
                 decisions: str = "per-instant", instant_order: str = "finishes-first") -> None:
        self.scheduler = _scheduler(policy, oracle or cqsim_oracle)
        self._per_item = DecisionPace.of(decisions) is DecisionPace.PER_ITEM
        # the agenda ranks of finishes and submits (AgendaKind's, or the two swapped)
        self._k_finish, self._k_submit = InstantOrder.of(instant_order).ranks
        self.feed: Feed = feed(source)
        # keep only the end order the scheduler reads (CQSim's half oracle reads the walltime
        # one, see _decide())
        reads_true = self.scheduler.oracle and not cqsim_oracle
        self.cluster = Cluster(self.feed.nodes, ends="true_end" if reads_true else "end")
        self.clock = clock
        self.progress = progress
        self.cqsim_oracle = cqsim_oracle
        self.failures = failures
        self.skip_inert = skip_inert
        self._ran = False
        self._baseline = self.scheduler.arrival is None

        # The agenda of sim.engine.agenda, inlined: a plain list of (time, kind, seq, subject,
        # version) tuples and the C heap functions, with no method call per item.
        self._agenda: list[AgendaItem] = []
        self._seq = count(1)
        self._jobs: Iterator[Job] = self.feed.jobs()
        # with dependencies, the jobs that wait for another leave the stream and come back as
        # released submits (version 1), which do not pull the stream
        self._precedence: Precedence | None = None
        if dependencies:
            if self.feed.hybrid:
                raise ValueError("dependencies apply to a plain trace, not a hybrid workload "
                                 "(whose advance notices assume the recorded submit times)")
            self._precedence = Precedence(source, self._release)
            self._jobs = self._precedence.gate(self._jobs)
        self._notices: Iterator[Notice] = self.feed.notices()
        self._ledger = Ledger()
        self._live: dict[JobId, int] = {}  # the ledger row of every job submitted, not ended
        # a waitlist serves EASY's backfilling alone (conservative walks the queue anyway)
        self._waiting = Waiting(self.scheduler.oracle if self.scheduler.backfill is Backfill.EASY
                                else None, requeue=requeue, malleable_start=malleable_start)
        self._busy = 0  # nodes held by running jobs
        self._finished = 0
        self._handled = 0  # agenda items popped, stale ones included
        self._wake_version = 0
        # whether deciding again now would do nothing unless something changed: the last
        # decision was the backfilling's alone, or it did nothing (module docstring)
        self._settled = True
        # per instant: whether what came so far leaves deciding inert, and the smallest
        # min_size of its submits at the tail (more than any pool holds while there are none)
        self._inert = skip_inert
        self._tail_least = 0
        self._timings = array("d")
        self._samples = MachineSamples()

    def run(self) -> SimulationResult:
        """Simulate until every job has ended (or nothing more can happen)."""
        if self._ran:
            raise RuntimeError("an Engine runs once; build a new one for another run")
        self._ran = True
        wall0 = time.perf_counter()
        clock = self._prime()
        agenda = self._agenda
        while agenda:
            now = agenda[0][0]
            clock.advance_to(now)
            if not self._take_instant(now):
                continue
            plain = self._baseline or not (self.cluster.notices or self.cluster.owed
                                           or self.cluster.returned or self._waiting.ondemand)
            if self._can_skip(plain):
                self._settled = True
            else:
                self._decide(now, plain)
            self._samples.take(now, self._busy, len(self._waiting), self.cluster.reserved)
        if self.progress is not None:
            self.progress(self._finished)
        return self._result(time.perf_counter() - wall0)

    def _push(self, at: float, kind: int, subject: object, version: int) -> None:
        heappush(self._agenda, (at, kind, next(self._seq), subject, version))

    def _prime(self) -> Clock:
        """Put the first submit, notice and failure on the agenda; the clock to run on."""
        first = next(self._jobs, None)
        if first is not None:
            self._push(first.submit, self._k_submit, first, 0)
        notice = next(self._notices, None)
        if notice is not None:
            self._push(notice.issued, _NOTICE, notice, 0)
        agenda = self._agenda
        clock = self.clock if self.clock is not None else Clock(agenda[0][0] if agenda else 0.0)
        failures = self.failures
        if failures is not None and failures.next_time() != math.inf:
            self._push(failures.next_time(), _FAILURE, None, 0)
        return clock

    def _take_instant(self, now: float) -> bool:
        """Pop and handle the items due at ``now`` in the agenda's order (per item: up to the
        first that changes something); whether anything changed (a stale one does not)."""
        self._inert = self.skip_inert
        self._tail_least = self.cluster.total + 1
        agenda, progress = self._agenda, self.progress
        finish, submit = self._k_finish, self._k_submit
        changed = False
        while agenda and agenda[0][0] == now and not (changed and self._per_item):
            _, kind, _, subject, version = heappop(agenda)
            self._handled += 1
            if kind == finish:
                if self._finish(subject, version, now):
                    changed = True
            elif kind == submit:
                self._submit(cast(Job, subject), version)
                changed = True
            elif kind == _NOTICE:
                self._notice(cast(Notice, subject))
                changed = True
            elif kind == _FAILURE:
                self._failure(now)
                changed = True
            elif kind == _REPAIR:
                failures = self.failures
                assert failures is not None  # only a run with failures has repairs
                failures.repaired(self.cluster, subject, now)
                changed = True
                self._inert = False
            elif version == self._wake_version:
                changed = True
                self._inert = False
            if progress is not None and self._handled % _PROGRESS_EVERY == 0:
                progress(self._finished)
        return changed

    def _finish(self, job_id: JobId, version: int, now: float) -> bool:
        """A job's end came; False when it was stale (the job was preempted or resized since)."""
        row = self._live.get(job_id)
        ledger = self._ledger
        if row is None or ledger.version[row] != version:
            return False
        self._busy -= len(self.cluster.finish(job_id, now=now).nodes)
        del self._live[job_id]
        ledger.end[row] = now
        self._finished += 1
        self._inert = False
        if self._precedence is not None:
            self._precedence.ended_at(job_id, now)
        return True

    def _submit(self, job: Job, version: int) -> None:
        """``job`` arrives; unless it is a released dependent (``version`` 1), the next arrival
        of the stream goes on the agenda."""
        self._live[job.id] = self._ledger.open(job, self.feed.charged.get(job.id, 0.0)) \
            if self.feed.charged else self._ledger.open(job)
        job = self._waiting.as_waiting(job)
        if job.kind is Kind.ONDEMAND and not self._baseline:
            self._inert = False  # its arrival strategy may preempt or shrink
        if not self._waiting.submit(job):
            self._inert = False  # it went ahead of some waiting job
        elif job.min_size <= self.cluster.free.count:
            self._inert = False
        elif job.min_size < self._tail_least:
            self._tail_least = job.min_size
        if version == 0:
            arriving = next(self._jobs, None)
            if arriving is not None:
                self._push(arriving.submit, self._k_submit, arriving, 0)

    def _release(self, job: Job, at: float) -> None:
        """A job that waited for its preceding job arrives at ``at`` (its submit moves there,
        so its wait counts from it)."""
        self._push(at, self._k_submit, job if at == job.submit else replace(job, submit=at), 1)

    def _notice(self, notice: Notice) -> None:
        """``notice`` is issued; the next one goes on the agenda."""
        self.cluster.add_notice(notice)
        upcoming = next(self._notices, None)
        if upcoming is not None:
            self._push(upcoming.issued, _NOTICE, upcoming, 0)
        if not self._baseline:
            self._inert = False  # its notice strategy may reserve or preempt

    def _failure(self, now: float) -> None:
        """A node fails: the failure source strikes; a killed job waits again."""
        failures = self.failures
        assert failures is not None  # only a run with failures has failures on its agenda
        strike = failures.strike(self.cluster, now)
        if strike.repair is not None and strike.repaired_at is not None:
            self._push(strike.repaired_at, _REPAIR, strike.repair, 0)
        if strike.kill is not None:
            r = strike.kill.running
            self._ledger.version[self._live[r.job.id]] += 1  # its finish is stale now
            self._busy -= len(r.nodes)
            self._waiting.requeue(strike.kill.requeued)
        upcoming = failures.next_time()
        if upcoming != math.inf and (self._live or len(self._ledger) < self.feed.count):
            self._push(upcoming, _FAILURE, None, 0)  # failures stop with the work
        self._inert = False

    def _can_skip(self, plain: bool) -> bool:
        """Whether deciding now provably could not act (module docstring): only submits at the
        tail of the queue that fit in no idle nodes (and, for a baseline, notices) came since
        a decision that left nothing to do, or no waiting job fits at a ``plain`` instant."""
        if not self.skip_inert:
            return False
        inert = self._inert
        if not self._settled:
            inert = False
        elif inert and not plain:
            # the lending stage may also start a batch job on a reservation's idle nodes
            tail_least = self._tail_least
            inert = all([tail_least > pool.count for pool in self.cluster.reserved.values()])
        if plain and not inert:
            # the backfilling starts only jobs that fit in the free nodes
            inert = self._waiting.fits_none(self.cluster.free.count)
        return inert

    def _decide(self, now: float, plain: bool) -> None:
        """One decision at ``now``, timed, and its actions applied."""
        waiting = self._waiting
        snap = self.cluster.snapshot(now=now, waiting=waiting.jobs, ordered=True,
                                     ondemand_waiting=waiting.ondemand,
                                     waitlist=waiting.waitlist)
        if self.cqsim_oracle:
            # the scheduler then sees running jobs end at their walltime, as in CQSim
            snap = replace(snap, ending_true=snap.ending)
        t0 = time.perf_counter()
        decision = self.scheduler.decide(snap)
        self._timings.append(time.perf_counter() - t0)
        self._settled = plain or not decision.actions
        self._wake_version += 1
        if decision.wake is not None and decision.wake > now:
            self._push(decision.wake, _WAKE, None, self._wake_version)
        if decision.actions:
            self._apply(decision.actions, now)

    def _apply(self, actions: tuple[Action, ...], now: float) -> None:
        """Apply one decision's ``actions`` in order through :meth:`Cluster.apply`, and keep
        the ledger, the agenda and the waiting jobs in step with each."""
        started: list[Job] = []
        for action in actions:
            try:
                self._apply_one(action, now, started)
            except (ClusterError, KeyError) as e:
                raise SimulationError(
                    f"at t={now:g} the {self.scheduler.name} scheduler's {action!r} was "
                    f"refused: {e}") from e
        if started:
            self._waiting.remove(started)

    def _apply_one(self, action: Action, now: float, started: list[Job]) -> None:
        cluster, ledger, live = self.cluster, self._ledger, self._live
        if isinstance(action, Start):
            job = self._waiting.take(action.job)
            r = _running(cluster.apply(action, now=now, job=self._waiting.placed(job)))
            row = live[job.id]
            if isnan(ledger.start[row]):  # its first start, not a resumption
                ledger.start[row] = now
            ledger.version[row] += 1
            self._push(_end_of(r), self._k_finish, job.id, ledger.version[row])
            self._busy += len(r.nodes)
            started.append(job)
        elif isinstance(action, Preempt):
            r = _running(cluster.apply(action, now=now))
            row = live[action.job]
            ledger.preemptions[row] += 1
            ledger.lost[row] += lost_node_seconds(r, now)
            ledger.version[row] += 1
            self._busy -= len(r.nodes)
            back = resumed(r, now)
            # the ledger row keeps the original submit: turnaround counts from it either way
            self._waiting.requeue(back, at=now)
        elif isinstance(action, (Shrink, Expand)):
            before = len(cluster.running[action.job].nodes)
            r = _running(cluster.apply(action, now=now))
            row = live[action.job]
            if isinstance(action, Shrink):
                ledger.shrinks[row] += 1
            if r.job.resize_cost:  # the setup a resize repeats is lost, as a resumption's is
                ledger.lost[row] += resize_charge(r.job, len(r.nodes)) * len(r.nodes)
            ledger.version[row] += 1
            self._push(_end_of(r), self._k_finish, action.job, ledger.version[row])
            self._busy += len(r.nodes) - before
        else:
            cluster.apply(action, now=now)

    def _result(self, wall_seconds: float) -> SimulationResult:
        scheduler, ledger = self.scheduler, self._ledger
        return SimulationResult(
            policy=scheduler.name, oracle=scheduler.oracle, cqsim_oracle=self.cqsim_oracle,
            nodes=self.cluster.total, hybrid=self.feed.hybrid,
            outcomes=Outcomes(ledger.columns(), ledger.id, self.feed.categories),
            decision_seconds=np.frombuffer(self._timings, dtype=np.float64).copy(),
            series=self._samples.series(), agenda_items=self._handled, wall_seconds=wall_seconds)


def _scheduler(policy: str | Scheduler, oracle: bool) -> Scheduler:
    """The scheduler a run decides with: ``policy`` built with ``oracle``, or ``policy`` itself
    when it is a ready scheduler (which must then have been built with oracle if asked)."""
    if not isinstance(policy, Scheduler):
        return make_scheduler(policy, oracle=oracle)
    if oracle and not policy.oracle:
        raise ValueError("oracle=True was asked of a scheduler built without oracle; "
                         "build it with make_scheduler(..., oracle=True)")
    return policy


def _running(r: Running | None) -> Running:
    """What :meth:`Cluster.apply` returns for a Start, Preempt, Shrink or Expand."""
    assert r is not None
    return r


def _end_of(r: Running) -> float:
    """When the engine ends a running job: at its true end, or killed at its walltime end."""
    true_end = r.true_end
    return r.end if true_end is None or true_end > r.end else true_end
