"""A decision's working copy of a node pool.

A decision must not mutate the driver's live sets, and copying a 4,360-node set per event is
too slow. A :class:`NodePool` instead walks the live set with one iterator, so successive takes
hand out distinct nodes in the set's own (deterministic) iteration order, and keeps nodes given
back during the decision (by a preemption, say) in a small list that is used first.
"""

from __future__ import annotations

from collections.abc import Iterable, Set
from itertools import islice

from metaq_py.policy.model import NodeId

_EMPTY: frozenset[NodeId] = frozenset()


class NodePool:
    """``count`` idle nodes, of which :meth:`take` hands out concrete ids."""

    __slots__ = ("_extra", "_it", "count")

    def __init__(self, live: Set[NodeId] = _EMPTY) -> None:
        self._it = iter(live)
        self._extra: list[NodeId] = []
        self.count = len(live)

    def take(self, k: int) -> list[NodeId]:
        """Remove and return ``k`` nodes (``k <= count``)."""
        if k > self.count:
            raise ValueError(f"cannot take {k} nodes from a pool of {self.count}")
        self.count -= k
        extra = self._extra
        if k <= len(extra):
            out = extra[len(extra) - k:]
            del extra[len(extra) - k:]
            return out
        out = extra[:]
        extra.clear()
        out.extend(islice(self._it, k - len(out)))
        return out

    def give(self, nodes: Iterable[NodeId]) -> None:
        """Add nodes freed during the decision; they are handed out before the live ones."""
        before = len(self._extra)
        self._extra.extend(nodes)
        self.count += len(self._extra) - before
