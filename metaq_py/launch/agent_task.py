"""A task started by a node's agent, seen by the runner as it sees a :class:`TaskProcess`.

:class:`AgentStarter` is ``metaq run --agents``'s starter: it prepares a start as
:func:`~metaq_py.launch.process.launch` does (checks, run folder, log, environment), and asks
the agent on the task's first node (:mod:`metaq_py.launch.agents`) to start the script there,
through ``python -m metaq_py.launch`` so that it runs only as it was checked: the whole task
for a single-node task or a share; for a multi-node task its script on its first node, which
reaches the others with ``$METAQ_MPIRUN``. The :class:`AgentTask` it returns has what the
runner uses of a :class:`TaskProcess`: ``spec``, ``pid``, ``status``, ``wait``,
``send_signal`` and ``kill``. Its status comes from the agent's ``exit`` line, with the
``wait4`` figures of the task's tree on its node (``usage_from``: ``agent on NODE``, which
``metaq show`` prints beside them).

A node whose agent is lost (:class:`~metaq_py.launch.agents.AgentPool`) ends each task on it
at once as killed (SIGKILL), with :attr:`AgentTask.lost` saying why, and is added to
:attr:`AgentStarter.lost`: the runner requeues those tasks without counting an attempt and
starts nothing there again.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from metaq_py.launch.agents import AgentPool
from metaq_py.launch.command import wrapper_command
from metaq_py.launch.prepare import prepare
from metaq_py.launch.process import ExitStatus
from metaq_py.launch.spec import LaunchError, LaunchSpec
from metaq_py.launch.usage import Usage
from metaq_py.launch.workdir import Aside

__all__ = ["AgentStarter", "AgentTask"]


class AgentTask:
    """One task started by an agent; see the module text."""

    def __init__(self, spec: LaunchSpec, node: str, pool: AgentPool,
                 on_exit: Callable[[AgentTask], object] | None) -> None:
        self.spec = spec
        self.node = node
        self.pid = 0
        """The script's pid on its node (0 until the agent says it started)."""
        self.lost: str | None = None
        """Why the task's node was lost, when it was."""
        self.sent_signals: list[signal.Signals] = []
        self.output_errors: tuple[str, ...] = ()
        self._pool = pool
        self._on_exit = on_exit
        self._status: ExitStatus | None = None
        self._done = threading.Event()

    @property
    def log(self) -> Path:
        return self.spec.log

    @property
    def status(self) -> ExitStatus | None:
        return self._status if self._done.is_set() else None

    def wait(self, timeout: float | None = None) -> ExitStatus | None:
        self._done.wait(timeout)
        return self.status

    def send_signal(self, sig: int) -> bool:
        """Signal the task's process group on its node; ``False`` once it is over."""
        if self._done.is_set() or not self._pool.signal(self.node, self.spec.task, sig):
            return False
        self.sent_signals.append(signal.Signals(sig))
        return True

    def kill(self) -> bool:
        """Kill the task's whole tree on its node; ``False`` once it is over."""
        if self._done.is_set() or not self._pool.kill(self.node, self.spec.task):
            return False
        self.sent_signals.append(signal.SIGKILL)
        return True

    def finish(self, returncode: int, usage: Usage | None) -> None:
        """The task is over: record how, and tell ``on_exit`` (once)."""
        if self._done.is_set():
            return
        self._status = ExitStatus(returncode, usage)
        self._done.set()
        if self._on_exit is not None:
            self._on_exit(self)


class AgentStarter:
    """Starts tasks through the agents of an allocation's ``nodes`` (see the module text)."""

    def __init__(self, nodes: Sequence[str], *, system: str, cores: int,
                 timeout: float = 10.0) -> None:
        self.pool = AgentPool(nodes, system=system, on_event=self._event, timeout=timeout,
                              cores=cores)
        self.tasks: dict[str, AgentTask] = {}
        self.lost: dict[str, str] = {}
        self._lock = threading.Lock()

    def open(self, env: Mapping[str, str] | None = None) -> tuple[str, ...]:
        """Start the agents; the nodes where none came (left out, as lost)."""
        self.pool.open(env)
        for node in self.pool.missing:
            self.lost[node] = "no agent came up there"
        return self.pool.missing

    def close(self) -> None:
        self.pool.close()

    def start(self, spec: LaunchSpec, *, on_exit: Callable[[AgentTask], object] | None = None,
              base_env: Mapping[str, str] | None = None, aside: Aside | None = None,
              **_: object) -> AgentTask:
        """Start ``spec``'s script through the agent of its first node; ``LaunchError``
        (one sentence) when it cannot."""
        node = spec.nodes[0]
        if node in self.lost:
            raise LaunchError(f"task {spec.task!r}: its node {node} is lost "
                              f"({self.lost[node]})")
        if not spec.run_folder:  # the wrapper on the node writes its step file there
            spec = replace(spec, run_folder=True)
        ready = prepare(spec, base_env=base_env if base_env is not None else {}, aside=aside)
        ready.abandon()  # the agent opens the log itself; the checked bytes go by digest
        task = AgentTask(spec, node, self.pool, on_exit)
        with self._lock:
            self.tasks[spec.task] = task
        logs = [str(spec.log), *([str(spec.tee)] if spec.tee is not None else [])]
        cpus = list(spec.cores) if spec.bind and spec.cores is not None else None
        if not self.pool.start(node, spec.task, wrapper_command(spec), env=ready.env,
                               log=str(spec.log), logs=logs, cpus=cpus):
            self._forget(task)
            raise LaunchError(f"task {spec.task!r}: the agent on {node} is lost "
                              f"({self.lost.get(node, 'its line is closed')})")
        return task

    def _event(self, message: dict[str, Any]) -> None:
        op = message.get("op")
        if op == "lost":
            node = str(message.get("node"))
            with self._lock:
                self.lost[node] = str(message.get("why"))
                gone = [t for t in self.tasks.values() if t.node == node]
            for task in gone:
                task.lost = self.lost[node]
                self._forget(task)
                task.finish(-signal.SIGKILL, None)
            return
        with self._lock:
            task = self.tasks.get(str(message.get("id")))
        if task is None:
            return
        if op == "started":
            task.pid = int(message.get("pid", 0))
        elif op == "exit":
            self._forget(task)
            if "error" in message:
                task.output_errors = (str(message["error"]),)
                task.finish(127, None)
                return
            usage = None
            if "cpu_user_seconds" in message:
                usage = Usage(user_seconds=float(message["cpu_user_seconds"]),
                              system_seconds=float(message["cpu_system_seconds"]),
                              max_rss_bytes=message.get("max_rss_bytes"),
                              source=f"agent on {task.node}")
            task.finish(int(message.get("code", 1)), usage)

    def _forget(self, task: AgentTask) -> None:
        with self._lock:
            if self.tasks.get(task.spec.task) is task:
                del self.tasks[task.spec.task]
