"""The simulator's agenda: what is due to happen, in one deterministic order.

The engine keeps it in a plain ``heapq`` list (:mod:`sim.engine.core`). An agenda item is a
plain tuple ``(time, kind, seq, subject, version)``. Tuples compare field by field, so the heap
orders items by time, then by their kind's rank (at one instant jobs finish before notices
are issued, notices before jobs are submitted, and the scheduler's own wake-ups come last; the
:class:`InstantOrder` ``submits-first`` swaps finishes and submits), then by ``seq``, a
counter stamped at push time. ``seq`` is unique, so ``subject`` (a job, a notice or a job id)
is never compared and the order never depends on it.

``version`` lets a driver cancel an item without searching the heap: it remembers the version
it expects and ignores a popped item whose version is older (a job's end moved by a shrink, a
preemption, a newer wake-up).

(The word "event" is kept for the lines of a batch job's ``events.jsonl``; what the simulator
has due is an agenda item.)
"""

from __future__ import annotations

from enum import Enum, IntEnum

from sim.engine.words import word_of


class AgendaKind(IntEnum):
    """What an agenda item is; the value is its rank among items due at the same instant."""

    FINISH = 0
    """A running job reaches its end (subject: the job id)."""
    NOTICE = 1
    """An advance notice is issued (subject: the Notice)."""
    SUBMIT = 2
    """A job arrives in the queue (subject: the Job)."""
    WAKE = 3
    """The scheduler asked to decide again at this time (subject: None)."""
    FAILURE = 4
    """A node fails (subject: None; :mod:`sim.engine.failures` picks the node)."""
    REPAIR = 5
    """A failed node is repaired (subject: the id of the repair job holding it)."""


AgendaItem = tuple[float, int, int, object, int]
"""``(time, kind, seq, subject, version)``."""


class DecisionPace(str, Enum):
    """How often the engine decides while items come due at one instant."""

    PER_INSTANT = "per-instant"
    """Once, after every item due at the instant has been handled (the default)."""
    PER_ITEM = "per-item"
    """After each item that changed something, as CQSim scans after every event."""

    def __str__(self) -> str:
        return self.value

    @classmethod
    def of(cls, word: str) -> DecisionPace:
        """The choice named ``word``; ValueError with one sentence for any other word."""
        return word_of(cls, "decisions", word)


class InstantOrder(str, Enum):
    """In which order finishes, notices and submits due at one instant are handled.

    Only a run that decides after each item (:attr:`DecisionPace.PER_ITEM`) can tell the two
    apart: a decision per instant sees every item of the instant handled whichever came first.
    """

    FINISHES_FIRST = "finishes-first"
    """Finishes, then notices, then submits (the default): a job that arrives as another ends
    finds its nodes free."""
    SUBMITS_FIRST = "submits-first"
    """Submits, then notices, then finishes: a job that arrives as another ends finds it still
    running."""

    def __str__(self) -> str:
        return self.value

    @property
    def ranks(self) -> tuple[int, int]:
        """The agenda ranks of a finish and of a submit under this order (a notice keeps
        :attr:`AgendaKind.NOTICE`, between them either way)."""
        if self is InstantOrder.FINISHES_FIRST:
            return int(AgendaKind.FINISH), int(AgendaKind.SUBMIT)
        return int(AgendaKind.SUBMIT), int(AgendaKind.FINISH)

    @classmethod
    def of(cls, word: str) -> InstantOrder:
        """The choice named ``word``; ValueError with one sentence for any other word."""
        return word_of(cls, "instant_order", word)
