"""The runner's event vocabulary: what each line of ``jobs/<jobid>/events.jsonl`` says.

``docs/events.md`` is the table readers (``metaq report``, ``metaq explain``, the Gantt plot)
work from; this module is the one place the runner writes them, so the names and fields in the
file always match that table. Every event has ``time`` (Unix seconds) and ``event``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from metaq_py.queue.eventlog import EventLog

__all__ = ["EVENTS", "OUTCOMES", "EventWriter"]

EVENTS = ("runner-start", "runner-stop", "start", "end", "arrival", "preempt", "shrink",
          "expand", "reserve", "release", "checkpoint", "reclaim")
"""Every event name the runner writes."""

OUTCOMES = ("finished", "failed", "retry", "requeued", "preempted", "reclaimed", "cancelled")
"""The values of ``outcome`` in an ``end`` event."""


class EventWriter:
    """Writes this batch job's events (:meth:`write`), stamped with the runner's clock.

    With ``buffered``, events are kept until :meth:`flush` and then go to the file at once
    (one system call): the runner flushes once per wake-up, before it waits again, so a burst of
    starts and ends costs one write and the file is complete whenever the runner is idle.

    A failure to write (a full disk, a removed queue) is reported through ``warn`` once and
    never stops the runner: the tasks matter more than their log.
    """

    def __init__(self, log: EventLog, *, now: Callable[[], float],
                 warn: Callable[[str], None], buffered: bool = False) -> None:
        self.log = log
        self._now = now
        self._warn = warn
        self._failed = False
        self._buffered = buffered
        self._pending: list[dict[str, Any]] = []

    def write(self, event: str, **fields: Any) -> None:
        """Write one event of the vocabulary (:data:`EVENTS`) with its ``fields``."""
        if event not in EVENTS:
            raise ValueError(f"{event!r} is not in the runner's event vocabulary")
        self._pending.append({"time": self._now(), "event": event, **fields})
        if not self._buffered:
            self.flush()

    def flush(self) -> None:
        """Write the events kept so far (they are dropped if the write fails)."""
        if not self._pending:
            return
        lines, self._pending = self._pending, []
        try:
            self.log.append_many(lines)
            self._failed = False
        except OSError as e:
            if not self._failed:
                self._warn(f"cannot write the event log {self.log.path}: {e.strerror}; "
                           f"the tasks go on, but '{lines[0]['event']}' and later events "
                           f"may be missing")
            self._failed = True
