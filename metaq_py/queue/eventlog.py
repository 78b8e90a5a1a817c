"""The event log of a batch job: ``jobs/<jobid>/events.jsonl``, one JSON object per line.

Each line has at least ``time`` (Unix seconds) and ``event`` (``start``, ``end``, ``reclaimed``,
...); the runner adds what accounting needs (task, nodes, node-hours, project, exit code).
Lines are written with a single ``write`` on a file opened for appending, so concurrent
writers never interleave within a line; a reader skips a torn last line left by a crash.

A log makes the folders it lacks below ``within`` (the queue), never ``within`` itself: a
runner still writing as its queue is removed must not make the queue again. Before its first
write it makes sure they are real folders (a link planted in a shared ``jobs/`` is moved
aside, as :func:`~metaq_py.queue.disk.folders.make_folders` does for every folder of the
queue), and it never writes through a link planted where the log itself goes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from metaq_py.clock import Clock, WallClock
from metaq_py.queue.disk.fileio import Refused, open_append, read_lines, write_all
from metaq_py.queue.disk.folders import make_folders, set_aside

__all__ = ["EventLog"]

class EventLog:
    """Appends events to, and reads them back from, one JSON-lines file."""

    __slots__ = ("_checked", "clock", "path", "within")

    def __init__(self, path: str | os.PathLike[str], *, within: str | os.PathLike[str],
                 clock: Clock | None = None) -> None:
        self.path = Path(path)
        self.within = Path(within)
        """The folder that must already exist; those between it and the log are made."""
        self.clock: Clock = clock if clock is not None else WallClock()
        """Stamps the events appended without a time of their own."""
        self._checked = False

    def append(self, event: str, *, when: float | None = None, **fields: Any) -> dict[str, Any]:
        """Write one event, stamped ``when`` (default: the clock's now), and return the
        event as written. ``fields`` must be JSON values."""
        line_data = {"time": self.clock.now() if when is None else when, "event": event,
                     **fields}
        line = (json.dumps(line_data, separators=(",", ":"), sort_keys=False) + "\n").encode()
        fd = self._open()
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
        return line_data

    def append_many(self, events: list[dict[str, Any]]) -> None:
        """Write several events (each with ``time`` and ``event``), in order, with one
        ``write``: a reader sees all of them or none."""
        if not events:
            return
        data = "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events).encode()
        fd = self._open()
        try:
            write_all(fd, data)
        finally:
            os.close(fd)

    def _open(self) -> int:
        """The log, opened for appending (``FileNotFoundError`` if :attr:`within` is gone)."""
        if not self._checked:
            make_folders(self.within, self.path.parent)
            self._checked = True
        try:
            return open_append(self.path)
        except Refused as e:
            if e.vanished:  # its folder was removed since
                make_folders(self.within, self.path.parent)
            elif e.planted:
                set_aside(self.path)  # a link, a FIFO or a folder planted where the log goes
            else:
                raise
        return open_append(self.path)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """The events in the order written; a missing file has none."""
        try:
            for raw, _ in read_lines(self.path):
                if raw is None:
                    continue  # longer than any event
                try:
                    event = json.loads(raw)
                except (ValueError, RecursionError):
                    continue  # a line torn by a crash mid-write
                if isinstance(event, dict):
                    yield event
        except Refused:
            return  # missing, or not a file of the queue's (a FIFO, a link): no events
