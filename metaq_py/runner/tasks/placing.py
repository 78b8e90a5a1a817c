"""Placing a multi-node task inside one block of neighbouring nodes.

The scheduler counts nodes, not which nodes: any free node serves a whole-node task as well as
another. So where the nodes a decision names for a multi-node task span several blocks
(:mod:`metaq_py.batch.topology`: a leaf switch's nodes, else a run of hostnames), the runner
swaps them for the same number of free nodes inside one block, when one block has that many.
Only the runner does this: the Cluster's counts, and so every later decision, are the same
either way, and the simulator's schedules cannot change.

A node named by another action of the same decision (another start, a shrink, an expansion, a
reservation) is never taken, nor one still held physically by a stopping task.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Container, Iterable, Sequence

from metaq_py.policy import Expand, Reserve, Shrink, Start

__all__ = ["NodeBlocks", "in_one_block", "named_nodes", "usable_for"]

Blocks = tuple[tuple[int, ...], ...]


class NodeBlocks:
    """The allocation's blocks of neighbouring nodes, asked of the batch system (``ask``) the
    first time a task is placed on several nodes, then kept."""

    def __init__(self, ask: Callable[[], Blocks]) -> None:
        self._ask = ask
        self._blocks: Blocks | None = None
        self._block_of: dict[int, int] = {}

    @property
    def blocks(self) -> Blocks:
        """Each block's node ids, ascending."""
        if self._blocks is None:
            self._blocks = tuple(tuple(sorted(b)) for b in self._ask())
            self._block_of = {n: i for i, b in enumerate(self._blocks) for n in b}
        return self._blocks

    def spanned(self, node_ids: Sequence[int]) -> int:
        """How many blocks ``node_ids`` touch (``0`` for no nodes; ``1`` for one node, without
        asking the batch system)."""
        if len(node_ids) <= 1:
            return len(node_ids)
        self.blocks  # noqa: B018 -- asked on first use
        return len({self._block_of.get(n, -1 - n) for n in node_ids})


def in_one_block(nodes: Sequence[int], blocks: Blocks, usable: Callable[[int], bool],
                 ) -> tuple[int, ...] | None:
    """Nodes for a task the scheduler put on ``nodes``, all inside one block: as many, each
    ``usable`` (free, and taken by nothing else). ``None`` when ``nodes`` lie in one block
    already, or no block has room.

    Of the blocks with room, the one with the fewest usable nodes is taken (best fit, which
    leaves the larger blocks whole for larger tasks); ties go to the block holding most of
    ``nodes``, then to the first. Inside it, the lowest ids are taken."""
    k = len(nodes)
    if k <= 1:
        return None
    wanted = set(nodes)
    holding = [b for b in blocks if wanted.intersection(b)]
    if len(holding) == 1 and wanted.issubset(holding[0]):
        return None
    best: tuple[tuple[int, int, int], list[int]] | None = None
    for i, block in enumerate(blocks):
        room = [n for n in block if usable(n)]
        if len(room) < k:
            continue
        rank = (len(room), -len(wanted.intersection(block)), i)
        if best is None or rank < best[0]:
            best = (rank, room)
    return None if best is None else tuple(sorted(best[1][:k]))


def named_nodes(actions: Iterable[object]) -> Counter[int]:
    """How many actions of one decision name each node (starts, shrinks, expansions and
    reservations name nodes; preemptions and releases do not)."""
    named: Counter[int] = Counter()
    for action in actions:
        if isinstance(action, Start | Shrink | Expand | Reserve):
            named.update(action.nodes)
    return named


def usable_for(own: Sequence[int], named: Counter[int], free: Container[int],
               draining: Container[int]) -> Callable[[int], bool]:
    """Whether a node may take a start whose decision named ``own`` for it: free in the
    Cluster, not held physically by a stopping task, and named by no other action."""
    mine = set(own)

    def usable(n: int) -> bool:
        return n in free and n not in draining and named[n] - (n in mine) <= 0
    return usable
