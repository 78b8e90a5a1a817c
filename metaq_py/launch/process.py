"""Running task processes: starting them, signalling them, and noticing when they end.

Every task runs in a session and process group of its own (:mod:`~metaq_py.launch.spawn`), so
one signal reaches the script and everything it started. When the script ends, whatever it left
behind in its session is killed (:mod:`metaq_py.launch.sweep`), as SLURM does with a job
step's processes: a task's nodes are free when the runner is told it is over.

**Noticing exits without polling.** On Linux 5.3 and later one reaper thread watches every
task at once: it holds a pidfd for each task's pid (``os.pidfd_open``) in an ``epoll`` set, so
it never waits for, or reaps, a process it does not own, and a launch starts no thread of its
own. Elsewhere each task has a watcher thread blocked in ``waitid`` on the task's pid alone.
When the script exits, the reaper (or watcher) kills the rest of the session, reaps the
script, lets the output copier finish, records the :class:`ExitStatus`, and then calls the
``on_exit`` callback given to :func:`launch` with the :class:`TaskProcess`. A task with a
``tee`` copier ends on a thread of its own, so that a slow file system holding up the last
of one task's output never delays noticing the others' exits. A runner passes ``events.put`` of a
``queue.Queue`` that its file-system watcher and timers also feed, and blocks in
``events.get(timeout=...)``: it wakes on a task exit, a queue change or its next deadline,
and never busy-polls. The callback runs in the reaper (or watcher) thread; it should only
hand over, as every other task's exit waits for it.

The reaper and watchers rely on being the only ones to reap the task processes: the runner must not
call ``os.wait()``/``waitpid(-1)`` or set SIGCHLD to ``SIG_IGN``.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import select
import signal
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from metaq_py.launch.binding import pin_tree
from metaq_py.launch.cgroup import (
    born_inside,
    kill_cgroup,
    release_cgroup,
    remove_cgroup,
    task_cgroup,
)
from metaq_py.launch.preflight import start_failure, unbound_failure
from metaq_py.launch.prepare import prepare
from metaq_py.launch.spawn import spawn
from metaq_py.launch.spec import LaunchError, LaunchSpec
from metaq_py.launch.sweep import discard_start, kill_session, sweep_ended
from metaq_py.launch.tee import OutputTee
from metaq_py.launch.usage import Usage, peak_rss_self, reap
from metaq_py.launch.workdir import Aside

if TYPE_CHECKING:  # loaded only where a queue streams its output
    from metaq_py.launch.streamcopy import StreamCopier

__all__ = ["ExitStatus", "TaskProcess", "contain", "launch", "terminate_all"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ExitStatus:
    """How a task's script ended: ``returncode`` as :mod:`subprocess` reports it (a negative
    number is the signal that killed it), and what it used, from the kernel when it was reaped
    (``None``: not known; see :mod:`metaq_py.launch.usage`)."""

    returncode: int
    usage: Usage | None = None
    oom: bool = False
    """Killed by the kernel's OOM killer for passing its ``MEM`` (:mod:`metaq_py.launch.memory`)."""

    @property
    def ok(self) -> bool:
        """Whether the script exited with code 0."""
        return self.returncode == 0

    @property
    def exit_code(self) -> int | None:
        """The exit code, or ``None`` when a signal killed the script."""
        return self.returncode if self.returncode >= 0 else None

    @property
    def signal(self) -> signal.Signals | None:
        """The signal that killed the script, or ``None`` when it exited."""
        if self.returncode >= 0:
            return None
        try:
            return signal.Signals(-self.returncode)
        except ValueError:
            return None

    def __str__(self) -> str:
        if self.returncode >= 0:
            return f"exit code {self.returncode}"
        sig = self.signal
        if self.oom:
            return "killed by the kernel's OOM killer past its MEM"
        return f"killed by {sig.name if sig else f'signal {-self.returncode}'}"


class TaskProcess:
    """A started task: its process group, its log, and (once over) how it ended.

    Made by :func:`launch`. ``pid`` is the script's pid, which is also its process group and
    session id. ``sent_signals`` lists the signals the runner sent, in order, so that an
    interruption can be told apart from a failure.
    """

    def __init__(
        self,
        *,
        spec: LaunchSpec,
        pid: int,
        tee: OutputTee | StreamCopier | None,
        on_exit: Callable[[TaskProcess], object] | None,
        clock: Callable[[], float],
        started_at: float,
        mark: str | None = None,
        cgroup: Path | None = None,
        contained: bool = False,
        limited: bool = False,
        inherited_rss: int = 0,
    ) -> None:
        self.spec = spec
        self.pid = pid
        self.mark = mark
        """The token in this task's ``METAQ_TASK_MARK``, found in every descendant."""
        self.cgroup = cgroup
        """The task's own cgroup, where the kernel let the runner make one (see
        :mod:`metaq_py.launch.cgroup`): stopping the task kills all of it at once."""
        self.limited = limited
        """Whether the cgroup holds the task to its ``MEM`` (``memory.max``; see
        :mod:`metaq_py.launch.memory`): made for it, never kept for another."""
        self.contained = contained
        """Whether the cgroup holds every process of the task (none was forked before the
        script was moved in): the sweep at its exit then looks only there."""
        self.inherited_rss = inherited_rss
        """Bytes of the script's ``ru_maxrss`` that may be the runner's, not its own: Linux
        starts a process's peak at ``exec`` from the memory it was spawned from (the
        runner's, shared by ``posix_spawn``), so only a peak above this is the task's."""
        self.started_at = started_at
        self.ended_at: float | None = None
        self.sent_signals: list[signal.Signals] = []
        self.output_errors: tuple[str, ...] = ()
        self._tee = tee
        self._on_exit = on_exit
        self._clock = clock
        self._status: ExitStatus | None = None
        self._reaped = False
        self._lock = threading.Lock()  # no signal may cross the reaping of the pid
        self._done = threading.Event()
        # Its exit is noticed by the reaper, else by a watcher of its own.
        if not _REAPER.add(self):
            watcher = threading.Thread(target=self._watch, name=f"task {self.spec.task}",
                                       daemon=True)
            watcher.start()

    @property
    def log(self) -> Path:
        """The task's own log file."""
        return self.spec.log

    @property
    def status(self) -> ExitStatus | None:
        """How the task ended, or ``None`` while it runs."""
        return self._status if self._done.is_set() else None

    @property
    def returncode(self) -> int | None:
        """The script's return code (negative: killed by that signal), ``None`` while running."""
        status = self.status
        return None if status is None else status.returncode

    def wait(self, timeout: float | None = None) -> ExitStatus | None:
        """Wait until the task is over (at most ``timeout`` seconds); ``None`` if it is not."""
        self._done.wait(timeout)
        return self.status

    def send_signal(self, sig: int) -> bool:
        """Send ``sig`` to the task's whole process group; ``False`` if it is already over.

        For a task wrapped in ``srun``, signals that ``srun`` would turn into an immediate kill
        go to the script's step through ``scancel`` instead (see
        :mod:`metaq_py.launch.slurm_step`).
        """
        sig = signal.Signals(sig)
        if self.spec.srun_wrap and not self._done.is_set():
            # A task in a step of its own (metaq run --srun): only then is this loaded.
            from metaq_py.launch.slurm_step import SRUN_INTERCEPTS, read_step, signal_step
            step = read_step(self.spec.step_file) if sig in SRUN_INTERCEPTS else None
            # Before the step has recorded itself the script has not started, and the group
            # signal below (which srun turns into a kill) loses nothing.
            if step is not None and signal_step(step, sig):
                self.sent_signals.append(sig)
                return True
        return self._signal_group(sig)

    def _signal_group(self, sig: signal.Signals) -> bool:
        """Send ``sig`` to the script's process group, unless it has been reaped."""
        with self._lock:
            if self._reaped:
                return False
            try:
                os.killpg(self.pid, sig)
            except ProcessLookupError:
                return False
            self.sent_signals.append(sig)
            return True

    def kill(self) -> bool:
        """SIGKILL the task's process group and anything else left in its session."""
        with self._lock:
            if self._reaped:
                return False
            self.sent_signals.append(signal.SIGKILL)
            if self.cgroup is not None:
                kill_cgroup(self.cgroup)
            kill_session(self.pid, self.mark)
            return True

    def terminate(self, grace: float, *, sig: int = signal.SIGTERM) -> ExitStatus:
        """Send ``sig``, give the task ``grace`` seconds to end, then kill it; its status."""
        terminate_all([self], grace=grace, sig=sig)
        status = self.status
        assert status is not None  # terminate_all returns only when the task is over
        return status

    def _watch(self) -> None:
        # Wait for the script's exit *without* reaping it: while it is a zombie its pid, and so
        # its process group and session id, cannot be reused, and the sweep below is safe.
        with contextlib.suppress(ChildProcessError):  # reaped elsewhere: reap says so
            os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
        self._end()

    def _exited(self) -> None:
        """Called by the reaper once the script has exited (a zombie not yet reaped)."""
        if self._tee is None:
            self._end()
        else:
            threading.Thread(target=self._end, name=f"task {self.spec.task}", daemon=True).start()

    def _end(self) -> None:
        with self._lock:
            sweep_ended(self.pid, mark=self.mark, cgroup=self.cgroup, contained=self.contained,
                        stopped=bool(self.sent_signals))
            returncode, usage = reap(self.pid)
            self._reaped = True
        oom = False
        if self.spec.mem is not None and not self.spec.srun_wrap:
            from metaq_py.launch.memory import memory_end, out_of_memory

            ended = memory_end(self.cgroup) if self.cgroup is not None and self.limited \
                else None
            if ended is not None and ended.peak is not None and usage is not None:
                usage = replace(usage, memory_peak_bytes=ended.peak)
            own = None if usage is None or usage.max_rss_bytes is None \
                or usage.max_rss_bytes <= self.inherited_rss else usage.max_rss_bytes
            oom = out_of_memory(
                returncode, mem=self.spec.mem,
                oom_kills=None if ended is None else ended.oom_kills, max_rss=own,
                runner_killed=signal.SIGKILL in self.sent_signals)
        if self.cgroup is not None and (self.sent_signals or self.limited):
            remove_cgroup(self.cgroup, wait=1.0)  # its killed processes may linger a moment
        elif self.cgroup is not None:
            release_cgroup(self.cgroup)
        self._finish(returncode, usage, oom)

    def _finish(self, returncode: int, usage: Usage | None, oom: bool = False) -> None:
        """The script is over and reaped: complete its output, record how it ended and call
        ``on_exit``."""
        self.ended_at = self._clock()
        if self._tee is not None:
            self.output_errors = tuple(self._tee.finish())
        self._status = ExitStatus(returncode, usage, oom)
        self._done.set()
        if self._on_exit is not None:
            try:
                self._on_exit(self)
            except Exception:
                _log.exception("the exit callback of task %s failed", self.spec.task)

    def __repr__(self) -> str:
        state = self._status if self._done.is_set() else "running"
        return f"<TaskProcess {self.spec.task!r} pid={self.pid} {state}>"


class _Reaper:
    """One thread that notices the exits of every task, through pidfds in an ``epoll`` set.

    A pidfd becomes readable when its process exits, and waiting on it reaps nothing: the
    script stays a zombie (its pid, process group and session id reserved) until
    :meth:`TaskProcess._end` has swept its session and reaps it with ``wait4``.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tasks: dict[int, TaskProcess] = {}
        self._epoll: select.epoll | None = None
        self._owner = 0  # the pid whose reaper thread this is (a forked child needs its own)
        self._works = hasattr(os, "pidfd_open") and hasattr(select, "epoll")

    def add(self, task: TaskProcess) -> bool:
        """Watch ``task``; ``False`` when pidfds are not available (it needs a watcher)."""
        if not self._works:
            return False
        try:
            fd = os.pidfd_open(task.pid)
        except OSError as e:
            if e.errno in (errno.ENOSYS, errno.EPERM, errno.EINVAL):
                self._works = False  # a kernel before 5.3, or a sandbox that forbids it
            return False
        with self._lock:
            if self._owner != os.getpid():
                self._start()
            assert self._epoll is not None
            self._tasks[fd] = task
            self._epoll.register(fd, select.EPOLLIN)
        return True

    def _start(self) -> None:
        self._epoll = select.epoll()
        self._tasks = {}
        self._owner = os.getpid()
        threading.Thread(target=self._run, args=(self._epoll,), name="metaq task reaper",
                         daemon=True).start()

    def _run(self, epoll: select.epoll) -> None:
        while True:
            try:
                ready = epoll.poll()
            except InterruptedError:
                continue
            for fd, _ in ready:
                with self._lock:
                    task = self._tasks.pop(fd, None)
                    if task is None:
                        continue
                    epoll.unregister(fd)
                os.close(fd)
                try:
                    task._exited()
                except Exception:
                    _log.exception("noticing the exit of task %s failed", task.spec.task)


_REAPER = _Reaper()




def launch(
    spec: LaunchSpec,
    *,
    on_exit: Callable[[TaskProcess], object] | None = None,
    base_env: Mapping[str, str] | None = None,
    clock: Callable[[], float] = time.time,
    srun: str = "srun",
    aside: Aside | None = None,
) -> TaskProcess:
    """Start ``spec``'s script in a new session and return its :class:`TaskProcess`.

    Writes the hostfile first (unless the spec names a shared one, which must exist), then
    starts the script with stdin from ``/dev/null`` and stdout and stderr both going to the
    log (and the ``tee`` file, through a copier thread). ``on_exit`` is called once, from the
    reaper (or watcher) thread, after the task is over and its output is complete.
    ``base_env`` defaults to the runner's environment. A script that cannot be started raises
    :class:`LaunchError` and leaves no process behind. ``aside`` moves what someone planted
    at the run folder's or the log's name out of the way (:mod:`metaq_py.launch.workdir`;
    without it, such a start fails). The script is moved into a cgroup of its own where the
    kernel allows (:mod:`metaq_py.launch.cgroup`), and pinned if it is a bound share.
    """
    ready = prepare(spec, base_env=os.environ if base_env is None else base_env, srun=srun,
                    aside=aside)
    command, tee, cpus = ready.command, ready.tee, ready.cpus
    try:
        pid = spawn(command, output=ready.output, env=ready.env, program=ready.program,
                    error=ready.error)
    except OSError as e:
        ready.abandon()
        raise LaunchError(start_failure(spec, command, e)) from None
    inherited = peak_rss_self()  # at least the peak the script started from at its exec
    # The child has its own copy; the parent's must go, or the pipe would never end.
    os.close(ready.output)
    if ready.error is not None:
        os.close(ready.error)
    ready.close_program()
    started_at = clock()
    try:
        # a task in a SLURM step of its own runs elsewhere: here is only its srun
        mem = None if spec.srun_wrap else spec.mem
        cgroup, contained, limited = contain(pid, mark=ready.mark, cpus=cpus, mem=mem)
    except OSError as e:
        if tee is not None:
            tee.abandon()
        raise LaunchError(unbound_failure(spec, e.strerror or str(e))) from None
    if tee is not None:
        tee.start()
    return TaskProcess(
        spec=spec, pid=pid, tee=tee, on_exit=on_exit, clock=clock, started_at=started_at,
        mark=ready.mark, cgroup=cgroup, contained=contained, limited=limited,
        inherited_rss=inherited,
    )


def contain(pid: int, *, mark: str, cpus: list[int] | None,
            mem: int | None = None) -> tuple[Path | None, bool, bool]:
    """Move the script ``pid``, just started, into a cgroup of its own where the kernel allows
    (:mod:`metaq_py.launch.cgroup`), held to ``mem`` bytes if given and the kernel lets it,
    then pin it to ``cpus`` if it is a bound share (after the move, which a pinned child makes
    dearer): its cgroup, whether that holds all of the task (no child was forked before the
    move), and whether it holds the task to ``mem``. A script that cannot be pinned is killed
    and reaped, and the ``OSError`` raised: a start that failed."""
    cgroup, limited = task_cgroup(mark, pid, mem)
    alone = None
    if cpus is not None:
        try:
            alone = pin_tree(pid, cpus)  # answers born_inside on the way
        except OSError:
            discard_start(pid, cgroup)
            raise
    if cgroup is not None and alone is None:
        alone = born_inside(pid)
    return cgroup, cgroup is not None and bool(alone), limited


def terminate_all(tasks: Iterable[TaskProcess], *, grace: float, sig: int = signal.SIGTERM) -> None:
    """Stop several tasks at once: ``sig`` to each, one shared ``grace`` period, then SIGKILL
    to those still running. Returns when every one of them is over."""
    tasks = list(tasks)
    for task in tasks:
        task.send_signal(sig)
    deadline = time.monotonic() + grace
    for task in tasks:
        task.wait(max(0.0, deadline - time.monotonic()))
    for task in tasks:
        if task.status is None:
            task.kill()
    for task in tasks:
        task.wait()
