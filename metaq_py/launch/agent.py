"""The launch agent: a process of the runner's own that starts its tasks' scripts, watches them
and reaps them, so that the runner's loop never waits for the kernel's work on a process.

A start makes the caller wait until the child has executed its script (``posix_spawn``
borrows the caller's memory until then), and then for the move into the task's cgroup; an
exit costs a sweep of the task's session and a ``wait4``. On a busy node that is most of a
short task's time on the runner's loop, and a thread of the runner cannot take it over:
it needs the interpreter's lock to do anything. So, as mpi_jm has a launcher process on its
nodes, ``metaq run`` starts this agent beside it (``python -m metaq_py.launch.agent FD``)
and hands it every prepared start (:mod:`metaq_py.launch.agent_link`): the runner claims,
decides, prepares and settles; the agent starts, contains, pins, sweeps and reaps.

**The conversation**, ``marshal``-ed tuples on a ``SOCK_SEQPACKET`` socket pair (the runner's
own; nothing else can reach it): one per message from the runner, and from the agent a list of
them, all those of one turn of its loop (each message wakes the runner's reader thread):

==========================================  ==================================================
runner to agent                             agent to runner
==========================================  ==================================================
``start, token, argv, env, mark, cpus``     ``started, token, pid, cgroup`` or
(with the output descriptor attached)       ``refused, token, errno, strerror, filename`` or
                                            ``unbound, token, errno, strerror, None``
``signal, token, signum``                   (nothing: the exit tells the rest)
``kill, token``                             (nothing)
``follow, token, after, hold, argv, env,    the start's answer when it is made, or
mark, cpus`` (with the output descriptor)   ``withdrawn, token``
``withdraw, token``                         ``withdrawn, token`` (if still held)
``sync, n``                                 ``synced, n`` (every earlier start answered)
(a script exits)                            ``exited, token, returncode, usage`` (CPU
                                            seconds, user and system; peak bytes)
(the socket closed)                         (every task killed, and the agent exits)
==========================================  ==================================================

**A follow-on** (:mod:`metaq_py.runner.tasks.follow_ons`) is a start held until the task
whose start was ``after`` ends: the agent makes it the moment it has reaped that task, right
after saying so, without waiting for the runner. ``after`` may itself be a follow-on still
held (a chain). A follow-on is withdrawn, and never started, when the runner asks, when
``hold`` seconds pass first, or when the start it follows is withdrawn or refused; one whose
task has just ended starts at once.

Each started task is watched through a pidfd in the agent's ``epoll`` set. When the script
exits the agent kills what is left of its session (only the cgroup's members when the cgroup
holds all of the task; and, for a task it was told to stop, the whole cgroup and every process
with the task's mark), reaps the script, and only then says so: the runner hears of an exit
when the task's processes are gone, as before. Signals go through the agent because it alone
knows whether the pid is still the task's (unreaped), on a machine whose pids wrap at 32,768.

**When one of the two dies.** The agent reads an end of file when the runner goes, even by
``kill -9``: it then kills every task it holds and reaps them, so the tasks of a dead runner
do not run on unseen while the next runner reclaims their claims and starts them again. The
runner reads an end of file when the agent goes: it kills what the agent held (by cgroup and
by mark: a pid may already be someone else's), requeues those tasks as interrupted, and starts
the next ones itself. The agent ignores the signals that stop the runner (SLURM and PBS signal
every process of the job): the runner, which handles them, tells the agent what to do. Its
handlers are Python's, so a started script has them at their defaults.
"""

from __future__ import annotations

import contextlib
import errno
import marshal
import os
import select
import signal
import socket
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metaq_py.launch.cgroup import kill_cgroup, release_cgroup, remove_cgroup
from metaq_py.launch.process import contain_started
from metaq_py.launch.spawn import spawn
from metaq_py.launch.sweep import discard_start, kill_session, sweep_ended
from metaq_py.launch.usage import reap

__all__ = ["EXITED", "FOLLOW", "KILL", "MESSAGE_MOST", "REFUSED", "RUNNER_SIGNALS", "SIGNAL",
           "START", "STARTED", "SYNC", "SYNCED", "UNBOUND", "WITHDRAW", "WITHDRAWN", "Agent",
           "Message", "main"]

START, FOLLOW, WITHDRAW, SIGNAL, KILL, SYNC = (
    "start", "follow", "withdraw", "signal", "kill", "sync")
STARTED, REFUSED, UNBOUND, EXITED, SYNCED, WITHDRAWN = (
    "started", "refused", "unbound", "exited", "synced", "withdrawn")

_FD_SIZE = 4
"""Bytes of one descriptor in an ``SCM_RIGHTS`` message (a C ``int``)."""

_ENDED_KEPT = 256
"""How many of the last reaped tasks' tokens are kept (a follow-on handed over just after its
task ended still starts; the runner hands over each follow-on within moments)."""

Message = tuple[Any, ...]
"""One message: its kind first (:data:`START`, ...), then its fields, all ``marshal``-able."""

MESSAGE_MOST = 1 << 20
"""The largest message either side reads (a start carries the task's whole environment)."""

RUNNER_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2,
            signal.SIGALRM, signal.SIGQUIT)
"""Signals meant for the runner, which the agent ignores (see the module text). The runner
starts the agent with them blocked, so that one sent before its handlers are set waits for
them."""


@dataclass(slots=True)
class _Child:
    """A started task's script, until it is reaped."""

    token: int
    pid: int
    pidfd: int
    mark: str
    cgroup: Path | None
    contained: bool
    stopped: bool = False
    """Whether the runner sent it a signal: its exit then takes every marked process along."""


def _second(fds: list[int]) -> int | None:
    """The checked program's descriptor, sent after the output's when there is one."""
    return fds[1] if len(fds) > 1 else None


@dataclass(slots=True)
class _Held:
    """A follow-on start waiting for the end of the task ``after`` (see the module text),
    until ``until`` (``time.monotonic``)."""

    token: int
    after: int
    until: float
    start: tuple[Any, ...]
    """The start's fields, as :meth:`Agent._start` takes them."""
    output: int
    program: int | None = None

    def close(self) -> None:
        """Close the descriptors of a start that will not come."""
        os.close(self.output)
        if self.program is not None:
            os.close(self.program)


class Agent:
    """The agent's loop over its socket and its children's pidfds (see the module text)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.epoll = select.epoll()
        self.by_fd: dict[int, _Child] = {}
        self.by_token: dict[int, _Child] = {}
        self.answers: list[Message] = []
        """Answers kept until the end of this turn of the loop, then sent as one message."""
        self.held: dict[int, _Held] = {}
        """Follow-on starts by the token of the start they wait for."""
        self.held_tokens: dict[int, _Held] = {}
        """The same, by their own token."""
        self.ended: deque[int] = deque(maxlen=_ENDED_KEPT)
        """The tokens of the last tasks reaped (a follow-on of one of them starts at once)."""

    def serve(self) -> None:
        """Answer the runner until it closes the socket, then end every task still here."""
        sock_fd = self.sock.fileno()
        self.epoll.register(sock_fd, select.EPOLLIN)
        while True:
            timeout = min((h.until for h in self.held.values()), default=None)
            if timeout is not None:
                timeout = max(0.0, timeout - time.monotonic())
            for fd, _ in self.epoll.poll(timeout):
                if fd != sock_fd:
                    child = self.by_fd.pop(fd, None)
                    if child is not None:
                        self._exited(child)
                elif not self._receive():
                    self._end_all()
                    return
            if timeout is not None:
                self._expire()
            self._flush()

    def _receive(self) -> bool:
        """Take one message from the runner; ``False`` when the runner is gone."""
        try:
            # Close-on-exec from the start: a descriptor received here must reach only the
            # task it is for, through the start's dup2.
            data, ancillary, flags, _ = self.sock.recvmsg(
                MESSAGE_MOST, socket.CMSG_SPACE(2 * _FD_SIZE), socket.MSG_CMSG_CLOEXEC)
        except ConnectionError:
            return False
        fds = [int.from_bytes(cmsg[2][i:i + _FD_SIZE], sys.byteorder)
               for cmsg in ancillary if cmsg[:2] == (socket.SOL_SOCKET, socket.SCM_RIGHTS)
               for i in range(0, len(cmsg[2]) - _FD_SIZE + 1, _FD_SIZE)]
        if not data:
            return False
        if flags & socket.MSG_TRUNC:  # the runner checks the size before it sends
            for fd in fds:
                os.close(fd)
            return True
        message = marshal.loads(data)
        kind = message[0]
        if kind in (START, FOLLOW) and len(fds) < 1 + bool(message[-1]):
            # The kernel dropped a descriptor (MSG_CTRUNC): this agent has too many open. A
            # start whose checked program is missing never runs its script's path instead.
            for fd in fds:
                os.close(fd)
            self._send((REFUSED, message[1], errno.EMFILE, os.strerror(errno.EMFILE), None))
        elif kind == START:
            self._flush()  # the exits noticed so far must not wait for this spawn
            self._start(*message[1:], output=fds[0], program=_second(fds))
        elif kind == FOLLOW:
            self._follow(message, output=fds[0], program=_second(fds))
        elif kind == WITHDRAW:
            self._withdraw(message[1])
        elif kind == SIGNAL:
            self._signal(message[1], message[2])
        elif kind == KILL:
            self._kill(message[1])
        elif kind == SYNC:
            self._send((SYNCED, message[1]))
        return True

    def _send(self, message: Message) -> None:
        self.answers.append(message)

    def _flush(self) -> None:
        """Send the answers of this turn at once: each message wakes the runner's reader."""
        if self.answers:
            with contextlib.suppress(OSError):  # the runner is gone: its end of file is next
                self.sock.send(marshal.dumps(self.answers))
            self.answers = []

    def _start(self, token: int, argv: list[str], env: dict[str, str], mark: str,
               cpus: list[int] | None, checked: bool, *, output: int,
               program: int | None) -> None:
        try:
            pid = spawn(argv, output=output, env=env, program=program)
        except OSError as e:
            self._send((REFUSED, token, e.errno, e.strerror, e.filename))
            return
        finally:
            os.close(output)
            if program is not None:
                os.close(program)
        try:
            cgroup, contained = contain_started(pid, mark=mark, cpus=cpus)
        except OSError as e:
            self._send((UNBOUND, token, e.errno, e.strerror, None))
            return
        try:
            pidfd = os.pidfd_open(pid)
        except OSError as e:
            discard_start(pid, cgroup)
            self._send((REFUSED, token, e.errno, e.strerror, None))
            return
        child = _Child(token, pid, pidfd, mark, cgroup, contained)
        self.by_fd[pidfd] = self.by_token[token] = child
        self.epoll.register(pidfd, select.EPOLLIN)
        self._send((STARTED, token, pid, None if cgroup is None else str(cgroup)))

    def _follow(self, message: Message, *, output: int, program: int | None) -> None:
        """Hold a follow-on start until the end of the task it follows; start it now if that
        has just ended, and withdraw it if that never started."""
        token, after, hold = message[1], message[2], message[3]
        held = _Held(token, after, time.monotonic() + hold, (token, *message[4:]), output,
                     program)
        if after in self.by_token or after in self.held_tokens:
            if after in self.held:  # one follow-on per start: the runner never sends two
                self._withdraw(self.held[after].token)
            self.held[after] = self.held_tokens[token] = held
        elif after in self.ended:
            self._flush()
            self._start_held(held)
        else:
            held.close()
            self._send((WITHDRAWN, token))

    def _start_held(self, held: _Held) -> None:
        """Start a follow-on; a chain behind it goes back if it cannot be started."""
        self._start(*held.start, output=held.output, program=held.program)
        if held.token not in self.by_token:
            self._withdraw_after(held.token)

    def _withdraw(self, token: int) -> None:
        held = self.held_tokens.pop(token, None)
        if held is None:
            return  # started already, or refused: its answer went out before
        del self.held[held.after]
        held.close()
        self._send((WITHDRAWN, token))
        self._withdraw_after(token)

    def _withdraw_after(self, token: int) -> None:
        """The start ``token`` will never run: withdraw what follows it."""
        behind = self.held.get(token)
        if behind is not None:
            self._withdraw(behind.token)

    def _expire(self) -> None:
        """Withdraw the follow-ons whose hold is over."""
        now = time.monotonic()
        for held in [h for h in self.held.values() if h.until <= now]:
            self._withdraw(held.token)

    def _signal(self, token: int, signum: int) -> None:
        child = self.by_token.get(token)
        if child is None:
            return  # over already: its exit is on its way to the runner
        child.stopped = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, signum)

    def _kill(self, token: int) -> None:
        child = self.by_token.get(token)
        if child is None:
            return
        child.stopped = True
        if child.cgroup is not None:
            kill_cgroup(child.cgroup)
        kill_session(child.pid, child.mark)

    def _exited(self, child: _Child) -> None:
        """The script exited (a zombie, so its session id is still its own): sweep, reap,
        report, then give back its cgroup."""
        self.epoll.unregister(child.pidfd)
        os.close(child.pidfd)
        del self.by_token[child.token]
        cgroup = child.cgroup
        sweep_ended(child.pid, mark=child.mark, cgroup=cgroup, contained=child.contained,
                    stopped=child.stopped)
        returncode, usage = reap(child.pid)
        self._send((EXITED, child.token, returncode, None if usage is None else
                    (usage.user_seconds, usage.system_seconds, usage.max_rss_bytes)))
        if cgroup is not None and child.stopped:
            # Its killed processes may linger a moment: not on this loop.
            threading.Thread(target=remove_cgroup, args=(cgroup,), kwargs={"wait": 1.0},
                             daemon=True).start()
        elif cgroup is not None:
            release_cgroup(cgroup)
        self.ended.append(child.token)
        held = self.held.get(child.token)
        if held is None:
            return
        if held.until <= time.monotonic():
            self._withdraw(held.token)
        else:
            del self.held[child.token], self.held_tokens[held.token]
            self._flush()  # the end first: the runner settles it while this one starts
            self._start_held(held)

    def _end_all(self) -> None:
        """The runner is gone: kill every task still here and reap it (no follow-on
        starts)."""
        for held in self.held.values():
            os.close(held.output)
        self.held.clear()
        self.held_tokens.clear()
        for child in list(self.by_token.values()):
            child.stopped = True
            self._kill(child.token)
        for child in list(self.by_token.values()):
            self._exited(child)


def main(argv: list[str]) -> int:
    """Serve the runner on the socket whose descriptor is ``argv[0]``."""
    if len(argv) != 1 or not argv[0].isdigit():
        print("usage: python -m metaq_py.launch.agent FD (started by metaq run)",
              file=sys.stderr)
        return 2
    for signum in RUNNER_SIGNALS:
        signal.signal(signum, _ignore)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, RUNNER_SIGNALS)
    sock = socket.socket(fileno=int(argv[0]))
    sock.set_inheritable(False)
    Agent(sock).serve()
    return 0


def _ignore(signum: int, frame: object) -> None:
    """A handler that does nothing (unlike ``SIG_IGN``, a started script does not inherit
    it)."""


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
