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
``sync, n``                                 ``synced, n`` (every earlier start answered)
(a script exits)                            ``exited, token, returncode, usage`` (CPU
                                            seconds, user and system; peak bytes)
(the socket closed)                         (every task killed, and the agent exits)
==========================================  ==================================================

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metaq_py.launch.cgroup import kill_cgroup, release_cgroup, remove_cgroup
from metaq_py.launch.process import contain_started
from metaq_py.launch.spawn import spawn
from metaq_py.launch.sweep import discard_start, kill_session, sweep_ended
from metaq_py.launch.usage import reap

__all__ = ["EXITED", "KILL", "MESSAGE_MOST", "REFUSED", "RUNNER_SIGNALS", "SIGNAL", "START",
           "STARTED", "SYNC", "SYNCED", "UNBOUND", "Agent", "Message", "main"]

START, SIGNAL, KILL, SYNC = "start", "signal", "kill", "sync"
STARTED, REFUSED, UNBOUND, EXITED, SYNCED = "started", "refused", "unbound", "exited", "synced"

_FD_SIZE = 4
"""Bytes of one descriptor in an ``SCM_RIGHTS`` message (a C ``int``)."""

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


class Agent:
    """The agent's loop over its socket and its children's pidfds (see the module text)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.epoll = select.epoll()
        self.by_fd: dict[int, _Child] = {}
        self.by_token: dict[int, _Child] = {}
        self.answers: list[Message] = []
        """Answers kept until the end of this turn of the loop, then sent as one message."""

    def serve(self) -> None:
        """Answer the runner until it closes the socket, then end every task still here."""
        sock_fd = self.sock.fileno()
        self.epoll.register(sock_fd, select.EPOLLIN)
        while True:
            for fd, _ in self.epoll.poll():
                if fd != sock_fd:
                    child = self.by_fd.pop(fd, None)
                    if child is not None:
                        self._exited(child)
                elif not self._receive():
                    self._end_all()
                    return
            self._flush()

    def _receive(self) -> bool:
        """Take one message from the runner; ``False`` when the runner is gone."""
        try:
            # Close-on-exec from the start: a descriptor received here must reach only the
            # task it is for, through the start's dup2.
            data, ancillary, flags, _ = self.sock.recvmsg(
                MESSAGE_MOST, socket.CMSG_SPACE(_FD_SIZE), socket.MSG_CMSG_CLOEXEC)
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
        if kind == START and not fds:
            # The kernel dropped the descriptor (MSG_CTRUNC): this agent has too many open.
            self._send((REFUSED, message[1], errno.EMFILE, os.strerror(errno.EMFILE), None))
        elif kind == START:
            self._flush()  # the exits noticed so far must not wait for this spawn
            self._start(*message[1:], output=fds[0])
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
               cpus: list[int] | None, *, output: int) -> None:
        try:
            pid = spawn(argv, output=output, env=env)
        except OSError as e:
            self._send((REFUSED, token, e.errno, e.strerror, e.filename))
            return
        finally:
            os.close(output)
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

    def _end_all(self) -> None:
        """The runner is gone: kill every task still here and reap it."""
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
