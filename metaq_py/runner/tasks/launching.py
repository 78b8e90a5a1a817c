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

import os
from collections.abc import Callable
from pathlib import Path

from metaq_py.errors import MetaqError
from metaq_py.launch import HostFiles, LaunchError, LaunchSpec, TaskProcess, launch
from metaq_py.launch.cgroup import runner_cgroup
from metaq_py.queue.disk.folders import make_folders, set_aside
from metaq_py.queue.disk.logfile import LogRefused, open_log
from metaq_py.queue.layout import FAILED
from metaq_py.ranges import machine_cpus
from metaq_py.runner.context import Context
from metaq_py.runner.tasks.live_task import LiveTask
from metaq_py.runner.tasks.roster import Roster

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
        self.folders: set[Path] = set()
        """Folders known to exist, for run folders and logs."""
        # The runner's environment, which every task starts from, read once (os.environ
        # decodes every variable at every read).
        self.environ = dict(os.environ)
        self.next_launch = ctx.clock.now()
        self.redecide = False
        self._binding: bool | None = None
        """Whether shares are pinned to their cores here (``None``: not yet worked out)."""

    def open(self) -> None:
        """Make this job's run folder and, for real processes, the cgroup folder of its
        tasks: what dead runners' tasks left running here is killed then, before any lost
        claim is taken back (see :func:`~metaq_py.launch.cgroup.runner_cgroup`)."""
        self.runs.mkdir(parents=True, exist_ok=True)
        self.next_launch = self.ctx.clock.now()
        if self.start is launch:
            runner_cgroup()

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
