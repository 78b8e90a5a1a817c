"""``python -m metaq_py.launch.node_agent HOST:PORT [NODE]``: the agent on one node.

One agent runs on every node of an allocation, started once (a one-task ``srun`` step a node
on SLURM, a plain process on a local pretend cluster; :mod:`metaq_py.launch.agents`), so
that starting a task on a node costs the batch system's controller nothing: a step per task is
an RPC storm on ``slurmctld`` (``bench/node_agents.py`` counts them with ``sdiag``). As
mpi_jm's daemons did, the agent starts, binds, signals, kills and measures its node's tasks;
the runner decides everything, the agent only does what it is told and reports.

It connects to the runner at ``HOST:PORT``, says hello with the token the runner gave it in
``METAQ_AGENT_TOKEN`` (so that no other process can pose as an agent), and then reads
commands, one JSON object a line:

- ``{"op": "start", "id": ID, "argv": [...], "env": {...}, "log": PATH, "cpus": [...]|null}``
  (or ``"logs": [PATH, ...]``, every one receiving the output, the task's ``LOG`` beside its
  own log) starts ``argv`` in a session of its own with its output appended to ``log``, in a
  cgroup of its own where the kernel allows and, with ``cpus`` (core ids numbered among the
  CPUs this agent may use), pinned to those cores: what :func:`~metaq_py.launch.process.launch` does
  for a task it starts (:func:`~metaq_py.launch.process.contain`); answers ``started`` with
  the pid, or ``exit`` with ``error`` when it cannot start;
- ``{"op": "signal", "id": ID, "sig": N}`` signals the task's process group;
  ``{"op": "kill", "id": ID}`` kills its whole tree (its session and every process carrying
  its mark, :func:`~metaq_py.launch.sweep.kill_session`).

Each task's end is reported as ``{"op": "exit", "id": ID, "code": C, "cpu_user_seconds": ...,
"cpu_system_seconds": ..., "max_rss_bytes": ..., "seconds": ...}``: the ``wait4`` figures of
the task's tree on this node. Every :data:`BEAT` seconds the agent says ``alive``; the runner
takes a node whose agent has been silent for longer than its timeout as lost. When the runner's
connection closes (the runner ended, or died), the agent kills every task it started and exits:
nothing outlives the runner on the node. A sentinel, a child forked first, kills the agent's
tasks when the agent itself dies (``kill -9``) or stays stopped (SIGSTOP) for half the
runner's timeout: a node the runner gives up runs none of its tasks on.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import select
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from metaq_py.launch.cgroup import kill_cgroup, release_cgroup, remove_cgroup, runner_cgroup
from metaq_py.launch.process import contain
from metaq_py.launch.spawn import spawn
from metaq_py.launch.sweep import MARK_VARIABLE, kill_session, marked_processes, sweep_ended
from metaq_py.launch.usage import reap
from metaq_py.ranges import machine_cpus

__all__ = ["BEAT", "PATIENCE_VARIABLE", "TOKEN_VARIABLE", "LineReader", "send"]

BEAT = 1.0
"""Seconds between two ``alive`` lines of an agent."""

TOKEN_VARIABLE = "METAQ_AGENT_TOKEN"
"""The environment variable that hands an agent the runner's token."""

PATIENCE_VARIABLE = "METAQ_AGENT_PATIENCE"
"""Seconds an agent may stay stopped before its sentinel kills its tasks (half the time the
runner waits before it gives the node up)."""

LINE_LIMIT = 16 * 1024 * 1024
"""The longest command line read (a task's environment travels in it)."""


def send(sock: socket.socket, lock: threading.Lock, message: dict[str, Any]) -> None:
    """Send ``message`` as one JSON line; ``OSError`` when the peer is gone."""
    data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
    with lock:
        sock.sendall(data)


class LineReader:
    """JSON lines from a socket, one at a time; ``None`` at its end."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def next(self) -> dict[str, Any] | None:
        while b"\n" not in self.buffer:
            if len(self.buffer) > LINE_LIMIT:
                return None
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                raise  # nothing yet: the caller judges the silence
            except OSError:
                return None
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        try:
            message = json.loads(line)
        except ValueError:
            return None
        return message if isinstance(message, dict) else None


@dataclass(slots=True)
class _Started:
    """A task this agent started: its id, mark, start time, cgroup (and whether that holds
    all of it), and whether the runner stopped it."""

    id: str
    mark: str
    start: float
    cgroup: Path | None
    contained: bool
    stopped: bool = False


class NodeAgent:
    """The agent's state: its connection and the tasks it started, by id."""

    def __init__(self, sock: socket.socket, node: str, *, sentinel: int | None = None) -> None:
        self.sock = sock
        self.sentinel = sentinel
        """The pipe to the sentinel (:func:`_sentinel`), which is told each task's mark."""
        self.node = node
        self.lock = threading.Lock()
        self.tasks: dict[int, _Started] = {}
        self.by_id: dict[str, int] = {}
        self.children = threading.Condition()
        self.cpus = machine_cpus()

    def serve(self) -> int:
        """Obey the runner until it goes; then kill every task left and return 0."""
        threading.Thread(target=self._reap, daemon=True).start()
        threading.Thread(target=self._beat, daemon=True).start()
        reader = LineReader(self.sock)
        while (message := reader.next()) is not None:
            op = message.get("op")
            if op == "start":
                self._start(message)
            elif op in ("signal", "kill"):
                self._signal(str(message.get("id")), op, message.get("sig"))
        with self.children:
            left = list(self.tasks)
        for pid in left:
            self._kill(pid)
        return 0

    def _say(self, message: dict[str, Any]) -> None:
        # A runner gone is seen by serve(), which then kills the tasks.
        with contextlib.suppress(OSError):
            send(self.sock, self.lock, message)

    def _start(self, message: dict[str, Any]) -> None:
        task = str(message.get("id"))
        env = {str(k): str(v) for k, v in dict(message.get("env") or {}).items()}
        mark = env[MARK_VARIABLE] = f"{os.getpid()}-{secrets.token_hex(8)}"
        if self.sentinel is not None:
            with contextlib.suppress(OSError):
                os.write(self.sentinel, f"{mark}\n".encode())
        if "SLURMD_NODENAME" in os.environ:  # this node's, not the batch node's
            env["SLURMD_NODENAME"] = os.environ["SLURMD_NODENAME"]
        cpus = message.get("cpus")
        try:
            if cpus is not None and max(cpus) >= len(self.cpus):
                raise OSError(0, f"the cores {cpus} are not all among the {len(self.cpus)} "
                                 f"CPUs the agent on {self.node} may use")
            out = _output([str(p) for p in (message.get("logs") or [message["log"]])])
            try:
                with self.children:
                    pid = spawn([str(a) for a in message["argv"]], output=out, env=env)
                    # Contained and pinned before the reaper may see its end.
                    cgroup, contained, _ = contain(
                        pid, mark=mark, cpus=None if cpus is None else [self.cpus[c] for c in cpus])
                    self.tasks[pid] = _Started(task, mark, time.monotonic(), cgroup, contained)
                    self.by_id[task] = pid
                    self.children.notify()
            finally:
                os.close(out)
        except (OSError, KeyError, TypeError, ValueError) as e:
            why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            self._say({"op": "exit", "id": task, "error": f"cannot start on {self.node}: "
                                                          f"{why}"})
            return
        self._say({"op": "started", "id": task, "pid": pid})

    def _signal(self, task: str, op: str, sig: object) -> None:
        with self.children:
            pid = self.by_id.get(task)
        if pid is None:
            return
        if op == "kill":
            self._kill(pid)
        elif isinstance(sig, int):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, sig)

    def _kill(self, pid: int) -> None:
        """Kill task ``pid``'s whole tree: its cgroup, its session, its marked processes."""
        with self.children:
            started = self.tasks.get(pid)
            if started is None:
                return
            started.stopped = True
            if started.cgroup is not None:
                kill_cgroup(started.cgroup)
            kill_session(pid, started.mark)

    def _reap(self) -> None:
        while True:
            with self.children:
                while not self.tasks:
                    self.children.wait()
            try:
                # Seen, not reaped: while it is a zombie its session id cannot be reused, and
                # the sweep below is safe (as in TaskProcess).
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)
            except ChildProcessError:
                continue
            if info is None:
                continue
            pid = info.si_pid
            with self.children:
                started = self.tasks.get(pid)
                if started is not None:
                    sweep_ended(pid, mark=started.mark, cgroup=started.cgroup,
                                contained=started.contained, stopped=started.stopped)
                code, usage = reap(pid)
                if started is None:
                    continue
                del self.tasks[pid]
                self.by_id.pop(started.id, None)
            if started.cgroup is not None and started.stopped:
                remove_cgroup(started.cgroup, wait=1.0)
            elif started.cgroup is not None:
                release_cgroup(started.cgroup)
            self._say({"op": "exit", "id": started.id, "code": code,
                       "seconds": round(time.monotonic() - started.start, 3),
                       **(usage.fields() if usage is not None else {})})

    def _beat(self) -> None:
        while True:
            self._say({"op": "alive"})
            time.sleep(BEAT)


_APPEND = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW


def _output(paths: list[str]) -> int:
    """A descriptor a task's output goes to: its one log, or a pipe a thread copies to each
    of ``paths`` until the task's last process closes it."""
    fds = []
    try:
        for path in paths:
            fds.append(os.open(path, _APPEND, 0o644))
    except OSError:
        for fd in fds:
            os.close(fd)
        raise
    if len(fds) == 1:
        return fds[0]
    read, write = os.pipe2(os.O_CLOEXEC)

    def copy() -> None:
        while data := os.read(read, 65536):
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.write(fd, data)
        for fd in (read, *fds):
            os.close(fd)

    threading.Thread(target=copy, daemon=True, name="output").start()
    return write


def main(argv: list[str]) -> int:
    """Connect to the runner at ``argv[0]`` and serve it."""
    if not argv or ":" not in argv[0]:
        print("usage: python -m metaq_py.launch.node_agent HOST:PORT [NODE]", file=sys.stderr)
        return 2
    host, _, port = argv[0].rpartition(":")
    node = argv[1] if len(argv) > 1 else os.environ.get("SLURMD_NODENAME") or \
        socket.gethostname().split(".")[0]
    token = os.environ.pop(TOKEN_VARIABLE, "")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the runner ends it, by closing the line
    patience = float(os.environ.pop(PATIENCE_VARIABLE, "5"))
    cgroups = runner_cgroup()  # made (and dead agents' leftovers killed) before any task starts
    read, write = os.pipe()
    if os.fork() == 0:  # before any thread or socket of the agent
        os.close(write)
        _sentinel(os.getppid(), read, patience, cgroups)
    os.close(read)
    try:
        sock = socket.create_connection((host, int(port)), timeout=60)
        sock.settimeout(None)
        send(sock, threading.Lock(), {"op": "hello", "node": node, "token": token,
                                      "pid": os.getpid(), "cpus": len(machine_cpus())})
    except (OSError, ValueError) as e:
        print(f"metaq: the agent on {node} cannot reach the runner at {argv[0]}: {e}",
              file=sys.stderr)
        return 1
    return NodeAgent(sock, node, sentinel=write).serve()


def _sentinel(agent: int, marks_fd: int, patience: float, cgroups: Path | None) -> NoReturn:
    """The agent's sentinel, a child forked before anything else: it reads the mark of each
    task the agent starts, and kills every task of the agent (each process with one of the
    marks, and every cgroup under ``cgroups``) when the agent is gone (its end of the pipe
    closes: killed, even with ``kill -9``, or ended) or has been stopped (SIGSTOP) for
    ``patience`` seconds, sooner than the runner gives the node up, so that a task the
    runner requeues never runs on here."""
    marks: set[str] = set()
    rest = b""
    stopped_since: float | None = None
    while True:
        ready, _, _ = select.select([marks_fd], [], [], 0.25)
        if ready:
            data = os.read(marks_fd, 65536)
            if not data:
                break
            *lines, rest = (rest + data).split(b"\n")
            marks.update(line.decode() for line in lines if line)
        if _stopped(agent):
            stopped_since = stopped_since or time.monotonic()
            if time.monotonic() - stopped_since >= patience:
                break
        else:
            stopped_since = None
    if cgroups is not None:
        with contextlib.suppress(OSError):
            for child in cgroups.iterdir():
                if child.is_dir():
                    kill_cgroup(child)
    for mark in marks:
        for pid in marked_processes(mark):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    os._exit(0)


def _stopped(pid: int) -> bool:
    """Whether process ``pid`` is stopped (``T`` in ``/proc/PID/stat``)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2:][:1] in ("T", "t")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
