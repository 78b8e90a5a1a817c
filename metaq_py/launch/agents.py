"""The runner's side of the node agents (:mod:`metaq_py.launch.node_agent`): one per node.

:meth:`AgentPool.open` listens on a TCP port of the batch node, starts the agents (one
one-task ``srun`` step a node on SLURM, one process per pretend node locally: a step over
all nodes with ``--ntasks-per-node=1`` would be ended whole by ``srun`` when one agent is
killed) and waits for each to say hello with the pool's token. A node whose agent did not
come within ``timeout`` is left out, and :attr:`AgentPool.missing` says which.

The runner then starts a task's share of a node with :meth:`AgentPool.start`, signals it with
:meth:`AgentPool.signal` and kills its tree with :meth:`AgentPool.kill`; ``on_event`` hears,
on the pool's reader threads, each ``started`` and ``exit`` line an agent sends, and
``{"op": "lost", "node": NODE, "why": ...}`` once for a node whose agent closed its line, died
or stayed silent for ``timeout`` seconds (a SIGSTOPped agent says nothing: its node is lost,
and no call of the pool ever waits for it, since sends time out). The runner requeues a lost
node's tasks and leaves the node out; the other nodes go on.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from metaq_py.launch.node_agent import PATIENCE_VARIABLE, TOKEN_VARIABLE, LineReader, send

__all__ = ["AgentPool"]

SEND_TIMEOUT = 5.0
"""Seconds a command may wait to be sent to an agent before its node is taken as lost."""


class AgentPool:
    """The agents of one allocation's ``nodes``; see the module text. ``cores`` per node
    go to the agents' step, whose tasks inherit its CPUs."""

    def __init__(self, nodes: Sequence[str], *, system: str,
                 on_event: Callable[[dict[str, Any]], None], timeout: float = 10.0,
                 host: str | None = None, srun: str = "srun", cores: int = 1) -> None:
        self.nodes = tuple(nodes)
        self.system = system
        self.on_event = on_event
        self.timeout = timeout
        self.host = host if host is not None else \
            socket.gethostname() if system == "slurm" else "127.0.0.1"
        """Where the agents reach the runner: this batch node's name on SLURM (the agents run
        on other nodes; the pool listens on every interface, and the token keeps strangers
        out), the loopback locally."""
        self.srun = srun
        self.cores = cores
        self.token = secrets.token_hex(16)
        self.links: dict[str, tuple[socket.socket, threading.Lock]] = {}
        self.heard: dict[str, float] = {}
        self.agent_pids: dict[str, int] = {}
        self.lost: dict[str, str] = {}
        self.missing: tuple[str, ...] = ()
        self.processes: list[subprocess.Popen[bytes]] = []
        self._lock = threading.Lock()
        self._closing = False
        self._listener: socket.socket | None = None

    def open(self, env: Mapping[str, str] | None = None) -> None:
        """Start the agents and wait (at most ``timeout``) until each has said hello."""
        listen = "" if self.system == "slurm" else self.host
        listener = socket.create_server((listen, 0))
        self._listener = listener
        address = f"{self.host}:{listener.getsockname()[1]}"
        env = {**(env if env is not None else os.environ), TOKEN_VARIABLE: self.token,
               PATIENCE_VARIABLE: str(self.timeout / 2)}
        agent = [sys.executable, "-m", "metaq_py.launch.node_agent", address]
        if self.system == "slurm":
            # A step a node, not one over all of them: srun ends a whole step when one of its
            # tasks is killed, and one agent's death must not take the others with it.
            for node in self.nodes:
                self.processes.append(subprocess.Popen(
                    [self.srun, f"--nodelist={node}", "--nodes=1", "--ntasks=1", "--overlap",
                     f"--cpus-per-task={self.cores}", "--cpu-bind=none", "--quiet",
                     "--job-name=metaq-agent", *agent],
                    env=env, stdin=subprocess.DEVNULL, start_new_session=True))
        else:
            for node in self.nodes:
                self.processes.append(subprocess.Popen(
                    [*agent, node], env=env, stdin=subprocess.DEVNULL,
                    start_new_session=True))
        deadline = time.monotonic() + self.timeout
        listener.settimeout(0.2)
        while len(self.links) < len(self.nodes) and time.monotonic() < deadline:
            try:
                sock, _ = listener.accept()
            except TimeoutError:
                if all(p.poll() is not None for p in self.processes):
                    break
                continue
            self._greet(sock, deadline)
        self.missing = tuple(n for n in self.nodes if n not in self.links)
        threading.Thread(target=self._watch, daemon=True, name="agents-watch").start()

    def _greet(self, sock: socket.socket, deadline: float) -> None:
        sock.settimeout(max(0.1, deadline - time.monotonic()))
        reader = LineReader(sock)
        hello = reader.next()
        node = hello.get("node") if hello is not None else None
        if hello is None or hello.get("op") != "hello" or \
                not secrets.compare_digest(str(hello.get("token")), self.token) or \
                node not in self.nodes or node in self.links:
            sock.close()  # not one of ours
            return
        sock.settimeout(SEND_TIMEOUT)
        with self._lock:
            self.links[node] = (sock, threading.Lock())
            self.heard[node] = time.monotonic()
            self.agent_pids[node] = int(hello.get("pid", 0))
        threading.Thread(target=self._read, args=(node, reader), daemon=True,
                         name=f"agent-{node}").start()

    def _read(self, node: str, reader: LineReader) -> None:
        sock = reader.sock
        while True:
            try:
                message = reader.next()
            except TimeoutError:
                continue  # silence is the watcher's to judge
            if message is None:
                break
            self.heard[node] = time.monotonic()
            if message.get("op") in ("started", "exit"):
                self.on_event({**message, "node": node})
        self._lose(node, "its agent closed its line (it died, or its node did)")
        sock.close()

    def _watch(self) -> None:
        while not self._closing:
            now = time.monotonic()
            for node, heard in list(self.heard.items()):
                if now - heard > self.timeout:
                    self._lose(node, f"its agent has said nothing for {now - heard:.0f} s")
            time.sleep(min(1.0, self.timeout / 4))

    def _lose(self, node: str, why: str) -> None:
        with self._lock:
            if self._closing or node in self.lost or node not in self.links:
                return
            self.lost[node] = why
            self.heard.pop(node, None)
            sock, _ = self.links.pop(node)
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        self.on_event({"op": "lost", "node": node, "why": why})

    def _command(self, node: str, message: dict[str, Any]) -> bool:
        link = self.links.get(node)
        if link is None:
            return False
        try:
            send(link[0], link[1], message)
        except OSError as e:
            self._lose(node, f"a command to its agent failed: {e.strerror or e}")
            return False
        return True

    def start(self, node: str, task: str, argv: Sequence[str], *, env: Mapping[str, str],
              log: str, cpus: Sequence[int] | None = None,
              logs: Sequence[str] = ()) -> bool:
        """Ask ``node``'s agent to start ``argv`` with its output in ``log`` (and each of
        ``logs``, when given); ``False`` when the node is lost."""
        return self._command(node, {"op": "start", "id": task, "argv": list(argv),
                                    "env": dict(env), "log": log, "logs": list(logs) or [log],
                                    "cpus": None if cpus is None else list(cpus)})

    def signal(self, node: str, task: str, sig: int) -> bool:
        return self._command(node, {"op": "signal", "id": task, "sig": int(sig)})

    def kill(self, node: str, task: str) -> bool:
        return self._command(node, {"op": "kill", "id": task})

    def close(self) -> None:
        """End every agent (each kills its tasks when its line closes) and the step."""
        with self._lock:
            self._closing = True
            links = list(self.links.values())
            self.links.clear()
        for sock, _ in links:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        if self._listener is not None:
            self._listener.close()
        for p in self.processes:
            try:
                p.wait(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
