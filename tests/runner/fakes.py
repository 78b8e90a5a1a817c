"""The runner on a fake clock: stand-in task processes and an inbox that moves time.

A :class:`World` is a small discrete-event simulation around a real
:class:`~metaq_py.runner.loop.Runner` and a real queue on disk. Tasks are not started: each
launch makes a :class:`FakeProcess` that behaves as its :class:`Behaviour` says (runs so many
seconds, answers its stop signal so fast, confirms in-place resizes or not). When the loop
waits, :class:`FakeWakeups` jumps the :class:`~metaq_py.clock.Clock` to the next thing that
happens (a process exit, a scripted step of the test, the loop's own deadline) instead of
sleeping, so a run of many fake minutes takes milliseconds and every time in its events is
exact.
"""

from __future__ import annotations

import heapq
import itertools
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from metaq_py.batch import BatchOverrides, detect_batch
from metaq_py.clock import Clock
from metaq_py.launch import LaunchSpec
from metaq_py.launch.process import ExitStatus
from metaq_py.queue.store import Queue
from metaq_py.runner.loop import Runner, RunOptions
from metaq_py.runner.tasks.live_task import ack_path
from metaq_py.runner.wakeups import Wakeup, Wakeups, What

START = 1_000_000.0
"""When fake time begins (Unix seconds)."""


@dataclass(frozen=True)
class Behaviour:
    """How a fake task behaves: it runs ``seconds`` and exits with ``exit_code``; after its
    stop signal it exits (code 0) within ``on_stop`` seconds (``None``: it ignores the
    signal and is killed at the end of its grace period); it confirms an in-place resize
    after ``confirm`` seconds (``None``: never)."""

    seconds: float = 1.0
    exit_code: int = 0
    on_stop: float | None = 0.0
    confirm: float | None = 0.0


@dataclass(eq=False)
class FakeProcess:
    """Stands in for :class:`~metaq_py.launch.TaskProcess`: what the runner calls on it."""

    spec: LaunchSpec
    world: World
    behaviour: Behaviour
    pid: int
    signals: list[signal.Signals] = field(default_factory=list)
    _status: ExitStatus | None = None
    _exit_at: float = 0.0
    _returncode: int = 0
    lost: str | None = None

    @property
    def status(self) -> ExitStatus | None:
        return self._status

    def send_signal(self, sig: int) -> bool:
        if self._status is not None:
            return False
        sig = signal.Signals(sig)
        self.signals.append(sig)
        now = self.world.clock.now()
        if sig is signal.SIGUSR2:  # a resize
            if self.behaviour.confirm is not None:
                self.world.at(now + self.behaviour.confirm,
                              lambda: ack_path(self.spec.resize_file).touch())
        elif self.behaviour.on_stop is not None:
            self._end_at(now + self.behaviour.on_stop, 0)
        return True

    def kill(self) -> bool:
        if self._status is not None:
            return False
        self._end_at(self.world.clock.now(), -signal.SIGKILL)
        return True

    def wait(self, timeout: float | None = None) -> ExitStatus | None:
        return self._status

    def _end_at(self, t: float, returncode: int) -> None:
        if t >= self._exit_at:
            return
        self._exit_at, self._returncode = t, returncode
        if t <= self.world.clock.now():
            self._end()  # at once, as the launch layer's watcher would tell it
        else:
            self.world.at(t, self._end)

    def _end(self) -> None:
        if self._status is None and self.world.clock.now() >= self._exit_at:
            self._status = ExitStatus(self._returncode)
            self.world.exited(self)


class FakeWakeups(Wakeups):
    """The runner's inbox on fake time: no watcher threads, no signal handlers; waiting
    moves the clock to the next scripted happening, or to the loop's deadline."""

    def __init__(self, world: World, queue: Queue, options: RunOptions) -> None:
        super().__init__(queue, options, say=lambda line: None)
        self.world = world

    def install_signals(self) -> None:
        pass

    def watch_queue(self) -> None:
        pass

    def watch_rundir(self, live: object) -> None:
        pass

    def wait(self, timeout: float) -> Wakeup | None:
        clock = self.world.clock
        until = clock.now() + timeout
        while (wakeup := self.take()) is None:
            if not self.world.step(until):
                clock.advance_to(max(until, clock.now()))
                return None
        return wakeup


class World:
    """A fake clock, the happenings scheduled on it, and the fake processes of a run.

    ``behaviours`` maps a task id (``todo/a.sh``) to how it behaves (default:
    :class:`Behaviour`)."""

    def __init__(self, behaviours: Mapping[str, Behaviour] | None = None) -> None:
        self.clock = Clock(START)
        self.behaviours = dict(behaviours or {})
        self.processes: list[FakeProcess] = []
        self._agenda: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()
        self._on_exit: dict[int, Callable[[FakeProcess], object]] = {}
        self.wakeups: FakeWakeups | None = None

    def at(self, t: float, what: Callable[[], None]) -> None:
        """Do ``what`` at fake time ``t``; the loop wakes up (as a watcher would wake it)."""
        heapq.heappush(self._agenda, (t, next(self._order), what))

    def step(self, until: float) -> bool:
        """Do everything due at the first time on the agenda, if that is by ``until``."""
        if not self._agenda or self._agenda[0][0] > until:
            return False
        t = self._agenda[0][0]
        self.clock.advance_to(max(t, self.clock.now()))
        while self._agenda and self._agenda[0][0] == t:
            heapq.heappop(self._agenda)[2]()
        assert self.wakeups is not None
        self.wakeups.inbox.put(Wakeup(What.CHANGE))
        return True

    def exited(self, process: FakeProcess) -> None:
        self._on_exit[process.pid](process)

    def launch(self, spec: LaunchSpec, *, on_exit: Callable[[FakeProcess], object],
               base_env: object = None, aside: object = None) -> FakeProcess:
        """Stands in for :func:`metaq_py.launch.launch`."""
        spec.rundir.mkdir(parents=True, exist_ok=True)
        behaviour = self.behaviours.get(spec.task, Behaviour())
        process = FakeProcess(spec, self, behaviour, pid=100 + len(self.processes),
                              _exit_at=float("inf"))
        self.processes.append(process)
        self._on_exit[process.pid] = on_exit
        process._end_at(self.clock.now() + behaviour.seconds, behaviour.exit_code)
        return process

    def runner(self, q: Queue, *, nodes: int = 4, end: float | None = None,
               said: list[str] | None = None, **options: object) -> Runner:
        """A runner over ``q`` on ``nodes`` local hosts, ending at ``START + end``."""
        batch = detect_batch(overrides=BatchOverrides(
            system="local", nnodes=nodes, end_time=None if end is None else START + end),
            env={})
        options.setdefault("grace", 1.0)
        options.setdefault("margin", 0.5)
        opts = RunOptions(handle_signals=False, **options)  # type: ignore[arg-type]
        q = Queue(q.root, clock=self.clock)  # the queue stamps claims and events in fake time
        self.wakeups = FakeWakeups(self, q, opts)
        return Runner(q, batch, options=opts, clock=self.clock, wakeups=self.wakeups,
                      start=self.launch,
                      say=said.append if said is not None else lambda line: None)

