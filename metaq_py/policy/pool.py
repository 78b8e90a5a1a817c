"""A decision's working copy of a node pool.

A decision must not mutate the driver's live pools, and copying a 4,360-node pool per event is
too slow. A :class:`NodePool` instead walks the live pool from its lowest id with a cursor, so
successive takes hand out distinct nodes, lowest ids first, and keeps nodes given back during
the decision (by a preemption, say) in a small list that is used first. Under
:attr:`NodeOrder.HIGHEST_FIRST` the cursor walks down from the highest id instead (kept to
measure what the order of node ids moves).

The live pool is normally a :class:`~metaq_py.policy.spans.Spans` (what a
:class:`~metaq_py.cluster.Cluster` keeps), whose runs the cursor walks with C-level tuple
slicing; any other set of ids is walked in sorted order.
"""

from __future__ import annotations

from collections.abc import Iterable, Set
from enum import Enum

from metaq_py.policy.model import NodeId, Nodes
from metaq_py.policy.spans import Spans

_EMPTY: frozenset[NodeId] = frozenset()


class NodeOrder(str, Enum):
    """Which live nodes a pool hands out first."""

    LOWEST_FIRST = "lowest-first"
    """The lowest ids (the default)."""
    HIGHEST_FIRST = "highest-first"
    """The highest ids."""

    def __str__(self) -> str:
        return self.value


class NodePool:
    """``count`` idle nodes, of which :meth:`take` hands out concrete ids; ``down`` walks the
    live ids from the highest (:attr:`NodeOrder.HIGHEST_FIRST`)."""

    __slots__ = ("_at", "_bounds", "_down", "_extra", "_i", "_ids", "count")

    def __init__(self, live: Set[NodeId] = _EMPTY, down: bool = False) -> None:
        if isinstance(live, Spans):
            self._ids, self._bounds = live.ids, live.bounds
        else:
            # any other set: its sorted ids are the single run [0, len) of themselves
            self._ids = tuple(sorted(live))
            self._bounds = [0, len(self._ids)] if live else []
        self._down = down
        self._i = len(self._bounds) - 2 if down and self._bounds else 0
        """Index in ``_bounds`` of the start of the run the cursor is in."""
        # the next id to hand out (an index into ``_ids``); walking down, the end (exclusive)
        # of the ids still to hand out in the cursor's run
        if down:
            self._at = self._bounds[-1] if self._bounds else 0
        else:
            self._at = self._bounds[0] if self._bounds else 0
        self._extra: list[NodeId] = []
        self.count = len(live)

    def take(self, k: int) -> Nodes:
        """Remove and return ``k`` nodes (``k <= count``) in ascending order: given-back ones
        first, then the lowest live ids (the highest when walking down)."""
        if k > self.count:
            raise ValueError(f"cannot take {k} nodes from a pool of {self.count}")
        self.count -= k
        extra = self._extra
        if extra:
            if k <= len(extra):
                out = sorted(extra[len(extra) - k:])
                del extra[len(extra) - k:]
                return tuple(out)
            out = extra[:]
            extra.clear()
            out += self._walk_down(k - len(out)) if self._down else self._walk(k - len(out))
            return tuple(sorted(out))
        return self._walk_down(k) if self._down else self._walk(k)

    def _walk(self, k: int) -> Nodes:
        """The next ``k`` live ids, as slices of the shared id tuple."""
        ids, b = self._ids, self._bounds
        i, at = self._i, self._at
        stop = b[i + 1] if b else 0
        if at + k <= stop:  # the usual case: one slice of the current run
            self._at = at + k
            return ids[at:at + k]
        out: list[NodeId] = []  # one list extended by whole slices, copied once (see Spans.nodes)
        while k:
            if at == stop:
                i += 2
                at, stop = b[i], b[i + 1]
            n = min(k, stop - at)
            out += ids[at:at + n]
            at += n
            k -= n
        self._i, self._at = i, at
        return tuple(out)

    def _walk_down(self, k: int) -> Nodes:
        """The next ``k`` live ids from the top, in ascending order."""
        ids, b = self._ids, self._bounds
        i, at = self._i, self._at
        start = b[i] if b else 0
        if at - k >= start:  # one slice of the current run
            self._at = at - k
            return ids[at - k:at]
        pieces: list[Nodes] = []
        while k:
            if at == start:
                i -= 2
                start, at = b[i], b[i + 1]
            n = min(k, at - start)
            pieces.append(ids[at - n:at])
            at -= n
            k -= n
        self._i, self._at = i, at
        out: list[NodeId] = []
        for piece in reversed(pieces):
            out += piece
        return tuple(out)

    def give(self, nodes: Iterable[NodeId]) -> None:
        """Add nodes freed during the decision; they are handed out before the live ones."""
        before = len(self._extra)
        self._extra.extend(nodes)
        self.count += len(self._extra) - before
