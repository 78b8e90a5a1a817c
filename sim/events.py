"""The simulator's event heap: what happens next, in one deterministic order.

An event is a plain tuple ``(time, kind, seq, subject, version)``. Tuples compare field by
field, so the heap orders events by time, then by :class:`EventKind` (at one instant jobs
finish before notices are issued, notices before jobs are submitted, and the scheduler's own
wake-ups come last), then by ``seq``, a counter stamped at push time. ``seq`` is unique, so
``subject`` (a job, a notice or a job id) is never compared and the order never depends on it.

``version`` lets a driver cancel an event without searching the heap: it remembers the
version it expects and ignores a popped event whose version is older (a job's end moved by a
shrink, a preemption, a newer wake-up).
"""

from __future__ import annotations

import math
from enum import IntEnum
from heapq import heappop, heappush


class EventKind(IntEnum):
    """What an event is; the value is its rank among events at the same instant."""

    FINISH = 0
    """A running job reaches its end (subject: the job id)."""
    NOTICE = 1
    """An advance notice is issued (subject: the Notice)."""
    SUBMIT = 2
    """A job arrives in the queue (subject: the Job)."""
    WAKE = 3
    """The scheduler asked to decide again at this time (subject: None)."""
    FAILURE = 4
    """A node fails (subject: None; the failure source picks the node, :mod:`sim.failures`)."""
    REPAIR = 5
    """A failed node is repaired (subject: the id of the repair job holding it)."""


Event = tuple[float, int, int, object, int]
"""``(time, kind, seq, subject, version)``."""


class EventHeap:
    """A priority queue of events; push and pop cost O(log pending events)."""

    __slots__ = ("_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[Event] = []
        self._seq = 0

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, time: float, kind: EventKind, subject: object = None, version: int = 0) -> None:
        """Schedule an event; events at equal time and kind pop in push order."""
        self._seq += 1
        heappush(self._heap, (time, int(kind), self._seq, subject, version))

    def next_time(self) -> float:
        """The time of the next event (infinity when none is pending)."""
        return self._heap[0][0] if self._heap else math.inf

    def pop(self) -> Event:
        """Remove and return the next event."""
        return heappop(self._heap)
