"""Launching the roster's placed tasks, when their hosts are physically free.

At most one task is launched per ``launch_pause`` (``caps.launch_pause``), which protects the
batch node from a burst of starts. A task that cannot be started goes
back to its folder with the attempt counted (to ``failed/`` once its attempts are used up).

**Starting through the launch agent.** Starting a process blocks its caller until the child
has executed the script (``vfork`` lends the child the caller's memory until then), then the
move into the task's cgroup waits for the kernel, and an exit costs a sweep and a reap: on the
loop's thread that was most of a short task's cost, and a thread of the runner cannot take it
over without the interpreter's lock. So with ``on_started`` given (the real launch), the loop
prepares each start (its spec, run folder, log, environment: :mod:`metaq_py.launch.prepare`)
and hands it to the runner's launch agent, a process of its own
(:mod:`metaq_py.launch.agent`), while the loop goes on claiming, settling and deciding. The
agent's answer comes back as a :class:`Started` through ``on_started`` (the runner's inbox),
and the loop then records the process and writes the ``start`` event. Until then the task is
*starting* (:attr:`LiveTask.starting`): on the roster, holding its hosts, without a process.
A stop asked meanwhile (a cancel, a preemption, the end of the allocation) is kept and its
signal sent the moment the process exists (:meth:`LiveTask.launched`). The agent's answers
come in order, so the loop always knows a process before it hears of its end. Malleable tasks
start on the loop's thread, in the runner: a resize may come at any moment and must find such
a task either running or not started. So do stand-in processes (the tests on a fake clock),
so that their times stay exact, and every task once the agent is gone (it is said once).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from metaq_py.errors import MetaqError
from metaq_py.launch import HostFiles, LaunchError, LaunchSpec, TaskProcess, launch
from metaq_py.launch.agent_link import AgentLink, AgentTask
from metaq_py.launch.binding import machine_cpus
from metaq_py.launch.prepare import prepare
from metaq_py.launch.process import start_prepared
from metaq_py.policy.model import Kind
from metaq_py.queue.disk.folders import make_folders, set_aside
from metaq_py.queue.disk.logfile import LogRefused, open_log
from metaq_py.queue.layout import FAILED
from metaq_py.runner.context import Context
from metaq_py.runner.tasks.live_task import LiveTask
from metaq_py.runner.tasks.roster import Roster

__all__ = ["Launcher", "StartProcess", "Started"]

StartProcess = Callable[..., TaskProcess]
"""How a task's process is started: :func:`metaq_py.launch.launch`, or a stand-in in tests."""


@dataclass(frozen=True, slots=True)
class Started:
    """A start done by the launch agent: the task, its launch spec, and its ``process``, or
    ``error`` (one sentence) when it could not be started, or neither when the agent ended
    before it (the runner then starts it itself); ``at`` is when the loop asked for it (the
    task's hosts are its own from then on)."""

    live: LiveTask
    spec: LaunchSpec
    process: TaskProcess | None
    error: str | None
    at: float


# Over 300 lines (304): the three ways of starting a task (in the runner, handed to the
# launch agent, and as a follow-on) share its spec, its folders, its failure and its
# ``start`` event; split, each part would reach into the others' state.
class Launcher:
    """Starts the processes of the roster's tasks waiting to launch: ``start`` starts one,
    which calls ``on_exit`` when it is over, and ``watch`` then watches its run folder.

    ``next_launch`` is the earliest time of the next launch. ``redecide`` says that a launch
    failed since the last decision: its task went back to its folder (or to ``failed/``) and
    its hosts are free, so the loop decides again at once and does not stop before."""

    def __init__(self, ctx: Context, roster: Roster, *, launch_pause: float,
                 on_exit: Callable[[TaskProcess], None], watch: Callable[[LiveTask], None],
                 start: StartProcess = launch,
                 on_started: Callable[[Started], None] | None = None) -> None:
        self.ctx = ctx
        self.roster = roster
        self.launch_pause = launch_pause
        self.on_exit = on_exit
        self.watch = watch
        self.start = start
        job_dir = ctx.job_dir
        self.runs = job_dir / "runs"
        self.logs = job_dir / "logs"
        self.hostfiles = HostFiles(job_dir / "hostfiles")
        self.folders: set[Path] = set()
        """Folders known to exist, for run folders and logs."""
        # The runner's environment, which every task starts from, read once (os.environ
        # decodes every variable at every read).
        self.environ = dict(os.environ)
        self.next_launch = ctx.clock.now()
        self.redecide = False
        self.on_started = on_started
        """Where the launch agent's starts are handed (``None``: every task starts on the
        loop's thread; see the module text)."""
        self.agent: AgentLink | None = None
        """The launch agent, while it serves (see the module text)."""
        self.handed_over = 0
        """Starts the launch agent has taken."""
        self._binding: bool | None = None
        """Whether shares are pinned to their cores here (``None``: not yet worked out)."""

    def open(self) -> None:
        """Make this job's run folder and start the launch agent."""
        self.runs.mkdir(parents=True, exist_ok=True)
        self.next_launch = self.ctx.clock.now()
        if self.on_started is not None:
            self.agent = AgentLink.open()
            if self.agent is None:
                self.ctx.say("the launch agent cannot run here; tasks start in the runner")

    def close(self) -> None:
        """Stop the launch agent (once its tasks are over)."""
        if self.agent is not None:
            self.agent.close()
            self.agent = None

    def wait_started(self) -> None:
        """Wait until every start handed to the launch agent has been answered (its
        :class:`Started` is in the inbox): on the way out, before the last processes are
        stopped."""
        if self.agent is not None:
            self.agent.sync()

    def launch_ready(self) -> None:
        """Launch the tasks whose hosts are free, as many as the launch pause allows now."""
        clock = self.ctx.clock
        while self.roster.to_launch:
            now = clock.now()
            if self.launch_pause > 0 and now < self.next_launch:
                return
            ready = self.roster.ready()
            if ready is None:
                return
            self.roster.to_launch.remove(ready)
            self._launch(ready, now)
            self.next_launch = clock.now() + self.launch_pause

    def _launch(self, live: LiveTask, now: float) -> None:
        spec = self._spec(live)
        if spec is None:
            return
        try:
            if self._agent_serves() and live.job.kind is not Kind.MALLEABLE:
                self._hand_over(live, spec, now)
                return
            process = self.start(spec, on_exit=self.on_exit, base_env=self.environ,
                                 aside=set_aside)
        except (LaunchError, OSError) as e:
            self._failed(live, str(e))
            return
        self._launched(live, spec, process, now)

    def _spec(self, live: LiveTask) -> LaunchSpec | None:
        """``live``'s launch spec, its folders made; ``None`` when it cannot start (it is
        then requeued, see :meth:`_failed`)."""
        claim, options = live.claim, self.ctx.options
        tee = None
        if claim.spec.log is not None:
            try:
                tee = self.ctx.queue.log_path(claim)
                # Checked against the task's owner and made (with its folders) without
                # following a link; launch then opens the file made here (O_NOFOLLOW).
                owner = claim.program.owner if claim.program is not None \
                    else os.stat(claim.path).st_uid
                os.close(open_log(tee, owner))
            except (MetaqError, LogRefused) as e:
                self._failed(live, str(e))
                return None
            except OSError as e:
                self._failed(live, f"the LOG {tee} cannot be opened: {e.strerror}")
                return None
        resize = claim.spec.resize
        try:
            # A task resized in place has its hostfile rewritten: it gets one of its own.
            shared = None if resize is not None and resize.mode == "in-place" \
                else self.hostfiles.path(live.hosts)
            spec = LaunchSpec(
                script=claim.path, task=claim.id, nodes=live.hosts,
                log=self.logs / claim.folder / f"{claim.relpath}.log",
                rundir=self.runs / claim.folder / claim.relpath, attempt=live.attempt,
                resume=live.resume, gpus=live.gpu_ids, cores=live.cores,
                bind=live.cores is not None and self._binds(), tee=tee,
                shared_hostfile=shared,
                srun_wrap=options.srun, srun_args=options.srun_args, program=claim.program,
                env=claim.program.env if claim.program is not None else {})
            self._make_room(spec)
        except (LaunchError, OSError) as e:
            self._failed(live, str(e))
            return None
        return spec

    def _agent_serves(self) -> bool:
        """Whether the launch agent takes starts; when it has ended, that is said once."""
        agent = self.agent
        if agent is None:
            return False
        if not agent.alive:
            self.ctx.say(f"the launch agent {agent.ended}; tasks start in the runner from "
                         f"now on")
            self.agent = None
            return False
        return True

    def _hand_over(self, live: LiveTask, spec: LaunchSpec, now: float) -> None:
        """Prepare ``live``'s start and hand it to the launch agent (started here instead if
        the agent cannot take it). Raises :class:`LaunchError` as a start does."""
        assert self.agent is not None and self.on_started is not None
        on_started = self.on_started
        ready = prepare(spec, base_env=self.environ, aside=set_aside)

        def done(process: AgentTask | None, error: str | None) -> None:
            on_started(Started(live, spec, process, error, now))

        live.starting = True
        if self.agent.start(ready, done=done, on_exit=self.on_exit):
            self.handed_over += 1
            return
        live.starting = False
        self._launched(live, spec, start_prepared(ready, on_exit=self.on_exit), now)

    def started(self, done: Started) -> None:
        """Take a start the launch agent has answered (on the loop's thread)."""
        live = done.live
        live.starting = False
        at = done.at
        if done.process is None and done.error is None:
            # The agent ended before it: nothing started, and the runner starts it now.
            if self.roster.live.get(live.id) is live:
                self._launch(live, self.ctx.clock.now())
            return
        if done.process is None:
            assert done.error is not None
            if self.roster.live.get(live.id) is live:
                self._failed(live, done.error)
            return
        if self.roster.live.get(live.id) is not live:
            # Let go of while it was starting (its claim was taken back): it may not run.
            done.process.kill()
            return
        self._launched(live, done.spec, done.process, at)

    def _launched(self, live: LiveTask, spec: LaunchSpec, process: TaskProcess,
                  now: float) -> None:
        """``live``'s process has started: record it and write its ``start`` event."""
        claim = live.claim
        live.launched(process, now)
        self.watch(live)
        self.ctx.events.write(
            "start", task=live.id, attempt=live.attempt, hosts=list(live.hosts),
            blocks=self.roster.blocks.spanned(live.node_ids),
            gpus=live.gpus, gpu_ids=list(live.gpu_ids or ()),
            cores=None if live.cores is None else list(live.cores),
            bound=None if live.cores is None else spec.bind or spec.srun_wrap,
            project=claim.spec.project, kind=str(live.job.kind), shape=live.job.shape,
            resume=live.resume, notice=live.notice, instant=live.instant,
            lenders=list(live.lenders), pid=process.pid)

    def _binds(self) -> bool:
        """Whether a share started here is pinned to its cores on this machine; said once when
        it is not (see :mod:`metaq_py.launch.binding`). A wrapped SLURM step is bound in its
        step instead."""
        if self._binding is None:
            alloc, why = self.ctx.alloc, None
            if self.ctx.options.srun:
                self._binding = False
                return False
            if alloc.system != "local":
                why = (f"their scripts run on the batch node; start {alloc.system} steps with "
                       f"`metaq run --srun`, or bind them in the script "
                       f"(srun --cpu-bind=mask_cpu:$METAQ_CPU_MASK)")
            elif alloc.cores_per_node > len(machine_cpus()):
                why = (f"a pretend node has {alloc.cores_per_node} cores and this machine "
                       f"lets metaq use {len(machine_cpus())}")
            self._binding = why is None
            if why is not None:
                self.ctx.say(f"shares of a node are not bound to their cores: {why}")
        return self._binding

    def _make_room(self, spec: LaunchSpec) -> None:
        """Make the folders that hold ``spec``'s run folder and log (``launch`` makes the run
        folder and the log themselves)."""
        root = self.ctx.queue.root
        for parent in (spec.rundir.parent, spec.log.parent):
            if parent not in self.folders:
                # Real folders all the way down from the queue root: a link planted in a
                # group-writable jobs/ never sends a log out of the queue.
                make_folders(root, parent)
                self.folders.add(parent)
        # Something planted where the run folder or the log goes is moved aside by launch
        # (set_aside, see metaq_py.launch.places), never written through.

    def _failed(self, live: LiveTask, why: str) -> None:
        """Give back the hosts of a task that could not be started and requeue it with the
        attempt counted (to ``failed/`` once ``caps.attempts`` are used up)."""
        ctx = self.ctx
        ctx.say(f"cannot start {live.id}: {why}")
        # The decision that started it no longer holds (the task is back in its folder, or
        # gone, and its hosts are free): decide again before concluding nothing fits. No
        # watcher event is needed, and none may come.
        self.redecide = True
        self.roster.forget(live, now=ctx.clock.now())
        try:
            moved = ctx.queue.requeue(live.claim, reason=f"could not start: {why}",
                                      count_attempt=True)
        except OSError as e:
            ctx.say(f"cannot requeue {live.id} ({e.strerror}); it stays claimed in "
                    f"{live.claim.path} for the next runner to reclaim")
            return
        outcome = "failed" if moved is not None and moved.state == FAILED else "retry"
        ctx.events.write(
            "end", task=live.id, attempt=live.attempt, hosts=list(live.hosts),
            outcome=outcome, exit_code=None, signal=None, seconds=0.0, node_seconds=0.0,
            gpu_seconds=0.0, project=live.claim.spec.project, kind=str(live.job.kind),
            reason=f"could not start: {why}")
