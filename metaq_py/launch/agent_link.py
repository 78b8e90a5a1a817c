"""The runner's end of its launch agent (:mod:`metaq_py.launch.agent`).

:meth:`AgentLink.open` starts the agent; :meth:`AgentLink.start` hands it a prepared start
(:mod:`metaq_py.launch.prepare`) and returns at once. A reader thread takes the agent's
answers in the order it gave them: for each start, ``done`` is called with an
:class:`AgentTask` (or with the sentence that says why the task did not start), and later the
task's ``on_exit``, as for a process the runner started itself. An :class:`AgentTask` is a
:class:`~metaq_py.launch.process.TaskProcess` whose signals and kills go through the agent.

When the agent is gone (:attr:`AgentLink.alive` false: it died, or it could not be started),
the tasks it held are killed by their cgroup and their mark and end as
:attr:`~metaq_py.launch.process.TaskProcess.lost`
with SIGKILL, starts not yet answered get their sentence, and the runner starts its next
tasks itself.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import marshal
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from metaq_py.launch import agent
from metaq_py.launch.cgroup import kill_cgroup
from metaq_py.launch.preflight import start_failure, unbound_failure
from metaq_py.launch.prepare import Prepared
from metaq_py.launch.process import ExitStatus, TaskProcess
from metaq_py.launch.sweep import marked_processes
from metaq_py.launch.usage import Usage

__all__ = ["AgentLink", "AgentTask", "Done"]

Done = Callable[["AgentTask | None", "str | None"], None]
"""Told of one start: its task; or ``None`` and the sentence saying why it cannot start; or
``None`` and ``None`` when nothing was started: the agent ended before it (the task is for
the runner to start itself), or a follow-on was withdrawn."""

_log = logging.getLogger(__name__)

_PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent.parent)
"""Where the agent finds this ``metaq_py`` (the runner may not have it installed)."""


class AgentTask(TaskProcess):
    """A task started by the launch agent: a child of the agent, signalled through it."""

    def __init__(self, *, link: AgentLink, token: int, **kwargs: object) -> None:
        self._link = link
        self._token = token
        super().__init__(**kwargs)  # type: ignore[arg-type]  # TaskProcess's own keywords

    @property
    def token(self) -> int:
        """Its start's token, which a follow-on names (see :meth:`AgentLink.follow`)."""
        return self._token

    @property
    def served(self) -> bool:
        """Whether its launch agent still serves (and so may start a follow-on of it)."""
        return self._link.alive

    def _watch_exit(self) -> None:
        """The agent watches it, and the link hears of its exit."""

    # No lock around the sends: the agent alone knows whether the pid is still the task's,
    # and a send may wait for the agent, which may be waiting for the link's reader.
    def _signal_group(self, sig: signal.Signals) -> bool:
        if self._reaped or not self._link.send((agent.SIGNAL, self._token, int(sig))):
            return False
        self.sent_signals.append(sig)
        return True

    def kill(self) -> bool:
        """SIGKILL everything of the task (its cgroup, its session, its marked processes)."""
        if self._reaped or not self._link.send((agent.KILL, self._token)):
            return False
        self.sent_signals.append(signal.SIGKILL)
        return True

    def _ended(self, returncode: int, usage: Usage | None) -> None:
        """Told by the link, once the agent has reaped the script."""
        self._reaped = True
        if self._tee is None:
            self._finish(returncode, usage)
        else:  # the rest of its output may take a moment: not on the link's thread
            threading.Thread(target=self._finish, args=(returncode, usage),
                             name=f"task {self.spec.task}", daemon=True).start()


@dataclass(slots=True)
class _Pending:
    """A start handed to the agent and not yet answered."""

    ready: Prepared
    done: Done
    on_exit: Callable[[TaskProcess], object] | None


class AgentLink:
    """The runner's conversation with its launch agent (see the module text)."""

    def __init__(self, sock: socket.socket, pid: int, *, clock: Callable[[], float]) -> None:
        self.pid = pid
        self.clock = clock
        self.alive = True
        self.ended: str | None = None
        """How the agent went, once it has ("ended (killed by SIGKILL)", "was closed")."""
        self._sock = sock
        self._tokens = itertools.count(1)
        self._lock = threading.Lock()  # the maps below, and alive
        self._pending: dict[int, _Pending] = {}
        self._tasks: dict[int, AgentTask] = {}
        self._synced: dict[int, threading.Event] = {}
        self._closing = False
        self._reader = threading.Thread(target=self._read, name="metaq launch agent", daemon=True)
        self._reader.start()

    @classmethod
    def open(cls, *, clock: Callable[[], float] = time.time) -> AgentLink | None:
        """Start an agent; ``None`` where it cannot run (no pidfds, or no interpreter)."""
        if not hasattr(os, "pidfd_open"):
            return None
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            theirs.set_inheritable(True)
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
            argv = [sys.executable, "-m", "metaq_py.launch.agent", str(theirs.fileno())]
            pid = os.posix_spawn(sys.executable, argv, env, setsid=True,
                                 setsigmask=agent.RUNNER_SIGNALS)
        except OSError:
            ours.close()
            return None
        finally:
            theirs.close()
        return cls(ours, pid, clock=clock)

    def start(self, ready: Prepared, *, done: Done,
              on_exit: Callable[[TaskProcess], object] | None) -> bool:
        """Hand ``ready`` to the agent (its output descriptor goes with it, and is closed
        here); ``False`` when the agent cannot take it (gone, or the start is too large to
        send): ``ready`` is then untouched, for the runner to start itself."""
        return self._hand(ready, agent.START, (), done, on_exit) is not None

    def follow(self, ready: Prepared, *, after: int, hold: float, done: Done,
               on_exit: Callable[[TaskProcess], object] | None) -> int | None:
        """Hand ``ready`` to the agent as a follow-on of the start ``after`` (a token): started
        when that task has ended, unless :meth:`withdraw` or ``hold`` seconds come first, or
        that start never runs (``done`` is then told that nothing started). The token of
        this start, to withdraw it or follow it by; ``None`` as for :meth:`start`."""
        return self._hand(ready, agent.FOLLOW, (after, hold), done, on_exit)

    def withdraw(self, token: int) -> None:
        """Withdraw the follow-on ``token`` if the agent still holds it."""
        self.send((agent.WITHDRAW, token))

    def _hand(self, ready: Prepared, kind: str, extra: tuple[int | float, ...], done: Done,
              on_exit: Callable[[TaskProcess], object] | None) -> int | None:
        token = next(self._tokens)
        data = marshal.dumps((kind, token, *extra, ready.command, ready.env, ready.mark,
                              ready.cpus, ready.program is not None))
        if len(data) > agent.MESSAGE_MOST:
            return None
        with self._lock:
            if not self.alive:
                return None
            self._pending[token] = _Pending(ready, done, on_exit)
        try:
            fds = [ready.output] if ready.program is None else [ready.output, ready.program]
            socket.send_fds(self._sock, [data], fds)
        except OSError:
            with self._lock:
                self._pending.pop(token, None)
            return None
        os.close(ready.output)
        ready.close_program()
        return token

    def send(self, message: agent.Message) -> bool:
        """Send ``message``; ``False`` when the agent is gone."""
        if not self.alive:
            return False
        try:
            self._sock.send(marshal.dumps(message))
        except OSError:
            return False
        return True

    def sync(self, timeout: float = 60.0) -> None:
        """Wait until every start handed over so far has been answered (its ``done``
        called)."""
        token = next(self._tokens)
        event = threading.Event()
        with self._lock:
            self._synced[token] = event
        if self.send((agent.SYNC, token)):
            event.wait(timeout)

    def close(self, timeout: float = 10.0) -> None:
        """End the conversation: the agent ends what it still holds, and exits."""
        self._closing = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_WR)
        self._reader.join(timeout)
        if self._reader.is_alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            self._reader.join()
        self._sock.close()

    # --- the reader thread --------------------------------------------------------------------

    def _read(self) -> None:
        try:
            while True:
                try:
                    data = self._sock.recv(agent.MESSAGE_MOST)
                except OSError:
                    data = b""
                if not data:
                    break
                for message in marshal.loads(data):
                    try:
                        self._take(message)
                    except Exception:  # a bug here must not leave the runner deaf
                        _log.exception("the answer %r of the launch agent failed", message)
        finally:
            self._gone()

    def _take(self, message: agent.Message) -> None:
        kind, token = message[0], message[1]
        if kind == agent.EXITED:
            self._exited(token, message[2], message[3])
        elif kind == agent.STARTED:
            self._started(token, message[2], message[3])
        elif kind in (agent.REFUSED, agent.UNBOUND):
            self._refused(token, kind, message[2], message[3], message[4])
        elif kind == agent.WITHDRAWN:
            self._unstarted(token).done(None, None)
        elif kind == agent.SYNCED:
            with self._lock:
                event = self._synced.pop(token, None)
            if event is not None:
                event.set()

    def _started(self, token: int, pid: int, cgroup: str | None) -> None:
        with self._lock:
            pending = self._pending.pop(token)
        ready = pending.ready
        task = AgentTask(link=self, token=token, spec=ready.spec, pid=pid, tee=ready.tee,
                         on_exit=pending.on_exit, clock=self.clock, started_at=self.clock(),
                         mark=ready.mark, cgroup=None if cgroup is None else Path(cgroup))
        with self._lock:
            self._tasks[token] = task
        if ready.tee is not None:
            ready.tee.start()
        pending.done(task, None)

    def _unstarted(self, token: int) -> _Pending:
        """The start ``token``, which will not run: its copier (if any) is stopped."""
        with self._lock:
            pending = self._pending.pop(token)
        if pending.ready.tee is not None:
            pending.ready.tee.abandon()
        return pending

    def _refused(self, token: int, kind: str, errno: int, strerror: str,
                 filename: str | None) -> None:
        pending = self._unstarted(token)
        ready = pending.ready
        spec = ready.spec
        if kind == agent.UNBOUND:
            why = unbound_failure(spec, strerror)
        else:
            why = start_failure(spec, ready.command, OSError(errno, strerror, filename))
        pending.done(None, why)

    def _exited(self, token: int, returncode: int,
                used: tuple[float, float, int | None] | None) -> None:
        with self._lock:
            task = self._tasks.pop(token)
        usage = None if used is None else Usage(user_seconds=used[0], system_seconds=used[1],
                                                max_rss_bytes=used[2], source="wait4")
        task._ended(returncode, usage)

    def _gone(self) -> None:
        """The agent's end of the socket closed: it exited, or died."""
        how = ""
        with contextlib.suppress(ChildProcessError):
            status = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
            how = f" ({ExitStatus(status)})"
        with self._lock:
            self.alive = False
            pending, self._pending = self._pending, {}
            tasks, self._tasks = self._tasks, {}
            synced, self._synced = self._synced, {}
        self.ended = "was closed" if self._closing else f"ended{how}"
        for event in synced.values():
            event.set()
        for p in pending.values():
            if p.ready.tee is not None:
                p.ready.tee.abandon()
        # A pid may be someone else's by now: only the cgroups and the marks are sure. A start
        # not answered may have been made before the agent died: its mark finds it.
        for task in tasks.values():
            if task.cgroup is not None:
                kill_cgroup(task.cgroup)
        marks = {t.mark for t in tasks.values()} | {p.ready.mark for p in pending.values()}
        for mark in marks:
            for pid in marked_processes(mark) if mark else ():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        for p in pending.values():
            p.done(None, None)
        for task in tasks.values():
            task.lost = f"its launch agent (pid {self.pid}) {self.ended}"
            task._ended(-signal.SIGKILL, None)
