"""A decision's working copy of a node pool.

A decision must not mutate the driver's live pools, and copying a 4,360-node pool per event is
too slow. A :class:`NodePool` instead walks the live pool from its lowest id with a cursor, so
successive takes hand out distinct nodes, lowest ids first, and keeps nodes given back during
the decision (by a preemption, say) in a small list that is used first.

The live pool is normally a :class:`~metaq_py.policy.spans.Spans` (what a
:class:`~metaq_py.cluster.Cluster` keeps), whose runs the cursor walks with C-level tuple
slicing; any other set of ids is walked in sorted order.
"""

from __future__ import annotations

from collections.abc import Iterable, Set

from metaq_py.policy.model import NodeId, Nodes
from metaq_py.policy.spans import Spans

_EMPTY: frozenset[NodeId] = frozenset()


class NodePool:
    """``count`` idle nodes, of which :meth:`take` hands out concrete ids."""

    __slots__ = ("_at", "_bounds", "_extra", "_i", "_ids", "count")

    def __init__(self, live: Set[NodeId] = _EMPTY) -> None:
        if isinstance(live, Spans):
            self._ids, self._bounds = live.ids, live.bounds
        else:
            # any other set: its sorted ids are the single run [0, len) of themselves
            self._ids = tuple(sorted(live))
            self._bounds = [0, len(self._ids)] if live else []
        self._i = 0
        """Index in ``_bounds`` of the start of the run the cursor is in."""
        self._at = self._bounds[0] if self._bounds else 0
        """The next id to hand out (an index into ``_ids``)."""
        self._extra: list[NodeId] = []
        self.count = len(live)

    def take(self, k: int) -> Nodes:
        """Remove and return ``k`` nodes (``k <= count``) in ascending order: given-back ones
        first, then the lowest live ids."""
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
            out += self._walk(k - len(out))
            return tuple(sorted(out))
        return self._walk(k)

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

    def give(self, nodes: Iterable[NodeId]) -> None:
        """Add nodes freed during the decision; they are handed out before the live ones."""
        before = len(self._extra)
        self._extra.extend(nodes)
        self.count += len(self._extra) - before
