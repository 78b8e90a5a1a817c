"""A set of node ids stored as sorted disjoint runs, for node pools that move whole jobs.

A :class:`Spans` is what a :class:`~metaq_py.cluster.Cluster` keeps its free pool (and each
notice's reserved pool) in. Starting or ending a job moves hundreds of nodes, and doing that
one id at a time in a Python ``set`` dominated the simulator's run time. Here a pool is a flat
list of bounds ``[a0, b0, a1, b1, ...]``: the nodes ``a0 .. b0-1``, ``a1 .. b1-1`` and so on,
strictly increasing, with a gap between runs (adjacent runs are always merged). A job's nodes,
in turn, are a few runs, so moving them costs a bisect and a list splice per run.

Node tuples are built as slices of one shared tuple ``ids`` (``0 .. total-1``): slicing and
concatenating tuples is C-level work, and tuples built that way share the same int objects,
which makes comparing them nearly free.

A Spans is a read-only :class:`~collections.abc.Set` to everyone but its owner, so the policy
and the tests may use ``len``, ``in``, iteration and set comparisons on it. Iteration is in
ascending id order.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence, Set
from itertools import chain

from metaq_py.policy.model import NodeId, Nodes

Bounds = list[int]
"""Flat run bounds ``[a0, b0, a1, b1, ...]``: runs ``[a0, b0)``, ``[a1, b1)``, ... ascending."""


class Spans(Set[NodeId]):
    """A set of ids in ``0 .. total-1`` kept as sorted disjoint runs (see the module docstring).

    Only the owner mutates it, through :meth:`take_runs` and :meth:`give_runs` (whole runs,
    checked first with :meth:`covers` and :meth:`clear_of`; :meth:`claim` and
    :meth:`give_back` check and move at once) or :meth:`add` and :meth:`remove`.
    """

    __slots__ = ("bounds", "count", "ids")

    def __init__(self, ids: tuple[NodeId, ...], bounds: Bounds | None = None) -> None:
        self.ids = ids
        """``tuple(range(total))``, shared by every pool of one cluster."""
        self.bounds: Bounds = [] if bounds is None else bounds
        """The runs (read-only outside this class)."""
        self.count = size(self.bounds)
        """How many ids are in the pool (read-only outside this class; ``len`` without a call)."""

    @classmethod
    def full(cls, total: int) -> Spans:
        """Every id ``0 .. total-1``."""
        return cls(tuple(range(total)), [0, total] if total else [])

    def empty(self) -> Spans:
        """An empty pool over the same ids."""
        return Spans(self.ids)

    # --- the Set protocol ---------------------------------------------------------------------

    def __len__(self) -> int:
        return self.count

    def __contains__(self, node: object) -> bool:
        if not isinstance(node, int):
            return False
        # inside a run exactly when an odd number of bounds are <= node
        return bisect_right(self.bounds, node) & 1 == 1

    def __iter__(self) -> Iterator[NodeId]:
        b, ids = self.bounds, self.ids
        return chain.from_iterable(map(ids.__getitem__, map(slice, b[0::2], b[1::2])))

    def __repr__(self) -> str:
        b = self.bounds
        runs = ", ".join(f"{b[i]}..{b[i + 1] - 1}" for i in range(0, len(b), 2))
        return f"Spans({runs})"

    @classmethod
    def _from_iterable(cls, it: Iterable[NodeId]) -> frozenset[NodeId]:  # type: ignore[override]
        # set algebra on a Spans (``spans - other``) yields a plain frozenset
        return frozenset(it)

    # --- runs ---------------------------------------------------------------------------------

    def runs(self, nodes: Sequence[NodeId]) -> tuple[Bounds, Nodes] | None:
        """``(bounds, canonical tuple)`` of ``nodes`` when they are distinct ids of this pool's
        range in ascending order, else ``None``.

        The canonical tuple equals ``tuple(nodes)`` and is built from slices of :attr:`ids`.
        Cost: one bisect per run plus C-level slicing and one comparison.
        """
        n = len(nodes)
        if n == 0:
            return [], ()
        try:
            bounds = _runs_of(nodes, n)
            if bounds is None or bounds[0] < 0 or bounds[-1] > len(self.ids):
                return None
            canon = self.nodes(bounds)
        except TypeError:  # not ints
            return None
        # _runs_of trusts the order; this one C-level comparison checks it
        return (bounds, canon) if canon == tuple(nodes) else None

    def claim(self, nodes: Sequence[NodeId]) -> tuple[Bounds, Nodes] | None:
        """Remove ``nodes`` when they are distinct ids of this pool in ascending order, and
        return ``(their runs, canonical tuple)`` as :meth:`runs` does; else ``None``, with
        nothing changed.

        This is the start of a job on nodes a decision took lowest first: each run of the
        job's nodes is then a whole run of the pool or, for the last one, a prefix of it, so
        one bisect per run finds both where it is and where it ends.
        """
        b = self.bounds
        n = len(nodes)
        try:
            # the usual cases first: one slice of one pool run, or the n lowest ids (whole runs
            # from the bottom, then a prefix of the next), which is what a decision's lowest-
            # first take names
            a = nodes[0]
            j = bisect_right(b, a)
            if j & 1 and a + n <= b[j]:
                canon = self.ids[a:a + n]
                if canon == nodes:
                    self._cut(j, a, a + n)
                    return [a, a + n], canon
            elif j == 1 and n <= self.count:
                left = n
                while b[j] - b[j - 1] < left:
                    left -= b[j] - b[j - 1]
                    j += 2
                out: Bounds = b[:j - 1]
                out += (b[j - 1], b[j - 1] + left)
                canon = self.nodes(out)
                if canon == nodes:
                    if b[j] - b[j - 1] == left:
                        del b[:j + 1]
                    else:
                        del b[:j - 1]
                        b[0] += left
                    self.count -= n
                    return out, canon
        except (IndexError, TypeError):  # no nodes, or not ints: the general path decides
            pass
        out = []
        at: list[int] = []  # for each run, the index of the end of the pool run holding it
        i = 0
        try:
            while i < n:
                a = nodes[i]
                j = bisect_right(b, a)
                if not j & 1 or (out and a <= out[-1]):
                    return None  # not in the pool, or not ascending
                length = min(b[j] - a, n - i)
                if nodes[i + length - 1] - a != length - 1:
                    # the run ends inside the pool run (not a lowest-first take): bisect
                    length = _run_end(nodes, i, i + length) - i
                out.append(a)
                out.append(a + length)
                at.append(j)
                i += length
            canon = self.nodes(out)
        except TypeError:  # not ints
            return None
        if canon != (nodes if isinstance(nodes, tuple) else tuple(nodes)):
            return None
        # highest run first, so that the indices found for the lower ones stay valid
        for x in range(len(at) - 1, -1, -1):
            self._cut(at[x], out[2 * x], out[2 * x + 1])
        return out, canon

    def nodes(self, bounds: Bounds) -> Nodes:
        """The ids of the runs ``bounds``, ascending, as one tuple."""
        ids = self.ids
        if len(bounds) == 2:
            return ids[bounds[0]:bounds[1]]
        if len(bounds) == 4:
            return ids[bounds[0]:bounds[1]] + ids[bounds[2]:bounds[3]]
        # adding tuples would copy the prefix at every run, and chain goes id by id: extending
        # one list by whole slices and copying it once is the cheapest for three runs and more
        out: list[NodeId] = []
        for run in map(slice, bounds[0::2], bounds[1::2]):
            out += ids[run]
        return tuple(out)

    def covers(self, bounds: Bounds) -> bool:
        """Whether every run of ``bounds`` lies inside this pool."""
        b = self.bounds
        for x in range(0, len(bounds), 2):
            i = bisect_right(b, bounds[x])
            if not i & 1 or bounds[x + 1] > b[i]:
                return False
        return True

    def clear_of(self, bounds: Bounds) -> bool:
        """Whether no run of ``bounds`` meets this pool."""
        b = self.bounds
        for x in range(0, len(bounds), 2):
            i = bisect_right(b, bounds[x])
            if i & 1 or (i < len(b) and bounds[x + 1] > b[i]):
                return False
        return True

    def split(self, bounds: Bounds) -> tuple[Bounds, Bounds]:
        """``(inside, outside)``: the runs ``bounds`` cut into the parts in this pool and the
        parts not in it (one step per piece)."""
        b = self.bounds
        inside: Bounds = []
        outside: Bounds = []
        for x in range(0, len(bounds), 2):
            lo, hi = bounds[x], bounds[x + 1]
            i = bisect_right(b, lo)
            while lo < hi:
                # lo lies in the pool's run [b[i-1], b[i]) when i is odd, else in the gap
                # before b[i]; either way the piece ends at b[i] or at hi
                end = min(hi, b[i]) if i < len(b) else hi
                _append(inside if i & 1 else outside, lo, end)
                lo = end
                i += 1
        return inside, outside

    def take_runs(self, bounds: Bounds) -> None:
        """Remove the runs ``bounds``, which :meth:`covers` must have accepted."""
        b = self.bounds
        for x in range(0, len(bounds), 2):
            lo = bounds[x]
            self._cut(bisect_right(b, lo), lo, bounds[x + 1])

    def _cut(self, i: int, lo: int, hi: int) -> None:
        """Remove ``[lo, hi)`` from the pool run ``[bounds[i-1], bounds[i])`` holding it."""
        b = self.bounds
        if b[i - 1] == lo:
            if b[i] == hi:
                del b[i - 1:i + 1]
            else:
                b[i - 1] = hi
        elif b[i] == hi:
            b[i] = lo
        else:
            b[i:i] = (lo, hi)
        self.count -= hi - lo

    def give_back(self, bounds: Bounds) -> bool:
        """Add the runs ``bounds`` if no run meets this pool, and say whether it did (nothing
        changes when one does): :meth:`clear_of`, then :meth:`give_runs`, with one bisect for
        the usual single run (a job ending on consecutive nodes)."""
        if len(bounds) == 2:
            b = self.bounds
            lo, hi = bounds
            i = bisect_right(b, lo)
            if i & 1 or (i < len(b) and hi > b[i]):
                return False
            self._put(i, lo, hi)
            return True
        if not self.clear_of(bounds):
            return False
        self.give_runs(bounds)
        return True

    def give_runs(self, bounds: Bounds) -> None:
        """Add the runs ``bounds``, which :meth:`clear_of` must have accepted."""
        b = self.bounds
        for x in range(0, len(bounds), 2):
            lo = bounds[x]
            self._put(bisect_right(b, lo), lo, bounds[x + 1])

    def _put(self, i: int, lo: int, hi: int) -> None:
        """Add ``[lo, hi)``, which lies in the gap before ``bounds[i]`` (``i`` even), merging it
        with the runs it touches: the inverse of :meth:`_cut`."""
        b = self.bounds
        left = i > 0 and b[i - 1] == lo
        right = i < len(b) and b[i] == hi
        if left and right:
            del b[i - 1:i + 1]
        elif left:
            b[i - 1] = hi
        elif right:
            b[i] = lo
        else:
            b[i:i] = (lo, hi)
        self.count += hi - lo

    # --- any nodes ----------------------------------------------------------------------------

    def add(self, nodes: Iterable[NodeId]) -> None:
        """Add distinct ``nodes`` that are not in the pool (raises ``ValueError`` otherwise)."""
        bounds = self._bounds_of(nodes)
        if not self.give_back(bounds):
            raise ValueError(f"{self!r} already holds some of {self.nodes(bounds)[:5]}")

    def remove(self, nodes: Iterable[NodeId]) -> None:
        """Remove distinct ``nodes`` that are all in the pool (raises ``ValueError`` otherwise)."""
        bounds = self._bounds_of(nodes)
        if not self.covers(bounds):
            raise ValueError(f"{self!r} does not hold all of {self.nodes(bounds)[:5]}")
        self.take_runs(bounds)

    def _bounds_of(self, nodes: Iterable[NodeId]) -> Bounds:
        if isinstance(nodes, Spans):
            return list(nodes.bounds)
        if isinstance(nodes, tuple):  # a job's nodes are ascending already: no sort
            found = self.runs(nodes)
            if found is not None:
                return found[0]
        ordered = sorted(set(nodes))
        found = self.runs(ordered)
        if found is None:
            raise ValueError(f"{ordered[:5]} are not node ids of this pool")
        return found[0]


def _run_end(nodes: Sequence[NodeId], i: int, limit: int) -> int:
    """Where the run of consecutive ids that starts at ``nodes[i]`` ends, at most ``limit``,
    assuming strictly increasing ints.

    In a strictly increasing run of ints ``nodes[j] - j`` is constant, and between runs it
    grows, so the end is a bisect on that key.
    """
    key = nodes.__getitem__
    return bisect_right(range(limit), nodes[i] - i, lo=i, key=lambda p: key(p) - p)


def _runs_of(nodes: Sequence[NodeId], n: int) -> Bounds | None:
    """The runs of ``nodes``, assumed strictly increasing ints (``None``: they are not, as
    far as this cheap look can tell; the caller checks the rest).

    In a strictly increasing run of ints ``nodes[j] - j`` is constant, and between runs it
    grows, so the end of the run at ``i`` is a bisect on that key (:func:`_run_end`).
    """
    out: Bounds = []
    i = 0
    while i < n:
        a = nodes[i]
        # the rest is one run (the usual last step), or bisect for where this one ends
        j = n if nodes[n - 1] - a == n - 1 - i else _run_end(nodes, i, n)
        if out and a <= out[-1]:
            return None  # runs out of order or touching: not strictly increasing
        out.append(a)
        out.append(nodes[j - 1] + 1)
        i = j
    return out


def size(bounds: Bounds) -> int:
    """The number of ids in the runs ``bounds``."""
    return sum(bounds[1::2]) - sum(bounds[0::2])


def _append(bounds: Bounds, lo: int, hi: int) -> None:
    """Add the run ``[lo, hi)`` after the last run of ``bounds``, merging when they touch."""
    if bounds and bounds[-1] == lo:
        bounds[-1] = hi
    else:
        bounds.append(lo)
        bounds.append(hi)
