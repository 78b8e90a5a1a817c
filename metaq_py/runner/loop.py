"""The live driver: ``metaq run`` inside a batch job.

One :class:`Runner` owns one allocation. Node ids ``0 .. N-1`` of its
:class:`~metaq_py.cluster.Cluster` are the allocation's hosts in the batch system's order. The
loop is event-driven: it blocks on one inbox fed by task exits (the launch layer's watcher
threads), queue changes (a :class:`~metaq_py.queue.watcher.QueueWatcher` thread over the task
folders and ``notices/``, and one over the run folder of each running task that declares
``CHECKPOINT`` or an in-place ``RESIZE``, where its checkpoints and resize confirmations land)
and signals,
with a timeout at the next thing it must do itself (a kill after a grace period, a heartbeat,
the decision's ``wake``, the end of the allocation, the next launch after a pause).
It never busy-polls.

Each pass, at one instant:

1. lost claims of other jobs are taken back (at start and at every heartbeat);
2. kills whose grace period is over, resize confirmations and their deadlines, checkpoints;
3. at the end of the allocation (its end minus ``margin`` minus the grace periods), or on
   SIGTERM/SIGUSR1/SIGINT, every task is stopped and requeued, and the runner exits;
4. otherwise: notices are read, the waiting tasks become policy jobs, the scheduler decides,
   and its actions are applied to the Cluster and then to processes (:meth:`Runner._apply`);
5. claimed tasks are launched when their hosts are physically free, one per launch pause.

A preempted task, a task being shrunk and a task stopped for a restart keep their hosts
*physically* until their processes are gone or the shrink is confirmed, even though the
Cluster has already handed the nodes on: a start on such a host waits for them
("draining"). So an on-demand task never shares a node with its victim.

The runner stops when nothing is running and the last decision started nothing (so nothing
waiting can ever fit here), unless ``linger`` keeps it waiting for new work until the
allocation ends. ``docs/events.md`` lists the events it writes.
"""

from __future__ import annotations

import contextlib
import math
import os
import queue as stdqueue
import signal
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import is_
from pathlib import Path

from metaq_py.batch import Allocation, BatchError, BatchSystem
from metaq_py.clock import Clock, WallClock
from metaq_py.cluster import Cluster, ClusterError
from metaq_py.durations import format_duration
from metaq_py.errors import MetaqError
from metaq_py.launch import HostFiles, LaunchError, LaunchSpec, TaskProcess, launch
from metaq_py.policy import (
    Expand,
    Job,
    Kind,
    Preempt,
    Release,
    Reserve,
    Shrink,
    Start,
    lost_node_seconds,
    make_scheduler,
)
from metaq_py.queue.index import Task
from metaq_py.queue.notices import load_notices
from metaq_py.queue.premade import Spares
from metaq_py.queue.store import FAILED, FINISHED, NOTICES, Queue
from metaq_py.queue.watcher import QueueWatcher
from metaq_py.runner.events import Recorder
from metaq_py.runner.live_task import LiveTask, Why
from metaq_py.runner.offers import fit_problem, gpu_ids_for, job_of, past_runs
from metaq_py.runner.reclaim import lost_claims

__all__ = ["RunOptions", "Runner", "RunnerError"]

_EXIT, _CHANGE, _SIGNAL = "exit", "change", "signal"
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT)
_MAX_REDECIDE = 8

WINDOW = 1000
"""At most this many waiting tasks (or 16 per node, if more) are handed to the scheduler, in
queue order, plus every waiting on-demand task. Like SLURM's ``bf_max_job_test``, it bounds the
cost of a decision on a queue of 100,000 tasks; a task further back waits until it moves up."""


class RunnerError(MetaqError):
    """The runner cannot go on (its queue vanished, the batch system cannot say what it holds)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOptions:
    """How ``metaq run`` behaves; every field has a command-line flag of the same name.

    ``max_tasks`` and ``launch_pause`` protect the batch node (``None``: ``caps.tasks`` and
    ``caps.launch_pause`` of ``metaq.yaml``); on-demand tasks are time-critical and ignore the
    cap. ``grace`` is how long a task without ``#METAQ SIGNAL`` gets between its SIGTERM and
    its kill, and also the warning before a resize by restart. ``margin`` is kept free before
    the end of the allocation, after every task's grace period, for requeueing and exiting.
    ``srun`` wraps each task in its own ``srun`` step. ``release_after`` and ``warning`` go to
    the on-demand mechanisms (see ``docs/model.md``). ``fs_events`` lets file-system events
    (watchdog) wake the runner at once when the queue changes; without them it finds changes
    by polling every ``poll_interval`` of ``metaq.yaml``. ``handle_signals`` (no flag; tests
    turn it off) installs the stop handlers when the runner is in the main thread.
    """

    mechanism: str = "easy"
    linger: bool = False
    max_tasks: int | None = None
    launch_pause: float | None = None
    grace: float = 60.0
    margin: float = 10.0
    srun: bool = False
    srun_args: tuple[str, ...] = ()
    release_after: float = 600.0
    warning: float = 120.0
    fs_events: bool = True
    handle_signals: bool = True

    def __post_init__(self) -> None:
        for name in ("grace", "margin", "release_after", "warning"):
            value = getattr(self, name)
            if not (value >= 0 and math.isfinite(value)):
                raise RunnerError(f"--{name.replace('_', '-')} must be a finite number of "
                                  f"seconds >= 0, not {value}")
        if self.max_tasks is not None and self.max_tasks < 1:
            raise RunnerError(f"--max-tasks must be at least 1, not {self.max_tasks}")
        if self.launch_pause is not None and not 0 <= self.launch_pause < 3600:
            raise RunnerError(f"--launch-pause must be between 0 and an hour, not "
                              f"{self.launch_pause}")


class Runner:
    """The live loop of one batch job over one queue; :meth:`run` once."""

    def __init__(self, queue: Queue, batch: BatchSystem, *, options: RunOptions | None = None,
                 clock: Clock | None = None, say: Callable[[str], None] | None = None) -> None:
        self.queue = queue
        self.batch = batch
        self.options = options or RunOptions()
        self.clock = clock or WallClock()
        self.say = say or (lambda line: print(f"metaq run: {line}", file=sys.stderr, flush=True))
        try:
            self.scheduler = make_scheduler(self.options.mechanism,
                                            release_after=self.options.release_after,
                                            warning=self.options.warning)
        except ValueError as e:
            raise RunnerError(str(e)) from None
        caps = queue.config.caps
        self.max_tasks = self.options.max_tasks or caps.tasks
        self.launch_pause = (caps.launch_pause if self.options.launch_pause is None
                             else self.options.launch_pause)
        self.inbox: stdqueue.SimpleQueue = stdqueue.SimpleQueue()
        self.host = socket.gethostname()
        self.live: dict[str, LiveTask] = {}
        self.to_launch: list[LiveTask] = []
        self.draining: dict[int, str] = {}
        self.stopping: str | None = None
        self.stop_reason = ""
        self.exit_code = 0
        self.unsettled: list[LiveTask] = []
        self.rundir_watchers: dict[str, threading.Event] = {}
        self.queue_watcher: QueueWatcher | None = None
        self.watcher_lock = threading.Lock()
        self._ran = False

    # --- the loop ---------------------------------------------------------------------------

    def run(self) -> int:
        """Run until done; the exit status for ``metaq run`` (0, or 1 when the queue vanished
        or the runner could not start)."""
        if self._ran:
            raise RunnerError("a Runner runs once")
        self._ran = True
        self._setup()
        handlers = self._install_signals()
        closing = threading.Event()
        try:
            self._loop(closing)
        finally:
            with self.watcher_lock:
                closing.set()
                if self.queue_watcher is not None:
                    self.queue_watcher.close()  # the daemon thread ends at its next wake-up
            for sig, old in handlers.items():
                signal.signal(sig, old)
            self._finish_up()
        return self.exit_code

    def _watch_queue(self, closing: threading.Event) -> None:
        """Start watching the task folders and ``notices/``, then wake the loop on each change.

        Starting the watcher (importing watchdog, starting its threads) takes tens of
        milliseconds, so the loop starts this thread only after its first decision and
        launches, and the watcher starts here while the loop goes on; once it is watching, it
        wakes the loop once, so that nothing changed meanwhile goes unseen."""
        # Not this job's whole runs/ folder: it gains a folder per task, and every change
        # would make the watcher walk all of them. See _watch_rundir.
        watcher = QueueWatcher(
            [*(self.queue.root / f for f in self.queue.config.folders),
             self.queue.root / NOTICES],
            interval=self.queue.config.poll_interval, use_watchdog=self.options.fs_events)
        with self.watcher_lock:
            if closing.is_set():
                watcher.close()
                return
            self.queue_watcher = watcher
        self.say(f"queue changes: {'file-system events and ' if watcher.live else ''}polling "
                 f"every {format_duration(self.queue.config.poll_interval)}")
        self.inbox.put((_CHANGE, None))
        self._watch(watcher, closing)

    def _setup(self) -> None:
        q = self.queue
        q.check_one_filesystem()
        try:
            self.alloc: Allocation = self.batch.allocation()
        except BatchError as e:
            raise RunnerError(f"cannot learn this job's allocation: {e}") from None
        self.jobid, self.machine = self.alloc.jobid, self.alloc.machine
        self.cluster = Cluster(self.alloc.nnodes)
        self.end = self.alloc.end_time if self.alloc.end_time is not None else math.inf
        self.runs = q.job_dir(self.jobid) / "runs"
        self.runs.mkdir(parents=True, exist_ok=True)
        self.logs = q.job_dir(self.jobid) / "logs"
        self.hostfiles = HostFiles(q.job_dir(self.jobid) / "hostfiles")
        self.folders: set[Path] = set()  # folders known to exist for run folders and logs
        # The runner's environment, which every task starts from, read once (os.environ
        # decodes every variable at every read).
        self.environ = dict(os.environ)
        self.record = Recorder(q.events(self.jobid), now=self.clock.now, warn=self.say,
                               buffered=True)
        now = self.clock.now()
        self.next_heartbeat = now + q.config.heartbeat
        self.next_launch = now
        self.wake: float | None = None
        self.redecide = False
        """A launch failed since the last decision (its task went back to its folder, or to
        failed/, and its hosts are free): decide again at once, and do not stop before."""
        self.passes = 0
        self.started_any = False
        self.notice_ids: set[str] = set()
        self.arrived: dict[str, int] = {}
        self.skipped: dict[str, str] = {}
        self.jobs_cache: dict[str, tuple[Task, Job | None]] = {}
        self.last_window: tuple[Sequence[Task], tuple[Job, ...]] | None = None
        self.ondemand: dict[str, Task] = {}
        self.seen_serial: int | None = None
        self.waiting_count = 0
        self._reclaim_lost(now)
        self.record("runner-start", jobid=self.jobid, machine=self.machine,
                    hosts=list(self.alloc.nodes), gpus_per_node=self.alloc.gpus_per_node,
                    end=None if math.isinf(self.end) else self.end,
                    mechanism=self.scheduler.name, max_tasks=self.max_tasks,
                    launch_pause=self.launch_pause, pid=os.getpid(), host=self.host)
        self.record.flush()
        left = "no time limit" if math.isinf(self.end) else \
            f"{format_duration(round(self.end - now))} left"
        self.say(f"job {self.jobid} on {self.machine}: {self.alloc.nnodes} node(s), "
                 f"{self.alloc.gpus_per_node} GPU(s) each, {left}, {self.scheduler.name}")
        # Last, so that nothing before can fail and leave its helper thread behind.
        self.spares = Spares(q.job_dir(self.jobid) / ".spares")
        q.spares = self.spares

    def _install_signals(self) -> dict[int, object]:
        if not self.options.handle_signals or threading.current_thread() is not \
                threading.main_thread():
            return {}
        old = {}
        for sig in _STOP_SIGNALS:
            # SimpleQueue.put is reentrant: safe to call from a signal handler.
            old[sig] = signal.signal(sig, lambda s, _f: self.inbox.put((_SIGNAL, s)))
        return old

    def _watch(self, watcher: QueueWatcher, closing: threading.Event, *,
               close: bool = False) -> None:
        while not closing.is_set():
            if watcher.wait(timeout=self.queue.config.poll_interval):
                self.inbox.put((_CHANGE, None))
        if close:
            watcher.close()  # here, so that the loop never waits for an observer to stop

    def _watch_rundir(self, live: LiveTask) -> None:
        """Wake the loop when ``live`` checkpoints or confirms a resize, if it declares
        ``CHECKPOINT`` or an in-place ``RESIZE``. Another task's checkpoint (made with
        ``metaq checkpoint`` alone) is seen at the next pass, or at its exit."""
        spec = live.claim.spec
        in_place = spec.resize is not None and spec.resize.mode == "in-place"
        if (spec.checkpoint is None and not in_place) or live.spec is None \
                or live.id in self.rundir_watchers:
            return
        watcher = QueueWatcher([live.spec.rundir], interval=self.queue.config.poll_interval,
                               use_watchdog=self.options.fs_events)
        closing = threading.Event()
        threading.Thread(target=self._watch, args=(watcher, closing), kwargs={"close": True},
                         name=f"metaq run folder {live.id}", daemon=True).start()
        self.rundir_watchers[live.id] = closing

    def _unwatch_rundir(self, task_id: str) -> None:
        closing = self.rundir_watchers.pop(task_id, None)
        if closing is not None:
            closing.set()

    def _loop(self, closing: threading.Event) -> None:
        watching = False
        while True:
            self._pass()
            if self._done():
                return
            if not watching:  # after the first pass: see _watch_queue
                watching = True
                threading.Thread(target=self._watch_queue, args=(closing,),
                                 name="metaq queue watcher", daemon=True).start()
            timeout = max(0.0, self._next_deadline() - self.clock.now())
            self.record.flush()  # one write per wake-up, and a complete log while waiting
            try:
                item = self.inbox.get(timeout=min(timeout, 3600.0))
            except stdqueue.Empty:
                continue
            self._handle(item)
            while True:  # take everything that arrived meanwhile before deciding
                try:
                    self._handle(self.inbox.get_nowait())
                except stdqueue.Empty:
                    break

    def _handle(self, item: tuple[str, object]) -> None:
        kind, payload = item
        if kind == _EXIT:
            assert isinstance(payload, TaskProcess)
            self._on_exit(payload)
        elif kind == _SIGNAL:
            name = signal.Signals(payload).name
            if self.stopping is None:
                self._stop_all(f"received {name}")
            else:  # a second signal: no more grace
                self.say(f"received {name} again: killing every task now")
                for t in self.live.values():
                    t.stop(t.why or Why.INTERRUPT, now=self.clock.now(), grace=0)
                    t.kill_if_due(self.clock.now())

    def _done(self) -> bool:
        if self.live or self.to_launch or (self.unsettled and self.stopping is None):
            return False
        if self.stopping is not None:
            self.stop_reason = self.stopping
            return True
        if self.redecide:
            return False  # the waiting tasks changed since the decision that found none to run
        if self.options.linger:
            return False
        if self.cluster.notices:
            return False  # a reservation waits for its on-demand task, or its release
        if self.waiting_count:
            self.stop_reason = (f"nothing left that fits: {self.waiting_count} waiting task(s) "
                                f"need more time than this allocation has left")
        elif self.skipped:
            self.stop_reason = (f"nothing left that fits: {len(self.skipped)} waiting task(s) "
                                f"can never run in this allocation")
        else:
            self.stop_reason = "nothing left to run"
        return True

    def _next_deadline(self) -> float:
        times = [self.next_heartbeat, self._stop_at()]
        if self.redecide:
            times.append(self.clock.now())
        if self.wake is not None:
            times.append(self.wake)
        for t in self.live.values():
            if t.kill_at is not None:
                times.append(t.kill_at)
            if t.resizing is not None:
                times.append(t.resizing.deadline)
        if self.to_launch:
            times.append(self.next_launch)
        return min(times)

    def _stop_at(self) -> float:
        graces = [self.options.grace, *(t.grace for t in self.live.values())]
        return self.end - self.options.margin - max(graces)

    # --- one pass ---------------------------------------------------------------------------

    def _pass(self) -> None:
        self.passes += 1
        now = self.clock.now()
        if not self.queue.root.is_dir():
            self._lose_queue()
            return
        for t in list(self.live.values()):
            t.kill_if_due(now)
        self._check_resizes(now)
        self._check_checkpoints()
        if now >= self.next_heartbeat:
            self._heartbeat(now)
        if self.stopping is None and now >= self._stop_at():
            self._stop_all(f"the allocation ends at {_clock_time(self.end)}")
        if self.stopping is None:
            self._sync_notices(now)
            self._decide(now)
        self._launch_ready()

    def _decide(self, now: float) -> None:
        self.wake = None
        self.redecide = False
        for _ in range(_MAX_REDECIDE):
            waiting = self._waiting()
            snap = self.cluster.snapshot(now=now, waiting=waiting, ordered=True,
                                         end=self.end - self.options.margin - self.options.grace)
            decision = self.scheduler.decide(snap)
            self.wake = decision.wake if decision.wake is not None and decision.wake > now \
                else None
            if self._apply(decision.actions, now):
                return

    def _waiting(self) -> list[Job]:
        """The waiting tasks this allocation could run, as policy jobs in queue order: the
        first ``window`` of them, then every on-demand task behind those. Each one's task is
        in :attr:`jobs_cache` under its id (see :meth:`_offered`)."""
        pending = self.queue.settled_scan().tasks  # pending() without its copy of the list
        self._sync_ondemand(pending)
        cache = self.jobs_cache
        jobs: list[Job] = []
        append = jobs.append
        ondemand = Kind.ONDEMAND
        skipped: dict[str, str] = {}
        window = max(WINDOW, 16 * self.alloc.nnodes)
        rest: Task | None = None
        get = cache.get
        offered = start = 0
        last = self.last_window
        if last is not None:
            # Most decisions follow claims of the first few waiting tasks and nothing else:
            # the window is then the last one without its first ``k`` jobs, and only its end
            # is looked at again.
            old, old_jobs = last
            scanned = len(old_jobs)
            k = len(old) - len(pending)
            # the very same task objects, not equal ones: a rescan makes new objects, and the
            # cache of policy jobs keeps only the jobs of the objects it was built from
            if 0 <= k <= scanned and all(map(is_, pending[:scanned - k], old[k:scanned])):
                jobs.extend(old_jobs[k:])
                offered = start = scanned - k
        for task in pending[start:] if start else pending:
            if offered >= window:
                rest = task
                break
            # The common case, made short (this runs for the whole window at each decision):
            # a task looked at before, which can run here and is not on demand.
            hit = get(task.id)
            if hit is not None and hit[0] is task and (job := hit[1]) is not None \
                    and job.kind is not ondemand:
                append(job)
                offered += 1
            else:
                self._offer(task, jobs, skipped)
                offered = len(jobs)
        # Kept for the next decision when every task looked at was offered (nothing skipped).
        self.last_window = None if skipped else (pending, tuple(jobs))
        if rest is not None:
            # Beyond the backfill window only on-demand work is looked at.
            later = [t for t in self.ondemand.values() if t.order >= rest.order]
            for task in sorted(later, key=_queue_order):
                self._offer(task, jobs, skipped)
        self.skipped = skipped
        self.waiting_count = len(jobs)
        return jobs

    def _offered(self, job_id: object) -> tuple[Task, Job]:
        """The task and policy job of a waiting job the last :meth:`_waiting` offered."""
        task, job = self.jobs_cache[job_id]  # type: ignore[index]
        if job is None:
            raise KeyError(job_id)  # skipped tasks are never offered
        return task, job

    def _is_offered(self, job_id: object) -> bool:
        hit = self.jobs_cache.get(job_id)  # type: ignore[call-overload]
        return hit is not None and hit[1] is not None

    def _offer(self, task: Task, jobs: list[Job], skipped: dict[str, str]) -> None:
        """Add ``task``'s policy job to ``jobs``, or, if this allocation can never run it,
        its reason to ``skipped`` (said once, when it is first found)."""
        cache = self.jobs_cache
        hit = cache.get(task.id)
        if hit is None or hit[0] is not task:
            problem = fit_problem(task, nnodes=self.alloc.nnodes,
                                  gpus_per_node=self.alloc.gpus_per_node, machine=self.machine)
            if problem is not None:
                if self.skipped.get(task.id) != problem:
                    self.say(f"skipping {task.id}: {problem}")
                self.skipped[task.id] = problem
            hit = (task, None if problem is not None else
                   job_of(task, gpus_per_node=self.alloc.gpus_per_node))
            cache[task.id] = hit
        job = hit[1]
        if job is None:
            skipped[task.id] = self.skipped.get(task.id) or "it can never run here"
            return
        if job.kind is Kind.ONDEMAND and task.id not in self.arrived:
            self.arrived[task.id] = self.passes
            self.record("arrival", task=task.id, notice=job.notice)
        jobs.append(job)

    def _sync_ondemand(self, pending: Sequence[Task]) -> None:
        """Bring the waiting on-demand tasks (looked at even beyond the window) and the cache
        of policy jobs up to date: from the index's changes since the last look, so that a
        decision costs the backfill window and not the whole queue, or by going over every
        waiting task when those changes are not known (the first time)."""
        index = self.queue.index
        changes = None if self.seen_serial is None else index.changes_since(self.seen_serial)
        if changes is None:
            self.last_window = None
            cache = self.jobs_cache
            self.ondemand = {t.id: t for t in pending if t.spec.type is Kind.ONDEMAND}
            self.jobs_cache = {t.id: hit for t in pending
                               if (hit := cache.get(t.id)) is not None and hit[0] is t}
        else:
            for removed, added in changes:
                for task in removed:
                    hit = self.jobs_cache.get(task.id)
                    if hit is not None and hit[0] is task:
                        del self.jobs_cache[task.id]
                    if self.ondemand.get(task.id) is task:
                        del self.ondemand[task.id]
                for task in added:
                    if task.spec.type is Kind.ONDEMAND:
                        self.ondemand[task.id] = task
        self.seen_serial = index.serial

    def _apply(self, actions: tuple, now: float) -> bool:
        """Apply one decision; ``False`` when a claim was lost and the rest was abandoned
        (the caller decides again on a fresh view of the queue)."""
        claimed: dict[str, LiveTask] = {}
        victims: dict[str, list[str]] = {}
        slots = self.max_tasks - len(self.live) - len(self.to_launch)
        for action in actions:
            try:
                if isinstance(action, Start):
                    task, job = self._offered(action.job)
                    if job.kind is not Kind.ONDEMAND:
                        if slots <= 0:
                            continue  # the cap: decide again when a task ends
                        slots -= 1
                    live = claimed.pop(action.job, None) or self._claim(task, job)
                    if live is None:
                        self._give_back(claimed)
                        return False
                    notice = job.notice if job.notice in self.cluster.notices else None
                    try:
                        r = self.cluster.apply(action, now=now, job=job)
                    except ClusterError:
                        claimed[action.job] = live
                        raise
                    self._started(live, r.nodes, victims.get(action.job, ()))
                    if notice is not None and job.kind is Kind.ONDEMAND:
                        self.record("release", notice=notice, reason="redeemed")
                    continue
                for_job = getattr(action, "for_job", None)
                if for_job is not None and for_job not in claimed \
                        and self._is_offered(for_job):
                    # Claim the on-demand task before stopping anything for it.
                    live = self._claim(*self._offered(for_job))
                    if live is None:
                        self._give_back(claimed)
                        return False
                    claimed[for_job] = live
                if isinstance(action, Preempt):
                    r = self.cluster.apply(action, now=now)
                    victim = self.live[action.job]
                    self.record("preempt", task=action.job, for_task=for_job,
                                lost_node_seconds=lost_node_seconds(r, now))
                    victims.setdefault(for_job, []).append(action.job)
                    self._hold_hosts(victim, victim.node_ids)
                    victim.stop(Why.PREEMPT, now=now, for_task=for_job)
                elif isinstance(action, Shrink | Expand):
                    self._resize(action, now)
                    if isinstance(action, Shrink):
                        victims.setdefault(for_job, []).append(action.job)
                elif isinstance(action, Reserve):
                    self.cluster.apply(action, now=now)
                    self.record("reserve", notice=action.notice,
                                hosts=self._hosts(action.nodes))
                elif isinstance(action, Release):
                    self.cluster.apply(action, now=now)
                    self.record("release", notice=action.notice, reason="expired")
            except ClusterError as e:
                # A policy bug or a stale view: never act on it, decide again next pass.
                self.say(f"the {self.scheduler.name} scheduler's {action!r} was refused: {e}")
                break
        self._give_back(claimed)
        return True

    def _give_back(self, claimed: dict[str, LiveTask]) -> None:
        """Requeue tasks claimed ahead for a start that did not come (no attempt counted)."""
        for live in claimed.values():
            self._requeue_unlaunched(live, "its on-demand start was abandoned")
        claimed.clear()

    def _claim(self, task: Task, job: Job) -> LiveTask | None:
        claim = self.queue.claim(task, machine=self.machine, jobid=self.jobid, host=self.host,
                                 pid=os.getpid())
        if claim is None:
            # another runner took it: forget its policy job, and the kept window holding it
            self.jobs_cache.pop(task.id, None)
            self.last_window = None
            return None
        history = past_runs(claim)
        spec = claim.spec
        sig = signal.Signals[f"SIG{spec.signal.name}"] if spec.signal else signal.SIGTERM
        grace = spec.signal.before if spec.signal else self.options.grace
        ondemand = job.kind is Kind.ONDEMAND
        instant = (self.arrived.get(task.id) == self.passes) if ondemand else None
        return LiveTask(claim=claim, job=job, node_ids=(), hosts=(), gpu_ids=None,
                        attempt=history.runs + 1, resume=history.resume, grace=grace,
                        stop_signal=sig, instant=instant, notice=job.notice)

    def _started(self, live: LiveTask, node_ids: tuple[int, ...], lenders: object) -> None:
        live.node_ids = tuple(node_ids)
        live.hosts = self._hosts(node_ids)
        live.gpu_ids = gpu_ids_for(live.claim.spec.gpus, len(node_ids), self.alloc.gpu_ids)
        live.lenders = tuple(lenders)  # type: ignore[arg-type]
        self.live[live.id] = live
        self.to_launch.append(live)
        self.started_any = True

    def _hosts(self, node_ids: tuple[int, ...]) -> tuple[str, ...]:
        return tuple(self.alloc.nodes[i] for i in node_ids)

    def _hold_hosts(self, live: LiveTask, node_ids: tuple[int, ...]) -> None:
        """Keep ``node_ids`` out of use until ``live`` has let go of them."""
        for n in node_ids:
            self.draining[n] = live.id

    def _let_go(self, live: LiveTask, node_ids: tuple[int, ...] | None = None) -> None:
        for n in list(self.draining) if node_ids is None else node_ids:
            if self.draining.get(n) == live.id:
                del self.draining[n]

    # --- resizing ---------------------------------------------------------------------------

    def _resize(self, action: Shrink | Expand, now: float) -> None:
        live = self.live[action.job]
        r = self.cluster.apply(action, now=now)
        verb = "shrink" if isinstance(action, Shrink) else "expand"
        for_task = getattr(action, "for_job", None)
        spec = live.claim.spec
        in_place = spec.resize is not None and spec.resize.mode == "in-place"
        new_ids = tuple(r.nodes)
        if not live.running:
            # Not launched yet, or its process is gone already: it starts on its new hosts.
            live.node_ids, live.hosts = new_ids, self._hosts(new_ids)
            mode = "restart"
        elif in_place and live.why is None:
            self._hold_hosts(live, tuple(n for n in live.node_ids if n not in new_ids))
            sig = signal.Signals[f"SIG{spec.resize.signal or 'USR2'}"]
            live.ask_resize(verb, new_ids, self._hosts(new_ids), sig=sig, now=now,
                            for_task=for_task)
            mode = "in-place"
        else:
            self._restart(live, new_ids, now)
            mode = "restart"
        self.record(verb, task=live.id, hosts=list(self._hosts(new_ids)), for_task=for_task,
                    mode=mode)

    def _restart(self, live: LiveTask, new_ids: tuple[int, ...], now: float) -> None:
        """Stop ``live`` gracefully and start it again on ``new_ids`` once it is gone."""
        self._hold_hosts(live, live.node_ids)
        live.node_ids, live.hosts = new_ids, self._hosts(new_ids)
        live.stop(Why.RESTART, now=now)

    def _check_resizes(self, now: float) -> None:
        for live in list(self.live.values()):
            rs = live.resizing
            if rs is None:
                continue
            if live.resize_confirmed():
                self._let_go(live, rs.released)
                live.resizing = None
            elif now >= rs.deadline:
                self.say(f"{live.id} did not confirm its {rs.verb} within "
                         f"{format_duration(live.grace)}; restarting it on "
                         f"{','.join(live.hosts)}")
                live.resizing = None
                self._hold_hosts(live, rs.released)
                self._restart(live, live.node_ids, now)
                self.record(rs.verb, task=live.id, hosts=list(live.hosts),
                            for_task=rs.for_task, mode="fallback-restart")

    def _check_checkpoints(self) -> None:
        now = self.clock.now()
        for live in self.live.values():
            self._check_checkpoint(live, now)

    def _check_checkpoint(self, live: LiveTask, now: float) -> None:
        at = live.new_checkpoint()
        if at is None or live.id not in self.cluster.running:
            return
        r = self.cluster.running[live.id]
        self.cluster.checkpoint(live.id, at=min(max(at, r.start), now))
        self.record("checkpoint", task=live.id)

    # --- launching --------------------------------------------------------------------------

    def _launch_ready(self) -> None:
        while self.to_launch:
            now = self.clock.now()
            if self.launch_pause > 0 and now < self.next_launch:
                return
            ready = next((t for t in self.to_launch
                          if not any(n in self.draining for n in t.node_ids)), None)
            if ready is None:
                return
            self.to_launch.remove(ready)
            self._launch(ready, now)
            self.next_launch = self.clock.now() + self.launch_pause

    def _launch(self, live: LiveTask, now: float) -> None:
        claim = live.claim
        tee = None
        if claim.spec.log is not None:
            try:
                tee = self.queue.log_path(claim)
            except MetaqError as e:
                self._launch_failed(live, str(e))
                return
        resize = claim.spec.resize
        try:
            # A task resized in place has its hostfile rewritten: it gets one of its own.
            shared = None if resize is not None and resize.mode == "in-place" \
                else self.hostfiles.path(live.hosts)
            spec = LaunchSpec(
                script=claim.path, task=claim.id, nodes=live.hosts,
                log=self.logs / claim.folder / f"{claim.relpath}.log",
                rundir=self.runs / claim.folder / claim.relpath, attempt=live.attempt,
                resume=live.resume, gpus=live.gpu_ids, tee=tee, shared_hostfile=shared,
                srun_wrap=self.options.srun, srun_args=self.options.srun_args)
            self._make_room(spec)
            process = launch(spec, on_exit=self._exited, base_env=self.environ)
        except (LaunchError, OSError) as e:
            self._launch_failed(live, str(e))
            return
        live.launched(process, now)
        self._watch_rundir(live)
        self.record("start", task=live.id, attempt=live.attempt, hosts=list(live.hosts),
                    gpus=live.gpus, project=claim.spec.project, kind=str(live.job.kind),
                    resume=live.resume, notice=live.notice, instant=live.instant,
                    lenders=list(live.lenders), pid=process.pid)

    def _make_room(self, spec: LaunchSpec) -> None:
        """Give ``spec`` its run folder and its log from the spares made ahead of time, where
        they do not exist yet (``launch`` then finds them made; it makes whatever is still
        missing itself)."""
        for parent in (spec.rundir.parent, spec.log.parent):
            if parent not in self.folders:
                parent.mkdir(parents=True, exist_ok=True)
                self.folders.add(parent)
        self.spares.folder(spec.rundir)
        self.spares.empty_file(spec.log)

    def _exited(self, process: TaskProcess) -> None:
        """A task's exit, told by the launch layer's reaper thread: handed to the loop."""
        self.inbox.put((_EXIT, process))

    def _launch_failed(self, live: LiveTask, why: str) -> None:
        """Give back the hosts of a task that could not be started and requeue it with the
        attempt counted (to ``failed/`` once ``caps.attempts`` are used up)."""
        self.say(f"cannot start {live.id}: {why}")
        # The decision that started it no longer holds (the task is back in its folder, or
        # gone, and its hosts are free): decide again before concluding nothing fits. No
        # watcher event is needed, and none may come.
        self.redecide = True
        self.live.pop(live.id, None)
        with contextlib.suppress(ClusterError):
            self.cluster.finish(live.id, now=self.clock.now())
        try:
            moved = self.queue.requeue(live.claim, reason=f"could not start: {why}",
                                       count_attempt=True)
        except OSError as e:
            self.say(f"cannot requeue {live.id} ({e.strerror}); it stays claimed in "
                     f"{live.claim.path} for the next runner to reclaim")
            return
        outcome = "failed" if moved is not None and moved.state == FAILED else "retry"
        self.record("end", task=live.id, attempt=live.attempt, hosts=list(live.hosts),
                    outcome=outcome, exit_code=None, signal=None, seconds=0.0,
                    node_seconds=0.0, gpu_seconds=0.0, project=live.claim.spec.project,
                    kind=str(live.job.kind), reason=f"could not start: {why}")

    def _requeue_unlaunched(self, live: LiveTask, reason: str) -> None:
        """Put back a task claimed but never launched (no attempt is counted)."""
        self.live.pop(live.id, None)
        if live in self.to_launch:
            self.to_launch.remove(live)
        with contextlib.suppress(ClusterError):
            self.cluster.finish(live.id, now=self.clock.now())
        self._let_go(live)
        with contextlib.suppress(OSError):
            self.queue.requeue(live.claim, reason=reason, count_attempt=False)

    # --- exits ------------------------------------------------------------------------------

    def _on_exit(self, process: TaskProcess) -> None:
        live = self.live.get(process.spec.task)
        if live is None or live.process is not process:
            return
        now = self.clock.now()
        self._check_checkpoint(live, now)  # one made just before the exit
        live.account(now)
        status = process.status
        assert status is not None
        why = live.why
        self._let_go(live)
        if why is Why.RESTART and self.stopping is None:
            self._relaunch(live, now)
            self._record_end(live, "requeued")
            return
        del self.live[live.id]
        self._unwatch_rundir(live.id)
        if why is not Why.PREEMPT:
            with contextlib.suppress(ClusterError):
                self.cluster.finish(live.id, now=now)
        self._settle_or_keep(live)

    def _settle_or_keep(self, live: LiveTask) -> bool:
        """Settle an exited task; when the queue cannot be written (a full disk), keep it
        claimed, its lease renewed, and try again at each heartbeat."""
        status = live.process.status if live.process is not None else None
        returncode = status.returncode if status is not None else 0
        try:
            outcome = self._settle(live, returncode)
        except OSError as e:
            if live not in self.unsettled:
                self.unsettled.append(live)
                self.say(f"cannot move {live.id} after its exit ({e.strerror}); it stays "
                         f"claimed and is tried again at every heartbeat")
            return False
        if live in self.unsettled:
            self.unsettled.remove(live)
            self.say(f"{live.id} is settled now: {outcome}")
        self._record_end(live, outcome)
        return True

    def _record_end(self, live: LiveTask, outcome: str) -> None:
        status = live.process.status if live.process is not None else None
        sig = status.signal if status is not None else None
        now = live.since
        self.record("end", task=live.id, attempt=live.attempt, hosts=list(live.hosts),
                    outcome=outcome, exit_code=status.exit_code if status else None,
                    signal=sig.name if sig else None, seconds=now - live.started,
                    node_seconds=live.node_seconds, gpu_seconds=live.gpu_seconds,
                    project=live.claim.spec.project, kind=str(live.job.kind))

    def _settle(self, live: LiveTask, returncode: int) -> str:
        """Move the task where its exit sends it; the ``outcome`` of its ``end`` event.
        Raises ``OSError`` when the queue cannot be written."""
        q, claim, why = self.queue, live.claim, live.why
        if why is Why.LOST:
            return "reclaimed"
        if why is Why.CANCEL:
            q.cancelled(claim)
            return "cancelled"
        if why in (Why.PREEMPT, Why.INTERRUPT, Why.RESTART):
            what = (f"preempted for {live.for_task}" if why is Why.PREEMPT and live.for_task
                    else "preempted" if why is Why.PREEMPT
                    else f"interrupted: {self.stopping or 'stopped'}")
            moved = q.requeue(claim, reason=f"{what} in job {self.jobid}", count_attempt=False)
            if moved is None:
                return "reclaimed"
            return "preempted" if why is Why.PREEMPT else "requeued"
        reason = None
        code = returncode
        if returncode < 0:
            code = 128 - returncode
            try:
                reason = f"killed by {signal.Signals(-returncode).name}"
            except ValueError:
                reason = f"killed by signal {-returncode}"
        moved = q.finish(claim, exit_code=code, reason=reason)
        if moved is None:
            return "reclaimed"  # the claim was taken from us meanwhile
        if moved.state == FINISHED:
            return "finished"
        return "failed" if moved.state == FAILED else "retry"

    def _relaunch(self, live: LiveTask, now: float) -> None:
        r = self.cluster.running.get(live.id)
        new_ids = r.nodes if r is not None else live.node_ids
        restarted = LiveTask(
            claim=live.claim, job=live.job, node_ids=tuple(new_ids),
            hosts=self._hosts(tuple(new_ids)), gpu_ids=None, attempt=live.attempt + 1,
            resume=True, grace=live.grace, stop_signal=live.stop_signal, instant=live.instant,
            notice=live.notice, lenders=live.lenders)
        restarted.gpu_ids = gpu_ids_for(live.claim.spec.gpus, len(new_ids), self.alloc.gpu_ids)
        self.live[live.id] = restarted
        self.to_launch.append(restarted)

    # --- heartbeats, reclaims, notices --------------------------------------------------------

    def _heartbeat(self, now: float) -> None:
        self.next_heartbeat = now + self.queue.config.heartbeat
        for live in list(self.unsettled):
            if self.queue.heartbeat(live.claim):
                self._settle_or_keep(live)
            else:
                self.unsettled.remove(live)  # taken back meanwhile: no longer ours to move
        for live in list(self.live.values()):
            if live.why is Why.LOST:
                continue
            if not self.queue.heartbeat(live.claim):
                self.say(f"{live.id} is no longer ours (its claim was taken back); stopping it")
                live.stop(Why.LOST, now=now, grace=0)
                live.kill_if_due(now)
                if live.process is None:
                    self.live.pop(live.id, None)
                    if live in self.to_launch:
                        self.to_launch.remove(live)
                    with contextlib.suppress(ClusterError):
                        self.cluster.finish(live.id, now=now)
            elif live.why is None and self.queue.cancel_requested(live.claim):
                self.say(f"{live.id} was cancelled; stopping it")
                live.stop(Why.CANCEL, now=now)
        self._reclaim_lost(now)
        with contextlib.suppress(BatchError):
            end = self.batch.end_time()
            if end is not None and end != self.end:
                self.end = end

    def _reclaim_lost(self, now: float) -> None:
        for lost in lost_claims(self.queue, self.batch, machine=self.machine, now=now,
                                own_jobid=self.jobid):
            moved = self.queue.reclaim(lost.claim, reason=lost.reason)
            if moved is not None:
                self.say(f"took back {lost.claim.id} from job {lost.claim.jobid}: {lost.reason}")
                self.record("reclaim", task=lost.claim.id, jobid=lost.claim.jobid,
                            reason=lost.reason, to=moved.state)

    def _sync_notices(self, now: float) -> None:
        present = set()
        for notice in load_notices(self.queue.root, now=now, report=self.say):
            present.add(notice.id)
            if notice.id in self.notice_ids:
                continue
            self.notice_ids.add(notice.id)
            try:
                self.cluster.add_notice(notice)
            except ClusterError as e:
                self.say(f"ignoring notice {notice.id}: {e}")
        for gone in [n for n in self.cluster.notices if n not in present]:
            self.cluster.remove_notice(gone)
            self.record("release", notice=gone, reason="withdrawn")

    # --- stopping ---------------------------------------------------------------------------

    def _stop_all(self, reason: str) -> None:
        self.stopping = reason
        now = self.clock.now()
        self.say(f"{reason}: stopping {len(self.live)} task(s) and requeueing them")
        for live in list(self.to_launch):
            self._requeue_unlaunched(live, f"not started: {reason}")
        for live in list(self.live.values()):
            left = self.end - self.options.margin / 2 - now
            live.stop(Why.INTERRUPT, now=now, grace=max(0.0, min(live.grace, left)))

    def _lose_queue(self) -> None:
        if self.stopping is None:
            self.say(f"the queue {self.queue.root} has disappeared; killing its "
                     f"{len(self.live)} task(s), whose files went with it")
            self.exit_code = 1
        self.stopping = "the queue directory disappeared"
        now = self.clock.now()
        for live in list(self.to_launch):
            self.to_launch.remove(live)
            self.live.pop(live.id, None)
        for live in self.live.values():
            live.stop(Why.LOST, now=now, grace=0)
            live.kill_if_due(now)

    def _finish_up(self) -> None:
        """On the way out (also after an error): no task may outlive the runner, and no task
        claimed but not launched stays claimed."""
        if self.stopping is None and self.live:
            self.stopping = "stopped by an error"
        for live in list(self.to_launch):
            self._requeue_unlaunched(live, f"not started: {self.stopping}")
        running = [t for t in self.live.values() if t.running]
        if running:
            now = self.clock.now()
            for t in running:
                t.stop(Why.INTERRUPT, now=now, grace=0)
                t.kill_if_due(now)
            for t in running:
                assert t.process is not None
                t.process.wait(10)
            while True:
                try:
                    self._handle(self.inbox.get_nowait())
                except stdqueue.Empty:
                    break
        self.queue.spares = None
        self.spares.close()
        if self.queue.root.is_dir():
            with contextlib.suppress(OSError):
                self.queue.tidy_job(machine=self.machine, jobid=self.jobid)
        for live in self.unsettled:
            self.say(f"{live.id} ended but could not be moved; it stays claimed in "
                     f"{live.claim.path}, and the next runner (or metaq reset --dead) puts it "
                     f"back")
        for task_id in list(self.rundir_watchers):
            self._unwatch_rundir(task_id)
        reason = self.stop_reason or self.stopping or "stopped by an error"
        self.record("runner-stop", reason=reason)
        self.record.flush()
        self.say(f"stopped: {reason}")


def _queue_order(task: Task) -> tuple:
    return task.order


def _clock_time(t: float) -> str:
    import time as _time
    return _time.strftime("%H:%M:%S", _time.localtime(t))
