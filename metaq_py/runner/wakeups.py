"""What wakes the runner: task exits, queue changes and signals, all through one inbox.

The loop blocks on :meth:`Wakeups.wait` and never busy-polls. Three kinds of :class:`Wakeup`
arrive:

* an *exit*, put by the launch layer's watcher thread when a task's process is over
  (:meth:`Wakeups.exited` is the ``on_exit`` callback handed to ``launch``);
* a *change*, put by a :class:`~metaq_py.queue.watcher.QueueWatcher` thread: one over the task
  folders and ``notices/`` (:meth:`Wakeups.watch_queue`), and one over the run folder of each
  running task that declares ``CHECKPOINT`` or an in-place ``RESIZE``, where its checkpoints
  and resize confirmations land (:meth:`Wakeups.watch_rundir`);
* a *signal* (:data:`STOP_SIGNALS`), put by the handlers :meth:`Wakeups.install_signals`
  installs.
"""

from __future__ import annotations

import queue as stdqueue
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from metaq_py.durations import format_duration
from metaq_py.launch import TaskProcess
from metaq_py.queue.layout import NOTICES
from metaq_py.queue.store import Queue
from metaq_py.queue.watcher import OwnMoves, QueueWatcher
from metaq_py.runner.options import RunOptions
from metaq_py.runner.tasks.live_task import LiveTask

__all__ = ["STOP_SIGNALS", "Wakeup", "Wakeups", "What"]

STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT, signal.SIGHUP, signal.SIGUSR2,
                signal.SIGALRM)
"""The signals that stop the runner: every task is stopped and requeued, without spending a
retry. HUP is a closed terminal, USR2 and ALRM what ``sbatch --signal`` and a wrapper's
timer often send; none of them may kill the runner outright and orphan its claims. Which of
them means "the wall clock is ending" is ``RunOptions.end_signal``."""


QUICK = 0.05
"""Seconds within which a task's exit must come, wake-up after wake-up, for the queue
watcher's watches to rest; and the longest a wait lasts while they rest (see
:meth:`Wakeups.wait`)."""

REST_AFTER = 32
"""Quick wake-ups in a row after which the queue watcher's watches rest."""


class What(Enum):
    """What a :class:`Wakeup` says happened."""

    EXIT = "exit"
    CHANGE = "change"
    SIGNAL = "signal"


@dataclass(frozen=True, slots=True)
class Wakeup:
    """One reason to wake the loop: ``process`` is set for an exit, ``signum`` for a
    signal."""

    what: What
    process: TaskProcess | None = None
    signum: int | None = None


_CHANGED = Wakeup(What.CHANGE)


class Wakeups:
    """The runner's inbox and the threads and handlers that fill it.

    Nothing here decides anything: each source only puts a :class:`Wakeup` in the inbox, and
    the loop takes it at its next wait. :meth:`close` stops every watcher and restores the
    signal handlers it replaced."""

    def __init__(self, queue: Queue, options: RunOptions, *,
                 say: Callable[[str], None]) -> None:
        self.queue = queue
        self.options = options
        self.say = say
        self.inbox: stdqueue.SimpleQueue[Wakeup] = stdqueue.SimpleQueue()
        self.rundir_watchers: dict[str, threading.Event] = {}
        self.queue_watcher: QueueWatcher | None = None
        self.watching_queue = False
        self._closing = threading.Event()
        self._lock = threading.Lock()
        self._old_handlers: dict[int, Any] = {}
        self.quick = 0
        """Exits in a row that came quickly (see :meth:`wait`)."""

    # --- the inbox ----------------------------------------------------------------------------

    def exited(self, process: TaskProcess) -> None:
        """A task's exit, told by the launch layer's watcher thread: handed to the loop."""
        self.inbox.put(Wakeup(What.EXIT, process=process))

    def wait(self, timeout: float) -> Wakeup | None:
        """The next wake-up, waiting at most ``timeout`` seconds for it (``None``: none came).

        While tasks' exits wake the loop every moment, the queue watcher's events
        tell it nothing new (every pass scans the task folders anyway) and cost it the most:
        after :data:`REST_AFTER` such wake-ups in a row, each within :data:`QUICK` seconds,
        the watches rest (:meth:`~metaq_py.queue.watcher.QueueWatcher.rest`). A wait then
        lasts at most :data:`QUICK` before they are set up again, with a change reported, so
        a task that arrived meanwhile is seen at most that late."""
        watcher = self.queue_watcher
        if watcher is not None and watcher.resting:
            began = time.monotonic()
            try:
                return self._took(self.inbox.get(timeout=min(timeout, QUICK)), began)
            except stdqueue.Empty:
                watcher.arm()
                self.quick = 0
                timeout -= QUICK
                if timeout <= 0:
                    return None
        began = time.monotonic()
        try:
            return self._took(self.inbox.get(timeout=timeout), began)
        except stdqueue.Empty:
            self.quick = 0
            return None

    def _took(self, wakeup: Wakeup, began: float) -> Wakeup:
        """Count ``wakeup`` (waited for since ``began``) towards the watches' rest."""
        if wakeup.what is What.EXIT and time.monotonic() - began < QUICK:
            self.quick += 1
            watcher = self.queue_watcher
            if self.quick >= REST_AFTER and watcher is not None and not watcher.resting:
                watcher.rest()
        else:
            self.quick = 0
        return wakeup

    def idle(self) -> bool:
        """Whether no wake-up is waiting in the inbox now (a wait would block)."""
        return self.inbox.empty()

    def take(self) -> Wakeup | None:
        """A wake-up that has already arrived, without waiting (``None``: none has)."""
        try:
            return self.inbox.get_nowait()
        except stdqueue.Empty:
            return None

    # --- signals ------------------------------------------------------------------------------

    def install_signals(self) -> None:
        """Turn the stop signals into wake-ups, when ``handle_signals`` is on and this is the
        main thread (Python only lets the main thread install handlers)."""
        if not self.options.handle_signals or threading.current_thread() is not \
                threading.main_thread():
            return
        for sig in STOP_SIGNALS:
            # SimpleQueue.put is reentrant: safe to call from a signal handler.
            self._old_handlers[sig] = signal.signal(
                sig, lambda s, _f: self.inbox.put(Wakeup(What.SIGNAL, signum=s)))

    # --- watchers -----------------------------------------------------------------------------

    def watch_queue(self) -> None:
        """Start watching the task folders and ``notices/`` in a thread of its own (once).

        Starting the watcher (importing watchdog, starting its threads) takes tens of
        milliseconds, so the loop calls this only after its first decision and launches, and
        the watcher starts while the loop goes on; once it is watching, it wakes the loop
        once, so that nothing changed meanwhile goes unseen."""
        if self.watching_queue:
            return
        self.watching_queue = True
        threading.Thread(target=self._watch_queue, name="metaq queue watcher",
                         daemon=True).start()

    def _watch_queue(self) -> None:
        # Not this job's whole runs/ folder: it gains a folder per task, and every change
        # would make the watcher walk all of them. See watch_rundir.
        config = self.queue.config
        own = OwnMoves()
        watcher = QueueWatcher(
            [*(self.queue.root / f for f in config.folders), self.queue.root / NOTICES],
            interval=config.poll_interval, use_watchdog=self.options.fs_events, own=own)
        if watcher.live:  # only events can be told apart: a poll sees every change
            self.queue.own_moves = own  # this runner's own claims wake no one
        with self._lock:
            if self._closing.is_set():
                watcher.close()
                return
            self.queue_watcher = watcher
        self.say(f"queue changes: {'file-system events and ' if watcher.live else ''}polling "
                 f"every {format_duration(config.poll_interval)}")
        self.inbox.put(_CHANGED)
        self._watch(watcher, self._closing)

    def watch_rundir(self, live: LiveTask) -> None:
        """Wake the loop when ``live`` checkpoints or confirms a resize, if it declares
        ``CHECKPOINT`` or an in-place ``RESIZE``. Another task's checkpoint (made with
        ``metaq checkpoint`` alone) is seen at the next pass, or at its exit."""
        spec = live.claim.spec
        in_place = spec.resize is not None and spec.resize.mode == "in-place"
        if (spec.checkpoint is None and not in_place) or live.spec is None \
                or live.id in self.rundir_watchers:
            return
        watcher = QueueWatcher([live.spec.rundir], interval=self.queue.config.poll_interval,
                               use_watchdog=self.options.fs_events)
        closing = threading.Event()
        threading.Thread(target=self._watch, args=(watcher, closing), kwargs={"close": True},
                         name=f"metaq run folder {live.id}", daemon=True).start()
        self.rundir_watchers[live.id] = closing

    def unwatch_rundir(self, task_id: str) -> None:
        """Stop watching the run folder of ``task_id`` (nothing if it is not watched)."""
        closing = self.rundir_watchers.pop(task_id, None)
        if closing is not None:
            closing.set()

    def _watch(self, watcher: QueueWatcher, closing: threading.Event, *,
               close: bool = False) -> None:
        while not closing.is_set():
            if watcher.wait(timeout=self.queue.config.poll_interval):
                self.inbox.put(_CHANGED)
        if close:
            watcher.close()  # here, so that the loop never waits for an observer to stop

    # --- the end ------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop every watcher and give the stop signals back their old handlers."""
        with self._lock:
            self._closing.set()
            if self.queue_watcher is not None:
                self.queue_watcher.close()  # the daemon thread ends at its next wake-up
        for sig, old in self._old_handlers.items():
            signal.signal(sig, old)
        self._old_handlers.clear()
        for task_id in list(self.rundir_watchers):
            self.unwatch_rundir(task_id)
