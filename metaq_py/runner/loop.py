"""The live driver: ``metaq run`` inside a batch job.

One :class:`Runner` owns one allocation. Node ids ``0 .. N-1`` of its
:class:`~metaq_py.cluster.Cluster` are the allocation's hosts in the batch system's order. The
loop is event-driven: it blocks on one inbox (:mod:`metaq_py.runner.wakeups`) fed by task
exits, queue changes and signals, with a timeout at the next thing it must do itself (a kill
after a grace period, a heartbeat, the decision's ``wake``, the end of the allocation, the next
launch after a pause). It never busy-polls. It reads the time only from its clock, so that
tests can run it on a fake one.

Each pass, at one instant:

1. kills whose grace period is over, resize confirmations and their deadlines
   (:mod:`~metaq_py.runner.tasks.resizing`), checkpoints;
2. at each heartbeat, leases renewed and lost claims of other jobs taken back
   (:mod:`~metaq_py.runner.upkeep`; lost claims also at start);
3. at the end of the allocation (its end minus ``margin`` minus the grace periods), or on
   SIGTERM/SIGUSR1/SIGINT, every task is stopped and requeued, and the runner exits;
4. otherwise: notices are read, the waiting tasks become policy jobs
   (:mod:`~metaq_py.runner.offers`), the scheduler decides, and its actions are applied to the
   Cluster and then to processes (:mod:`~metaq_py.runner.decide`);
5. claimed tasks are launched when their hosts are physically free, one per launch pause
   (:mod:`~metaq_py.runner.tasks.launching`, :mod:`~metaq_py.runner.tasks.roster`).

Exits are settled as they arrive (:mod:`~metaq_py.runner.tasks.exits`). The runner stops when
nothing is running and the last decision started nothing (so nothing waiting can ever fit
here), unless ``linger`` keeps it waiting for new work until the allocation ends, or a waiting
task it could run in the time left waits for a dependency that is waiting or running
elsewhere: then it stays, and looks again at each queue change and every
:data:`~metaq_py.queue.campaign.deps.RECHECK` seconds (a task ending in another allocation moves no
file the queue watcher sees).
``docs/events.md`` lists the events it writes (:mod:`~metaq_py.runner.events`).
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import socket
import sys
import time
from collections.abc import Callable

from metaq_py.batch import BatchError, BatchSystem
from metaq_py.clock import Clock
from metaq_py.cluster import Cluster
from metaq_py.durations import format_duration, format_time
from metaq_py.launch import launch
from metaq_py.policy import make_scheduler
from metaq_py.policy.shares import NodeShape
from metaq_py.queue.disk.folders import PeopleIds, own_folder
from metaq_py.queue.store import Queue
from metaq_py.runner.context import Context
from metaq_py.runner.decide import Decider
from metaq_py.runner.events import EventWriter, Narrator
from metaq_py.runner.offers import Offers
from metaq_py.runner.options import RunnerError, RunOptions
from metaq_py.runner.tasks.exits import Settler
from metaq_py.runner.tasks.launching import Launcher, StartProcess
from metaq_py.runner.tasks.live_task import LiveTask, Why
from metaq_py.runner.tasks.resizing import Resizer
from metaq_py.runner.tasks.roster import Roster
from metaq_py.runner.upkeep import Upkeep
from metaq_py.runner.wakeups import Wakeup, Wakeups, What
from metaq_py.words import counted

__all__ = ["RunOptions", "Runner", "RunnerError"]

_LONGEST_WAIT = 3600.0
"""The loop wakes at least this often (seconds), even with nothing to do."""

_FLUSH_EVERY = 0.1
"""While wake-ups keep arriving, the loop writes its events at least this often (seconds)."""

_CANCEL_CHECK = 1.0
"""While tasks run, the loop wakes at least this often (seconds), to see a ``metaq cancel``
on a queue where no file-system event arrives (NFS, Lustre): a cancel reaches its task
within about a second, never at the next heartbeat."""


_LOOK_EVERY = 0.1
"""The most often (seconds) a pass looks at every running task's checkpoint file and cancel
request (a system call each): while short tasks end every moment there is a pass per exit,
and looking at each pass cost a ``stat`` and an ``lstat`` per running task each time. A
checkpoint's time is its file's, so a late look loses nothing of it."""


def _say(line: str) -> None:
    print(f"metaq run: {line}", file=sys.stderr, flush=True)


# Over 300 lines, because the loop's stages (waiting, handling a wake-up, deciding, stopping,
# finishing up) share its flags (stopping, awaiting, exit_code) and every collaborator;
# the work itself is already in them (Decider, Settler, Launcher, Upkeep, Roster).
class Runner:
    """The live loop of one batch job over one queue; :meth:`run` once.

    Constructing it asks the batch system for the allocation. ``clock`` (the wall clock by
    default) is the only source of time; ``wakeups`` (the inbox and its feeders) and
    ``start`` (how a task's process is started) are replaced in tests that run the loop on a
    fake clock with stand-in processes."""

    def __init__(self, queue: Queue, batch: BatchSystem, *, options: RunOptions | None = None,
                 clock: Clock | None = None, say: Callable[[str], None] | None = None,
                 wakeups: Wakeups | None = None, start: StartProcess = launch) -> None:
        self.queue = queue
        self.options = options = options or RunOptions()
        # One clock for the loop and the queue's timestamps (claims, heartbeats, events).
        if clock is not None and clock is not queue.clock:
            raise ValueError("the runner's clock must be its queue's: Queue(root, clock=...)")
        self.clock = clock = queue.clock
        self.say = say = say or _say
        try:
            self.scheduler = make_scheduler(options.scheduler,
                                            release_after=options.release_after,
                                            warning=options.warning)
        except ValueError as e:
            raise RunnerError(str(e)) from None
        caps = queue.config.caps
        self.max_tasks = options.max_tasks or caps.tasks
        self.launch_pause = (caps.launch_pause if options.launch_pause is None
                             else options.launch_pause)
        queue.check_one_filesystem()
        try:
            alloc = batch.allocation()
        except BatchError as e:
            raise RunnerError(f"cannot learn this job's allocation: {e}") from None
        if alloc.end_time is not None and alloc.end_time <= clock.now():
            raise RunnerError(f"job {alloc.jobid} ended at {format_time(alloc.end_time)} "
                              f"(so its batch system says); there is no time left to run a task")
        named = PeopleIds(queue.root)
        self.narrator = Narrator(say, verbose=options.verbose, named=named)
        events = EventWriter(queue.events(alloc.jobid), now=clock.now, warn=say, buffered=True,
                             narrator=self.narrator)
        self.ctx = ctx = Context(
            queue=queue, batch=batch, alloc=alloc, options=options, clock=clock, events=events,
            say=say, host=socket.gethostname(),
            end=alloc.end_time if alloc.end_time is not None else math.inf, named=named)
        self.cluster = cluster = Cluster(alloc.nnodes, shape=NodeShape(
            alloc.cores_per_node, alloc.gpus_per_node, alloc.cores_per_gpu, alloc.gpu_cores))
        self.wakeups = wakeups = wakeups or Wakeups(queue, options, say=say)
        self.roster = roster = Roster(ctx, cluster, unwatch=wakeups.unwatch_rundir)
        self.offers = Offers(ctx)
        self.decider = Decider(ctx, cluster, roster, self.offers, Resizer(ctx, roster),
                               self.scheduler, max_tasks=self.max_tasks)
        self.launcher = Launcher(ctx, roster, launch_pause=self.launch_pause,
                                 on_exit=wakeups.exited, watch=wakeups.watch_rundir,
                                 start=start)
        self.settler = Settler(ctx, cluster, roster)
        self.upkeep = Upkeep(ctx, cluster, roster, self.settler)
        self.stopping: str | None = None
        """Why the runner is stopping (``None``: it is not): no decision is made any more."""
        self.awaiting: str | None = None
        """The waiting task the runner stays for while its dependency ends elsewhere."""
        self.watch_until = math.inf
        """Until when the runner stays for claims of other jobs that may be lost (see
        :meth:`_done`; ``inf``: it has not stayed for any yet)."""
        self.stop_reason = ""
        self.exit_code = 0
        self.passes = 0
        self._flush_by = 0.0
        """When the events kept must be written, even if wake-ups are waiting."""
        self._look_at = -math.inf
        """When a pass next looks at the checkpoints and cancel requests (:data:`_LOOK_EVERY`)."""
        self._ran = False

    @property
    def jobid(self) -> str:
        return self.ctx.jobid

    @property
    def machine(self) -> str:
        return self.ctx.machine

    # --- the loop ---------------------------------------------------------------------------

    def run(self) -> int:
        """Run until done; the exit status for ``metaq run`` (0, or 1 when the queue
        vanished)."""
        if self._ran:
            raise RunnerError("a Runner runs once")
        self._ran = True
        self._start()
        self.wakeups.install_signals()
        try:
            self._loop()
        finally:
            self.wakeups.close()
            self._finish_up()
        return self.exit_code

    def _start(self) -> None:
        ctx, alloc = self.ctx, self.ctx.alloc
        # Its own, or nothing in it is: what stands at jobs/<jobid> already is moved aside.
        own_folder(ctx.queue.root, ctx.job_dir)
        self.launcher.open()
        now = self.clock.now()
        self.upkeep.next_heartbeat = now + ctx.queue.config.heartbeat
        self.upkeep.reclaim_lost(now)
        end = ctx.end
        ctx.events.write(
            "runner-start", jobid=alloc.jobid, machine=alloc.machine, hosts=list(alloc.nodes),
            gpus_per_node=alloc.gpus_per_node, cores_per_node=alloc.cores_per_node,
            end=None if math.isinf(end) else end,
            mechanism=self.scheduler.name, max_tasks=self.max_tasks,
            launch_pause=self.launch_pause, pid=os.getpid(), host=ctx.host)
        ctx.events.flush()
        left = "no time limit" if math.isinf(end) else \
            f"{format_duration(round(end - now))} left"
        self.say(f"job {alloc.jobid} on {alloc.machine}: {counted(alloc.nnodes, 'node')}, "
                 f"{counted(alloc.gpus_per_node, 'GPU')} each, {left}, {self.scheduler.name}")

    def _loop(self) -> None:
        while True:
            self._pass()
            if self._done():
                return
            # After the first pass: starting the watcher takes a while (see watch_queue).
            self.wakeups.watch_queue()
            self._wait()

    def _wait(self) -> None:
        """Wait for the next wake-up or deadline and take everything that has arrived."""
        now = self.clock.now()
        timeout = max(0.0, self._next_deadline() - now)
        if self.wakeups.idle() or now >= self._flush_by:
            # A complete log whenever the loop may wait; while wake-ups keep coming, one
            # write per _FLUSH_EVERY (each costs four system calls).
            self.ctx.events.flush()
            self._flush_by = now + _FLUSH_EVERY
        longest = _CANCEL_CHECK if self.roster.live else _LONGEST_WAIT
        wakeup = self.wakeups.wait(min(timeout, longest))
        while wakeup is not None:  # take everything that arrived before deciding
            self._handle(wakeup)
            wakeup = self.wakeups.take()

    def _handle(self, wakeup: Wakeup) -> None:
        if wakeup.what is What.EXIT:
            assert wakeup.process is not None
            self.settler.exited(wakeup.process, stopping=self.stopping)
        elif wakeup.what is What.SIGNAL:
            assert wakeup.signum is not None
            name = signal.Signals(wakeup.signum).name
            if self.stopping is None:
                if name == "SIG" + self.options.end_signal:
                    # The wall clock is ending: no task may count on more than its grace.
                    now = self.clock.now()
                    self.ctx.end = min(self.ctx.end, now + self.options.margin
                                       + self.options.grace)
                self._stop_all(f"received {name}")
            else:  # a second signal: no more grace
                self.say(f"received {name} again: killing every task now")
                for t in self.roster.live.values():
                    t.stop(t.why or Why.INTERRUPT, now=self.clock.now(), grace=0)
                    t.kill_if_due(self.clock.now())

    def _done(self) -> bool:
        roster = self.roster
        if roster.live or roster.to_launch or (self.settler.unsettled and self.stopping is None):
            return False
        if self.stopping is not None:
            self.stop_reason = self.stopping
            return True
        if self.launcher.redecide:
            return False  # the waiting tasks changed since the decision that found none to run
        if self.decider.claims_paused and self.offers.count:
            return False  # tasks wait for the queue to be writable again (a full disk)
        now = self.clock.now()
        soon = [d for d in self.upkeep.sightings.watched.values() if d < self._stop_at()]
        if soon and now < self.watch_until:
            if math.isinf(self.watch_until):
                # At most one stale_after of its own: a claim judged by a longer one of its
                # holder's is left to the runners after it.
                self.watch_until = now + self.ctx.queue.config.stale_after
                self.say(f"staying to see whether {counted(len(soon), 'claim')} of other jobs "
                         f"{'is' if len(soon) == 1 else 'are'} still renewed")
            return False  # a claim that may be lost: its task would run here
        if self.options.linger:
            return False
        if self.upkeep.notice_due(self.clock.now()):
            return False  # a reservation waits for its on-demand task, due soon
        if self._await_dependency():
            return False
        if self._await_delay(now):
            return False
        if self.offers.count:
            n = self.offers.count
            self.stop_reason = (f"nothing left that fits: {counted(n, 'waiting task')} "
                                f"{'needs' if n == 1 else 'need'} more time than this "
                                f"allocation has left")
        elif self.offers.skipped:
            self.stop_reason = (f"nothing left that fits: "
                                f"{counted(len(self.offers.skipped), 'waiting task')} can "
                                f"never run in this allocation")
        elif self.offers.delayed:
            one = len(self.offers.delayed) == 1
            self.stop_reason = (f"nothing left to run here: "
                                f"{counted(len(self.offers.delayed), 'waiting task')} "
                                f"{'waits' if one else 'wait'} for a retry delay past this "
                                f"allocation's end; the next allocation runs "
                                f"{'it' if one else 'them'}")
        elif self.offers.blocked:
            self.stop_reason = (f"nothing left to run here: "
                                f"{counted(len(self.offers.blocked), 'waiting task')} "
                                f"{'waits' if len(self.offers.blocked) == 1 else 'wait'} for "
                                f"dependencies that cannot finish in time")
        else:
            self.stop_reason = "nothing left to run"
        return True

    def _await_delay(self, now: float) -> bool:
        """Whether to stay for a task waiting for its retry delay that could still run here
        before the allocation ends; a longer delay hands it to the next allocation."""
        stop_at = self._stop_at()
        return any(t.not_before + t.walltime <= stop_at for t in self.offers.delayed.values())

    def _await_dependency(self) -> bool:
        """Whether to stay for a waiting task that could run here once a dependency waiting
        or running elsewhere has finished (see the module text); said once per task."""
        found = self.offers.awaited(self._stop_at() - self.clock.now())
        task_id = None if found is None else found[0].id
        if found is not None and task_id != self.awaiting:
            self.say(f"staying for {self.ctx.named(found[0].id)}: {found[1].words}")
        self.awaiting = task_id
        return found is not None

    def _next_deadline(self) -> float:
        times = [self.upkeep.next_heartbeat]
        if self.stopping is None:
            # Once stopping, the end is no deadline: the kills are (else the loop would spin
            # until every task is gone).
            times.append(self._stop_at())
        if self.launcher.redecide:
            times.append(self.clock.now())
        if self.decider.wake is not None:
            times.append(self.decider.wake)
        if self.offers.delayed:
            times.append(min(t.not_before for t in self.offers.delayed.values()))
        if self.awaiting is not None and not self.roster.live:
            from metaq_py.queue.campaign.deps import RECHECK  # loaded: a task waits on one
            times.append(self.clock.now() + RECHECK)
        for t in self.roster.live.values():
            if t.kill_at is not None:
                times.append(t.kill_at)
            elif (up := t.time_up_at) is not None:
                times.append(up)
            if t.resizing is not None:
                times.append(t.resizing.deadline)
        if self.roster.ready() is not None:
            # Only a task whose hosts are free: one waiting for a victim's hosts is launched
            # after the victim's exit, which wakes the loop (else it would spin until then).
            times.append(self.launcher.next_launch)
        return min(times)

    def _time_up(self, t: LiveTask, now: float) -> None:
        """Warn a task that ran past its ``TIME_LIMIT`` with its ``SIGNAL``, and kill it a
        grace later (:attr:`Why.TIMEOUT`)."""
        up = t.time_up_at
        if up is None or now < up or t.kill_at is not None or not t.running:
            return
        self.say(f"{t.id} ran past its TIME_LIMIT of {format_duration(t.time_limit or 0)}: "
                 f"sent SIG{t.stop_signal.name.removeprefix('SIG')}, killed in "
                 f"{t.grace:g}s if still running")
        t.stop(Why.TIMEOUT, now=now)

    def _stop_at(self) -> float:
        graces = [self.options.grace, *(t.grace for t in self.roster.live.values())]
        return self.ctx.end - self.options.margin - max(graces)

    # --- one pass ---------------------------------------------------------------------------

    def _pass(self) -> None:
        self.passes += 1
        now = self.clock.now()
        if not self.ctx.queue.root.is_dir():
            self._lose_queue()
            return
        for t in list(self.roster.live.values()):
            self._time_up(t, now)
            t.kill_if_due(now)
        self.decider.resizer.check(now)
        looks = now >= self._look_at
        if looks:
            self._look_at = now + _LOOK_EVERY
            self.roster.check_checkpoints(self.clock.now())
        if now >= self.upkeep.next_heartbeat:
            self.upkeep.heartbeat(now, stopping=self.stopping)
        if looks:
            self.upkeep.check_cancels(now)
        if self.stopping is None and now >= self._stop_at():
            self._stop_all(f"the allocation ends at {_clock_time(self.ctx.end)}")
        if self.stopping is None:
            self.upkeep.sync_notices(now)
            self.launcher.redecide = False
            self.decider.decide(now, self.passes)
        self.launcher.launch_ready()

    # --- stopping ---------------------------------------------------------------------------

    def _stop_all(self, reason: str) -> None:
        self.stopping = reason
        now = self.clock.now()
        roster = self.roster
        self.say(f"{reason}: stopping {counted(len(roster.live), 'task')} and requeueing "
                 f"{'it' if len(roster.live) == 1 else 'them'}")
        for live in list(roster.to_launch):
            roster.requeue_unlaunched(live, f"not started: {reason}")
        for live in list(roster.live.values()):
            left = self.ctx.end - self.options.margin / 2 - now
            live.stop(Why.INTERRUPT, now=now, grace=max(0.0, min(live.grace, left)))

    def _lose_queue(self) -> None:
        roster = self.roster
        if self.stopping is None:
            self.say(f"the queue {self.ctx.queue.root} has disappeared; killing its "
                     f"{counted(len(roster.live), 'task')}, whose files went with it")
            self.exit_code = 1
        self.stopping = "the queue directory disappeared"
        now = self.clock.now()
        for live in list(roster.to_launch):
            roster.forget(live, now=now)
        for live in roster.live.values():
            live.stop(Why.LOST, now=now, grace=0)
            live.kill_if_due(now)

    def _finish_up(self) -> None:
        """On the way out (also after an error): no task may outlive the runner, and no task
        claimed but not launched stays claimed."""
        roster, queue = self.roster, self.ctx.queue
        if self.stopping is None and roster.live:
            self.stopping = "stopped by an error"
        for live in list(roster.to_launch):
            roster.requeue_unlaunched(live, f"not started: {self.stopping}")
        while (wakeup := self.wakeups.take()) is not None:
            self._handle(wakeup)
        running = [t for t in roster.live.values() if t.running]
        if running:
            now = self.clock.now()
            for t in running:
                t.stop(Why.INTERRUPT, now=now, grace=0)
                t.kill_if_due(now)
            for t in running:
                assert t.process is not None
                t.process.wait(10)
            while (wakeup := self.wakeups.take()) is not None:
                self._handle(wakeup)
        if queue.root.is_dir():
            with contextlib.suppress(OSError):
                queue.tidy_job(machine=self.ctx.machine, jobid=self.ctx.jobid)
        for sentence in self.settler.park():
            self.say(sentence)
        self.launcher.close()
        reason = self.stop_reason or self.stopping or "stopped by an error"
        self.ctx.events.write("runner-stop", reason=reason)
        self.ctx.events.flush()
        summary = self.narrator.summary()
        if summary is not None:
            self.say(summary)
        self.say(f"stopped: {reason}")


def _clock_time(t: float) -> str:
    """``t`` (Unix seconds) as the local time of day."""
    return time.strftime("%H:%M:%S", time.localtime(t))
