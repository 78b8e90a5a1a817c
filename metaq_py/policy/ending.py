"""The running jobs in end order, kept sorted as jobs start, resize and end.

Decisions walk the running jobs by expected end (the shadow time of EASY, the profile of
conservative backfilling): :attr:`Snapshot.ending <metaq_py.policy.snapshot.Snapshot.ending>` by
walltime end and ``ending_true`` by true end. A :class:`~metaq_py.cluster.Cluster` keeps both
lists here, as sorted :data:`~metaq_py.policy.model.Ending` tuples, so that a start or an end
costs a bisect and a list insert or delete, and a snapshot costs nothing.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Mapping, Sequence

from metaq_py.policy.model import Ending, JobId, Running

ENDS = ("both", "end", "true_end")
"""Which lists an :class:`EndOrder` keeps: both, or only the one by (walltime) end, or only
the one by true end."""


def ending(r: Running, true: bool) -> Ending:
    """``r``'s place in the order by true end (``true``; ``end`` where unknown) or by end."""
    e = r.true_end if true and r.true_end is not None else r.end
    return (e, r.nodes[0], r.job.id, len(r.nodes), r.borrowed)


class EndOrder:
    """The running jobs sorted by end and by true end, as :func:`ending` tuples.

    ``ends`` (one of :data:`ENDS`) says which of the two lists to keep, when the driver knows
    which its scheduler reads; the other is then ``None``, and a decision that asks for it
    sorts the running jobs itself, to the same order.
    """

    def __init__(self, ends: str) -> None:
        self.by_end: list[Ending] | None = [] if ends != "true_end" else None
        """By walltime end (what decisions without ``oracle`` read), or ``None``."""
        self.by_true_end: list[Ending] | None = [] if ends != "end" else None
        """By true end (what ``oracle`` decisions read), or ``None``."""
        # the kept lists, each with whether it orders by true end
        self._kept: tuple[tuple[list[Ending], bool], ...] = tuple(
            (lst, true) for lst, true in ((self.by_end, False), (self.by_true_end, True))
            if lst is not None)

    def add(self, r: Running) -> None:
        """``r`` started (or took a new shape)."""
        for lst, true in self._kept:
            insort(lst, ending(r, true))

    def remove(self, r: Running) -> None:
        """``r`` ended (or is about to take a new shape)."""
        for lst, true in self._kept:
            del lst[bisect_left(lst, ending(r, true))]

    def replace(self, old: Running, new: Running) -> None:
        """A running job changed from ``old`` to ``new``."""
        self.remove(old)
        self.add(new)

    def walltime(self, running: Mapping[JobId, Running]) -> Sequence[Ending]:
        """``running`` sorted by walltime end: the kept list, or one sorted now."""
        if self.by_end is not None:
            return self.by_end
        return sorted(ending(r, False) for r in running.values() if not r.job.cores)

    def agrees(self, running: Mapping[JobId, Running]) -> bool:
        """Whether every kept list is ``running`` in order (O(n log n); for checks)."""
        return all(sorted(ending(r, true) for r in running.values()) == lst
                   for lst, true in self._kept)
