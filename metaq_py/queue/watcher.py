"""Waking up when the queue changes.

``watchdog`` reports local changes at once (inotify on Linux). It does not see writes made by
other hosts on NFS or Lustre, so :class:`QueueWatcher` also polls: every ``interval`` seconds it
compares the modification times of the watched folders and their sub-folders, which change
whenever a file is added, removed or renamed in them.

watchdog holds each rename *out of* a watched folder for half a second, hoping to pair it with
a rename into another watched folder, and every event after it waits in the same queue. A
claim is such a rename (``todo/`` to ``working/``, which is not watched), so an on-demand task
arriving just after a claim would wait up to 0.5 s. :data:`MOVE_PAIRING` shortens that hold:
the two halves of a rename come from the kernel in the same read, so pairing still works.

**What wakes a watcher.** Reading a file (opening it, closing it unwritten) is not a change,
and is not even asked of the kernel: every scan reads new task files, and a runner would
otherwise wake itself with its own reads. A runner's own claims are not changes to it either:
it hands the watcher its :class:`OwnMoves`, notes there each file it is about to move out of a
watched folder, and that file's leaving (and the change of its folder that comes with it)
wakes no one. Every other change, another runner's claims included, still wakes the watcher.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from watchdog.observers.api import BaseObserver, ObservedWatch

__all__ = ["MOVE_PAIRING", "OwnMoves", "QueueWatcher"]

MOVE_PAIRING = 0.02
"""Seconds watchdog may hold a rename's first half to pair it with its second (its own
default is 0.5 s)."""

# Where watchdog keeps that hold: version 5+ and versions before it.
_PAIRING_CLASSES = (("watchdog.observers.inotify_move_event_grouper", "InotifyMoveEventGrouper"),
                    ("watchdog.observers.inotify_buffer", "InotifyBuffer"))


def _shorten_move_pairing() -> None:
    """Set watchdog's rename-pairing hold to :data:`MOVE_PAIRING` (read by each new watch)."""
    import importlib

    for module, name in _PAIRING_CLASSES:
        try:
            cls = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
        if getattr(cls, "delay", 0) > MOVE_PAIRING:
            cls.delay = MOVE_PAIRING


_CHANGES = ("FileCreatedEvent", "DirCreatedEvent", "FileMovedEvent", "DirMovedEvent",
            "FileModifiedEvent", "DirModifiedEvent", "FileDeletedEvent", "DirDeletedEvent",
            "FileClosedEvent", "FileAttribEvent", "DirAttribEvent")
"""The watchdog events that are changes (not reads), those of them this watchdog has."""


_OWN_MOVES_KEPT = 10_000
"""The most moves :class:`OwnMoves` waits to hear of: more means their events were lost."""


class OwnMoves:
    """The files this process is moving out of the watched folders itself (see the module
    text). :meth:`add` before the rename; :meth:`discard` when the rename did not happen."""

    def __init__(self) -> None:
        self._paths: set[str] = set()
        self._folders: dict[str, int] = {}
        self._lock = threading.Lock()
        self.paused = False
        """While the watches rest (:meth:`QueueWatcher.rest`): moves are not noted, since
        no event of theirs will come."""

    def pause(self, paused: bool) -> None:
        """Stop (or start again) noting moves; what was noted is forgotten either way."""
        with self._lock:
            self.paused = paused
            self._paths.clear()
            self._folders.clear()

    def add(self, path: str | os.PathLike[str]) -> None:
        with self._lock:
            if self.paused:
                return  # no watch hears of it
            if len(self._paths) >= _OWN_MOVES_KEPT:
                # events lost (an inotify overflow): forgetting costs a wake-up or two
                self._paths.clear()
                self._folders.clear()
            self._paths.add(os.fspath(path))

    def discard(self, path: str | os.PathLike[str]) -> None:
        with self._lock:
            self._paths.discard(os.fspath(path))

    def left(self, path: str) -> bool:
        """Whether ``path``'s leaving is one of ours (then its folder's change is too, once)."""
        with self._lock:
            if path not in self._paths:
                return False
            self._paths.remove(path)
            folder = os.path.dirname(path)
            self._folders[folder] = self._folders.get(folder, 0) + 1
            return True

    def folder_changed(self, folder: str) -> bool:
        """Whether this change of ``folder`` comes with one of our files' leaving."""
        with self._lock:
            count = self._folders.get(folder, 0)
            if count == 0:
                return False
            if count == 1:
                del self._folders[folder]
            else:
                self._folders[folder] = count - 1
            return True


class QueueWatcher:
    """Waits for a change in some folders of a queue.

    Use it as a context manager (it runs a watchdog observer thread when it can)::

        with QueueWatcher([queue / "todo"], interval=5) as watcher:
            while running:
                if watcher.wait(timeout=30):
                    ...  # something changed: rescan
    """

    def __init__(self, folders: Sequence[str | os.PathLike[str]], *, interval: float,
                 use_watchdog: bool = True, own: OwnMoves | None = None) -> None:
        self.folders = [Path(f) for f in folders]
        self.interval = interval
        self.own = own
        """The moves out of the watched folders that are this process's own: they wake no
        one (``None``: every move does)."""
        self._changed = threading.Event()
        self._observer: BaseObserver | None = None
        """The watchdog observer, when instant notifications could be set up."""
        self._schedule: Callable[[], list[ObservedWatch]] | None = None
        """Sets up the watches (again, after a rest)."""
        self._watches: list[ObservedWatch] = []
        self.resting = False
        """Whether the watches are set aside (:meth:`rest`): only polling wakes the waiter."""
        self.rests = 0
        """How many times the watches were set aside."""
        self._signature = self._look()
        if use_watchdog:
            self._start_observer()

    @property
    def live(self) -> bool:
        """Whether instant (watchdog) notifications are active; polling always is."""
        return self._observer is not None

    def _start_observer(self) -> None:
        try:
            from watchdog import events
            from watchdog.events import FileSystemEventHandler
            from watchdog.observers import Observer
        except ImportError:
            return
        _shorten_move_pairing()
        changed, own = self._changed, self.own
        changes = [cls for name in _CHANGES if (cls := getattr(events, name, None)) is not None]

        class _Handler(FileSystemEventHandler):
            def on_any_event(self, event: object) -> None:
                kind = getattr(event, "event_type", "")
                if kind in ("opened", "closed_no_write"):
                    return
                if own is not None:
                    path = os.fsdecode(getattr(event, "src_path", ""))
                    if kind in ("deleted", "moved") and own.left(path):
                        return
                    if kind == "modified" and getattr(event, "is_directory", False) \
                            and own.folder_changed(path):
                        return
                changed.set()

        observer = Observer()
        handler = _Handler()

        def schedule() -> list[ObservedWatch]:
            watches = []
            for folder in self.folders:
                if folder.is_dir():
                    try:
                        watches.append(observer.schedule(handler, str(folder), recursive=True,
                                                         event_filter=changes))
                    except TypeError:  # a watchdog before 4.0 has no filter: reads come too
                        watches.append(observer.schedule(handler, str(folder), recursive=True))
            return watches

        try:
            self._watches = schedule()
            observer.start()
        except OSError:
            # e.g. the inotify watch limit: polling still works.
            return
        self._observer, self._schedule = observer, schedule

    def rest(self) -> None:
        """Set the watches aside: no file-system event is read, and the waiter wakes only on
        its polls, until :meth:`arm`. For a runner whose tasks' exits wake it far more often
        than it would wait for a change: every claim of its own is an event that watchdog's
        threads pass along, only for it to be thrown away."""
        if self._observer is None or self.resting:
            return
        self.resting = True
        self.rests += 1
        if self.own is not None:
            self.own.pause(True)
        with _quiet_inotify():
            for watch in self._watches:
                self._observer.unschedule(watch)
        self._watches = []

    def arm(self) -> None:
        """Set the watches up again after :meth:`rest`, and report a change, since whatever
        came while they rested was heard by no one."""
        if self._observer is None or not self.resting or self._schedule is None:
            return
        if self.own is not None:
            self.own.pause(False)
        try:
            self._watches = self._schedule()
        except OSError:  # the inotify watch limit, meanwhile: polling only from now on
            self.close()
        self.resting = False
        self._changed.set()

    def _look(self) -> tuple:
        """The mtimes of every watched folder and sub-folder (cheap: folders, not files)."""
        marks: list[tuple[str, int | None]] = []
        for folder in self.folders:
            stack = [str(folder)]
            while stack:
                d = stack.pop()
                try:
                    marks.append((d, os.stat(d).st_mtime_ns))
                    with os.scandir(d) as it:
                        stack.extend(e.path for e in it
                                     if e.name[0] != "." and e.is_dir(follow_symlinks=False))
                except OSError:
                    marks.append((d, None))
        return tuple(sorted(marks))

    def wait(self, timeout: float) -> bool:
        """Block until something changes or ``timeout`` seconds pass; ``True`` on a change.

        After a file-system event the polling signature is left as it was, not taken again:
        taking it walks every watched folder (a thousand entries for a thousand waiting
        tasks), and a busy queue has an event at every claim. The next poll then finds the
        folders changed since that older signature and reports one change more than there
        was, once; it can never report one less."""
        remaining = timeout
        while True:
            step = min(self.interval, remaining)
            if self._changed.wait(step):
                self._changed.clear()
                return True
            remaining -= step
            now = self._look()
            if now != self._signature:
                self._signature = now
                return True
            if remaining <= 0:
                return False

    def close(self) -> None:
        """Stop the observer thread."""
        if self._observer is not None:
            with _quiet_inotify():
                self._observer.stop()
                self._observer.join(timeout=5)
            self._observer = None

    def __enter__(self) -> QueueWatcher:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


@contextlib.contextmanager
def _quiet_inotify() -> Iterator[None]:
    """Stopping a watch while events arrive makes watchdog log a harmless error
    ("queue_events() called when the thread is inactive"), which would land in the batch
    job's output: it is silenced meanwhile."""
    inotify = logging.getLogger("watchdog.observers.inotify")
    level = inotify.level
    inotify.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        inotify.setLevel(level)
