"""One task running inside the runner's allocation, and what the runner is doing to it.

A :class:`LiveTask` ties together the task's claim in the queue, its process (once launched),
the hosts it runs on and the accounting of its node-seconds. It is the runner's mutable state;
the values it hands out (``Stop``, resize requests) are plain data.

**Stopping** (:meth:`LiveTask.stop`): the task's ``SIGNAL`` (default SIGTERM) goes to its
process group, and ``grace`` seconds later (its ``SIGNAL`` time, else the runner's ``--grace``)
the group is killed. Why it is stopped decides what happens at its exit: see :class:`Why`.

**Resizing in place** (:meth:`LiveTask.ask_resize`), the protocol a malleable task with
``#METAQ RESIZE in-place [SIG]`` follows:

1. the runner removes ``$METAQ_RESIZE_FILE.ack``, writes the new host list to
   ``$METAQ_RESIZE_FILE`` (one host per line, replaced atomically; ``$METAQ_HOSTFILE`` gets the
   same list) and sends the resize signal (``USR2`` unless the directive names one);
2. the task re-reads its hosts, stops using the ones it lost, and confirms by creating
   ``$METAQ_RESIZE_FILE.ack`` (``touch "$METAQ_RESIZE_FILE.ack"``);
3. without a confirmation within the grace period the runner falls back to a restart: it
   stops the task and starts it again on the new hosts with ``METAQ_RESUME=1``.

Until a shrink is confirmed, the nodes given up stay out of use: no other task is launched on
a host a task may still be running on.

**Checkpoints**: a rigid task touches ``$METAQ_CHECKPOINT_FILE`` (or runs ``metaq
checkpoint``) after each checkpoint; :meth:`LiveTask.new_checkpoint` notices the new time.
"""

from __future__ import annotations

import contextlib
import os
import signal
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from metaq_py.launch import LaunchSpec, TaskProcess
from metaq_py.policy.model import Job
from metaq_py.queue.disk.fileio import replace_file
from metaq_py.queue.lease import Claim

__all__ = ["LiveTask", "Resizing", "Why", "ack_path"]


class Why(str, Enum):
    """Why the runner stopped a task, which decides where it goes when its process exits."""

    PREEMPT = "preempt"
    """For on-demand work or a reservation: requeued to resume, not a failure."""
    INTERRUPT = "interrupt"
    """The allocation is ending or the runner was signalled: requeued to resume."""
    RESTART = "restart"
    """A resize by restart: started again at once by this runner on its new hosts."""
    LOST = "lost"
    """Its claim is gone (another job reclaimed it): the queue is not touched."""
    CANCEL = "cancel"
    """Someone ran ``metaq cancel`` on it: it goes to ``cancelled/``."""
    TIMEOUT = "timeout"
    """It ran past its ``TIME_LIMIT``: settled as a failure (or a requeue) by the queue."""

    def __str__(self) -> str:
        return self.value


def ack_path(resize_file: Path) -> Path:
    """The file a task creates to confirm an in-place resize."""
    return resize_file.with_name(resize_file.name + ".ack")


@dataclass(slots=True)
class Resizing:
    """An in-place resize waiting for the task's confirmation until ``deadline``.

    ``released`` are the node ids the task gives up (empty for an expansion): they stay out of
    use until it confirms. ``verb`` is ``shrink`` or ``expand``; ``for_task`` the on-demand
    task the nodes go to."""

    verb: str
    released: tuple[int, ...]
    deadline: float
    for_task: str | None


@dataclass(slots=True, eq=False)
class LiveTask:
    """A claimed task of this runner: launched (``process`` set) or waiting to launch.

    ``node_ids`` are the :class:`~metaq_py.cluster.Cluster` ids it holds (or will hold at
    launch) and ``hosts`` their names. ``attempt`` is this start's number (``METAQ_ATTEMPT``).
    ``node_seconds``/``gpu_seconds`` add up its use so far in this process; ``since`` is when
    the current segment (at the current size) began.
    """

    claim: Claim
    job: Job
    node_ids: tuple[int, ...]
    hosts: tuple[str, ...]
    gpu_ids: tuple[str, ...] | None
    attempt: int
    resume: bool
    grace: float
    stop_signal: signal.Signals
    instant: bool | None = None
    notice: str | None = None
    lenders: tuple[str, ...] = ()
    process: TaskProcess | None = None
    spec: LaunchSpec | None = None
    started: float = 0.0
    since: float = 0.0
    node_seconds: float = 0.0
    gpu_seconds: float = 0.0
    why: Why | None = None
    for_task: str | None = None
    kill_at: float | None = None
    resizing: Resizing | None = None
    checkpoint_seen: float = 0.0
    cores: tuple[int, ...] | None = None  # a share's core ids on its node (None: whole nodes)
    time_limit: float | None = None
    """``TIME_LIMIT`` (or the queue's default): seconds after its start at which the task is
    warned and, a grace later, killed (``None``: never before its allocation ends)."""

    @property
    def time_up_at(self) -> float | None:
        """When this start of the task reaches its time limit (``None``: it has none, or it
        has not started)."""
        if self.time_limit is None or self.process is None:
            return None
        return self.started + self.time_limit

    @property
    def id(self) -> str:
        return self.claim.id

    @property
    def gpus(self) -> int:
        """GPUs held in total (device ids per node times nodes)."""
        return len(self.gpu_ids or ()) * len(self.hosts)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.status is None

    def launched(self, process: TaskProcess, now: float) -> None:
        """The process is started: accounting begins at ``now``. A task stopped before its
        launch gets its stop signal now (its kill follows at the time already set)."""
        self.process = process
        self.spec = process.spec
        self.started = self.since = now
        self.node_seconds = self.gpu_seconds = 0.0
        self.checkpoint_seen = _mtime(process.spec.checkpoint_file) \
            if process.spec.run_folder else 0.0
        if self.kill_at is not None:
            process.send_signal(self.stop_signal)

    def account(self, now: float) -> None:
        """Close the current segment at ``now``."""
        seconds = max(0.0, now - self.since)
        self.node_seconds += seconds * len(self.hosts)
        self.gpu_seconds += seconds * self.gpus
        self.since = now

    def stop(self, why: Why, *, now: float, grace: float | None = None,
             for_task: str | None = None) -> None:
        """Send the stop signal now and arrange the kill after the grace period. A task already
        being stopped keeps its earlier (sooner) kill time; a second reason only replaces a
        milder one (a restart becomes an interruption, anything becomes a loss)."""
        grace = self.grace if grace is None else grace
        if self.why is None or _rank(why) > _rank(self.why):
            self.why = why
            self.for_task = for_task
        kill_at = now + grace
        if self.kill_at is None:
            if self.process is not None:
                self.process.send_signal(self.stop_signal)
            self.kill_at = kill_at
        else:
            self.kill_at = min(self.kill_at, kill_at)
        self.resizing = None

    def kill_if_due(self, now: float) -> bool:
        """SIGKILL the group once the grace period is over; whether it was killed now."""
        if self.kill_at is None or now < self.kill_at or not self.running:
            return False
        assert self.process is not None
        return self.process.kill()

    def ask_resize(self, verb: str, node_ids: tuple[int, ...], hosts: tuple[str, ...], *,
                   sig: signal.Signals, now: float, for_task: str | None) -> None:
        """Start an in-place resize to ``hosts`` (see the module text)."""
        assert self.spec is not None and self.process is not None
        released = tuple(n for n in self.node_ids if n not in node_ids)
        self.account(now)
        resize = self.spec.resize_file
        with contextlib.suppress(FileNotFoundError):
            ack_path(resize).unlink()
        text = "".join(f"{h}\n" for h in hosts)
        # A shared hostfile belongs to other tasks too and never changes (the runner gives a
        # task that may be resized in place one of its own).
        own = () if self.spec.shared_hostfile is not None else (self.spec.hostfile,)
        for target in (resize, *own):  # never through a link planted at either
            replace_file(target, text.encode())
        self.node_ids, self.hosts = node_ids, hosts
        self.resizing = Resizing(verb, released, now + self.grace, for_task)
        self.process.send_signal(sig)

    def resize_confirmed(self) -> bool:
        """Whether the task has confirmed the resize under way."""
        return self.spec is not None and ack_path(self.spec.resize_file).exists()

    def new_checkpoint(self) -> float | None:
        """The time of a checkpoint made since the last call, or ``None``."""
        if self.spec is None or not self.spec.run_folder:
            return None  # no run folder, no checkpoint file
        seen = _mtime(self.spec.checkpoint_file)
        if seen > self.checkpoint_seen:
            self.checkpoint_seen = seen
            return seen
        return None


_RANKS = {Why.RESTART: 0, Why.PREEMPT: 1, Why.INTERRUPT: 2, Why.TIMEOUT: 3, Why.CANCEL: 4,
          Why.LOST: 5}


def _rank(why: Why) -> int:
    return _RANKS[why]


def _mtime(path: Path) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0
