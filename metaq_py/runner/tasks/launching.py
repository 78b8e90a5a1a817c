"""Launching the roster's placed tasks, when their hosts are physically free.

At most one task is launched per ``launch_pause`` (``caps.launch_pause``), which protects the
batch node from a burst of starts. Every start comes from a decision: the decider applied its
``Start`` to the Cluster (:meth:`Cluster.apply <metaq_py.cluster.Cluster.apply>`) and put the
claimed task on the roster, and the launcher starts it, on the loop's thread, once its hosts
are free (:func:`metaq_py.launch.launch`; stand-in processes in the tests on a fake clock). A
task that cannot be started goes back to its folder with the attempt counted (to ``failed/``
once its attempts are used up).
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from metaq_py.errors import MetaqError
from metaq_py.hybrid import Kind
from metaq_py.launch import HostFiles, LaunchError, LaunchSpec, TaskProcess, launch
from metaq_py.launch.binding import (
    MpiLayout,
    detect_launcher,
    mpirun_line,
    other_kind,
    which_launcher,
)
from metaq_py.launch.cgroup import runner_cgroup
from metaq_py.policy.model import Job
from metaq_py.queue.disk.folders import make_folders, set_aside
from metaq_py.queue.layout import FAILED
from metaq_py.ranges import machine_cpus
from metaq_py.runner.context import Context
from metaq_py.runner.tasks.live_task import LiveTask
from metaq_py.runner.tasks.roster import Roster

if TYPE_CHECKING:  # loaded only with --agents, or where a queue streams its output
    from metaq_py.launch.agent_task import AgentStarter
    from metaq_py.queue.streams import StreamWriter

__all__ = ["Launcher", "StartProcess"]

StartProcess = Callable[..., TaskProcess]
"""How a task's process is started: :func:`metaq_py.launch.launch`, or a stand-in in tests."""


class Launcher:
    """Starts the processes of the roster's tasks waiting to launch: ``start`` starts one,
    which calls ``on_exit`` when it is over, and ``watch`` then watches its run folder.

    ``next_launch`` is the earliest time of the next launch. ``redecide`` says that a launch
    failed since the last decision: its task went back to its folder (or to ``failed/``) and
    its hosts are free, so the loop decides again at once and does not stop before."""

    def __init__(self, ctx: Context, roster: Roster, *, launch_pause: float,
                 on_exit: Callable[[TaskProcess], None], watch: Callable[[LiveTask], None],
                 start: StartProcess = launch) -> None:
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
        self.streams: StreamWriter | None = None
        """The job's stream file, where the queue's ``output`` is ``streams``."""
        if ctx.queue.config.output == "streams":  # loaded only then
            from metaq_py.queue.streams import StreamWriter

            self.streams = StreamWriter(ctx.queue.root, job_dir)
        self.folders: set[Path] = set()
        """Folders known to exist, for run folders and logs."""
        # The runner's environment, which every task starts from, read once (os.environ
        # decodes every variable at every read).
        self.environ = dict(os.environ)
        self.next_launch = ctx.clock.now()
        self.redecide = False
        self._binding: bool | None = None
        """Whether shares are pinned to their cores here (``None``: not yet worked out)."""
        self._held: set[str] = set()
        """Lost hosts already taken out of service (:meth:`hold_lost`)."""
        self.agents: AgentStarter | None = None
        """The node agents that start the tasks (``--agents``), once opened."""
        self._launcher: tuple[str | None, tuple[str, ...]] | None = None
        """The MPI launcher of ``$METAQ_MPIRUN`` and why it cannot be used (``None``: not
        yet worked out)."""

    def open(self) -> None:
        """Make this job's run folder and, for real processes, the cgroup folder of its
        tasks: what dead runners' tasks left running here is killed then, before any lost
        claim is taken back (see :func:`~metaq_py.launch.cgroup.runner_cgroup`). With
        ``--agents``, start the node agents (a node where none comes is left out, said)."""
        self.runs.mkdir(parents=True, exist_ok=True)
        self.next_launch = self.ctx.clock.now()
        if self.start is launch:
            runner_cgroup()
            if self.ctx.options.agents and self.ctx.alloc.system not in ("slurm", "local"):
                self.ctx.say(f"--agents starts agents on SLURM and on a local pretend cluster "
                             f"only, not yet on {self.ctx.alloc.system} (pbsdsh); tasks start "
                             f"as without it")
            elif self.ctx.options.agents:
                # Loaded only here: a run without agents never loads them.
                from metaq_py.launch.agent_task import AgentStarter

                alloc = self.ctx.alloc
                self.agents = AgentStarter(alloc.nodes, system=alloc.system,
                                           cores=alloc.cores_per_node)
                missing = self.agents.open(self.environ)
                if missing:
                    self.ctx.say(f"no agent came up on {', '.join(missing)} within "
                                 f"{self.agents.pool.timeout:g} s; "
                                 f"{'it is' if len(missing) == 1 else 'they are'} left out")
                self.start = self.agents.start

    def close(self) -> None:
        """End the node agents, if any (each kills what it still runs)."""
        if self.agents is not None:
            self.agents.close()

    def lost_hosts(self) -> set[str]:
        """The hosts whose agent is lost (none without ``--agents``)."""
        return set(self.agents.lost) if self.agents is not None else set()

    def hold_lost(self) -> None:
        """Take each lost host out of service once it is free: a never-preempted one-node
        job, ``lost:HOST``, holds it in the Cluster until the allocation ends (as the
        simulator's repair jobs hold failed nodes), so no decision places a task there."""
        cluster, now = self.roster.cluster, self.ctx.clock.now()
        for host in sorted(self.lost_hosts() - self._held):
            node = self.ctx.alloc.nodes.index(host)
            if node not in cluster.free:
                continue  # its tasks are still letting go: held once they have
            left = max(1.0, self.ctx.end - now) if math.isfinite(self.ctx.end) else 1e9
            cluster.start(Job(f"lost:{host}", Kind.ONDEMAND, 1, left, now), [node], now=now)
            self._held.add(host)
            self.ctx.say(f"node {host} is lost ({self.agents.lost[host] if self.agents else ''})"
                         f"; nothing more starts there")

    def launch_ready(self) -> None:
        """Launch the tasks whose hosts are free, as many as the launch pause allows now."""
        clock = self.ctx.clock
        if self.agents is not None and self.agents.lost:
            self.hold_lost()
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
        lost = self.lost_hosts().intersection(live.hosts)
        if lost:
            self.redecide = True
            self.roster.requeue_unlaunched(live, f"not started: its node {min(lost)} is lost")
            self.hold_lost()
            return
        spec = self._spec(live)
        if spec is None:
            return
        try:
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
            from metaq_py.queue.disk.logfile import LogRefused, open_log  # only a LOG needs it
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
                mpirun=self._mpirun(live),
                env=claim.program.env if claim.program is not None else {},
                run_folder=claim.spec.checkpoint is not None or resize is not None,
                streams=self.streams, mem=claim.spec.mem)
            self._make_room(spec)
        except (LaunchError, OSError) as e:
            self._failed(live, str(e))
            return None
        return spec

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
            project=claim.spec.project, user=claim.user, kind=str(live.job.kind),
            shape=live.job.shape,
            resume=live.resume, notice=live.notice, instant=live.instant,
            lenders=list(live.lenders), pid=process.pid)

    def _mpirun(self, live: LiveTask) -> tuple[str, ...]:
        """``live``'s ``$METAQ_MPIRUN`` (:mod:`metaq_py.launch.binding`): one rank per GPU
        on each node, else one per core; a launcher ``metaq.yaml`` names that is not
        installed gets a prefix that says so and fails (said here once as well)."""
        if self._launcher is None:
            settings = self.ctx.queue.config.mpi
            name, failing = settings.launcher, ()
            if name is None:
                name = detect_launcher(self.ctx.alloc.system)
            else:
                program = settings.executable or name
                why = which_launcher(name, settings.executable)
                if why is not None:
                    failing = ("--unavailable", name)
                else:
                    why = other_kind(name, program)
                    failing = ("--other-kind", name, program)
                if why is not None:
                    self.ctx.say(f"{why}; tasks that use $METAQ_MPIRUN will fail")
                else:
                    failing = ()
            self._launcher = (name, failing)
        name, failing = self._launcher
        if name is None:
            return ()
        if failing:
            return (sys.executable, "-m", "metaq_py.launch.rank", *failing)
        cpus = live.cores if live.cores is not None else \
            tuple(range(self.ctx.alloc.cores_per_node))
        gpus = len(live.gpu_ids or ())
        layout = MpiLayout(live.hosts, gpus or len(cpus), cpus, gpus)
        settings = self.ctx.queue.config.mpi
        return tuple(mpirun_line(name, layout, args=settings.args,
                                 executable=settings.executable,
                                 in_step=self.ctx.options.srun,
                                 local=self.ctx.alloc.system == "local"))

    def _binds(self) -> bool:
        """Whether a share started here is pinned to its cores on this machine; said once when
        it is not (see :mod:`metaq_py.launch.binding`). A wrapped SLURM step is bound in its
        step instead."""
        if self._binding is None:
            alloc, why = self.ctx.alloc, None
            if self.ctx.options.srun:
                self._binding = False
                return False
            if alloc.system != "local" and not self.ctx.options.agents:
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
        wanted = [spec.rundir.parent] if spec.run_folder else []
        if spec.streams is None:  # else no log of its own
            wanted.append(spec.log.parent)
        for parent in wanted:
            if parent not in self.folders:
                # Real folders all the way down from the queue root: a link planted in a
                # group-writable jobs/ never sends a log out of the queue.
                make_folders(root, parent)
                self.folders.add(parent)
        # Something planted where the run folder or the log goes is moved aside by launch
        # (set_aside, see metaq_py.launch.workdir), never written through.

    def _failed(self, live: LiveTask, why: str) -> None:
        """Give back the hosts of a task that could not be started and requeue it with the
        attempt counted (to ``failed/`` once ``caps.attempts`` are used up)."""
        ctx = self.ctx
        ctx.say(f"cannot start {ctx.named(live.id)}: {why}")
        # The decision that started it no longer holds (the task is back in its folder, or
        # gone, and its hosts are free): decide again before concluding nothing fits. No
        # watcher event is needed, and none may come.
        self.redecide = True
        self.roster.forget(live, now=ctx.clock.now())
        try:
            moved = ctx.queue.requeue(live.claim, reason=f"could not start: {why}",
                                      count_attempt=True)
        except OSError as e:
            ctx.say(f"cannot requeue {ctx.named(live.id)} ({e.strerror}); it stays claimed in "
                    f"{live.claim.path} for the next runner to reclaim")
            return
        outcome = "failed" if moved is not None and moved.state == FAILED else "retry"
        ctx.events.write(
            "end", task=live.id, attempt=live.attempt, hosts=list(live.hosts),
            outcome=outcome, exit_code=None, signal=None, seconds=0.0, node_seconds=0.0,
            gpu_seconds=0.0, core_seconds=0.0, project=live.claim.spec.project,
            user=live.claim.user,
            kind=str(live.job.kind), reason=f"could not start: {why}")
