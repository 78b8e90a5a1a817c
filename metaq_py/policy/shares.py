"""Shares of a node: jobs that use some of one node's cores and GPUs, next to each other.

A job with ``cores > 0`` (:attr:`Job.cores <metaq_py.policy.model.Job.cores>`) is a *share*:
it runs on one node and uses ``cores`` of its cores and ``gpus`` of its GPUs. Every other job
takes whole nodes, as it always did. A node holding shares is a *shared node*: it is out of the
free pool from its first share's start until its last share ends, and whole-node jobs never
use it meanwhile (they wait for whole free nodes).

:class:`NodeShape` is what one node has (every node of a cluster has the same shape);
:class:`NodeLoad` is one shared node: its free core and GPU ids and the shares on it;
:class:`SharedNodes` is every shared node of a :class:`~metaq_py.cluster.Cluster`, kept by it
and handed to decisions in the :class:`~metaq_py.policy.snapshot.Snapshot`; :class:`ShareRoom`
is one decision's working view of them (what its own starts have taken so far).

Cores held back for GPUs (``NodeShape.cores_per_gpu``, as mpi_jm suggests, to keep a GPU
task's cores and caches free of CPU-only work): shares without GPUs may together use at most
``cores - gpus * cores_per_gpu`` cores of a node; shares with GPUs may use any free core.

Memory (``NodeShape.mem``, where the nodes' memory is known): a share that says its memory
(:attr:`Job.mem <metaq_py.policy.model.Job.mem>`, a task's ``MEM``) joins only a node whose
memory not yet given to shares covers it (``NodeLoad.mem_room``); a share that does not say
counts for none, as before. Where the nodes' memory is not known (``mem`` 0) it is not
counted at all.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from dataclasses import dataclass

from metaq_py.policy.model import JobId, NodeId

__all__ = ["UNCOUNTED", "NodeLoad", "NodeShape", "Placement", "ShareRoom", "SharedNode",
           "SharedNodes"]

UNCOUNTED = 1 << 62
"""The memory room of a node whose memory is not known: more than any share asks for
(``MEM`` is at most a pebibyte), so that every check of memory passes without a branch."""


@dataclass(frozen=True, slots=True)
class NodeShape:
    """What one node offers shares: ``cores`` cores and ``gpus`` GPUs, of which
    ``cores_per_gpu`` cores per GPU are held back from shares without GPUs. ``near`` names,
    per GPU, the cores next to it (``()``: not known): a share's cores are then taken next to
    its GPUs first, and a share without GPUs takes cores next to no free GPU first. ``mem``
    is the bytes of memory of a node (0: not known, and memory is not counted)."""

    cores: int
    gpus: int = 0
    cores_per_gpu: int = 0
    near: tuple[tuple[int, ...], ...] = ()
    mem: int = 0

    def __post_init__(self) -> None:
        if self.cores < 1 or self.gpus < 0 or self.cores_per_gpu < 0 or self.mem < 0:
            raise ValueError(f"a node shape needs at least 1 core and no negative counts, got "
                             f"{self.cores} cores, {self.gpus} GPUs, {self.cores_per_gpu} "
                             f"cores per GPU, {self.mem} bytes")

    @property
    def mem_room(self) -> int:
        """The memory an empty node has for shares: all of it, or :data:`UNCOUNTED`."""
        return self.mem if self.mem else UNCOUNTED

    @property
    def cpu_only(self) -> int:
        """The most cores shares without GPUs may use on one node together."""
        return max(0, self.cores - self.gpus * self.cores_per_gpu)

    def fits(self, cores: int, gpus: int, mem: int = 0) -> bool:
        """Whether a share of ``cores`` cores, ``gpus`` GPUs and ``mem`` bytes fits on an
        empty node."""
        return 1 <= cores <= self.cores and 0 <= gpus <= self.gpus and \
            (gpus > 0 or cores <= self.cpu_only) and mem <= self.mem_room


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a share runs: its ``node`` and the ids of its ``cores`` and ``gpus`` there
    (``0 .. cores-1`` and ``0 .. gpus-1`` of the node's shape), and the bytes of the node's
    memory it holds (``mem``, 0: it did not say)."""

    node: NodeId
    cores: tuple[int, ...]
    gpus: tuple[int, ...]
    mem: int = 0


@dataclass(frozen=True, slots=True)
class SharedNode:
    """A shared node as one candidate for preemption (every share on it goes)."""

    node: NodeId


class NodeLoad:
    """One shared node: its free core and GPU ids (ascending), the cores shares without GPUs
    may still take (``cpu_room``), the memory not given to shares (``mem_room``), and each
    share's placement and expected ends."""

    __slots__ = ("cpu_room", "end", "free_cores", "free_gpus", "jobs", "mem_room", "near",
                 "node", "true_end")

    def __init__(self, node: NodeId, shape: NodeShape) -> None:
        self.node = node
        self.near = shape.near
        self.free_cores: list[int] = list(range(shape.cores))
        self.free_gpus: list[int] = list(range(shape.gpus))
        self.cpu_room = shape.cpu_only
        self.mem_room = shape.mem_room
        self.jobs: dict[JobId, tuple[Placement, float, float]] = {}
        """Each share: its placement, end by walltime and true end (its end where unknown)."""
        self.end = -math.inf
        """The latest walltime end of the shares on the node: when it is expected free."""
        self.true_end = -math.inf
        """The latest true end of the shares (their walltime end where unknown)."""

    def fits(self, cores: int, gpus: int, mem: int = 0) -> bool:
        """Whether a share of ``cores`` cores, ``gpus`` GPUs and ``mem`` bytes fits here now."""
        return cores <= len(self.free_cores) and gpus <= len(self.free_gpus) and \
            (gpus > 0 or cores <= self.cpu_room) and mem <= self.mem_room

    def add(self, jid: JobId, cores: int, gpus: int, end: float, true_end: float,
            mem: int = 0) -> Placement:
        """Give a share the lowest free ids, its cores next to its GPUs first where the
        shape says which are (the caller checked :meth:`fits`)."""
        given_gpus = tuple(self.free_gpus[:gpus])
        del self.free_gpus[:gpus]
        if self.near:
            given_cores = self._near_cores(cores, given_gpus)
            self._take_cores(given_cores)
        else:
            given_cores = tuple(self.free_cores[:cores])
            del self.free_cores[:cores]
        if not gpus:
            self.cpu_room -= cores
        self.mem_room -= mem
        placed = Placement(self.node, given_cores, given_gpus, mem)
        self.jobs[jid] = (placed, end, true_end)
        self.end = max(self.end, end)
        self.true_end = max(self.true_end, true_end)
        return placed

    def _take_cores(self, cores: tuple[int, ...]) -> None:
        taken = set(cores)
        self.free_cores = [c for c in self.free_cores if c not in taken]

    def _near_cores(self, cores: int, gpus: tuple[int, ...]) -> tuple[int, ...]:
        """``cores`` free cores: next to ``gpus`` first, then (for every share) those next to
        no GPU still free, then the rest; ascending."""
        near = self.near
        mine = {c for g in gpus if g < len(near) for c in near[g]}
        others = {c for g in self.free_gpus if g < len(near) for c in near[g]}
        ranked = sorted(self.free_cores,
                        key=lambda c: (c not in mine, c in others, c))
        return tuple(sorted(ranked[:cores]))

    def remove(self, jid: JobId) -> Placement:
        """A share ended: its ids are free again."""
        placed, _, _ = self.jobs.pop(jid)
        self.free_cores = sorted(self.free_cores + list(placed.cores))
        self.free_gpus = sorted(self.free_gpus + list(placed.gpus))
        if not placed.gpus:
            self.cpu_room += len(placed.cores)
        self.mem_room += placed.mem
        self.end = max((e for _, e, _ in self.jobs.values()), default=-math.inf)
        self.true_end = max((t for _, _, t in self.jobs.values()), default=-math.inf)
        return placed

    def expected_end(self, oracle: bool) -> float:
        """When the node is expected to be free: by walltime, or truly with ``oracle``."""
        return self.true_end if oracle else self.end


class SharedNodes:
    """Every shared node of a cluster whose nodes have ``shape`` (kept by the Cluster; read
    only by decisions). ``loads`` holds each shared node; ``open`` those with a free core,
    the only ones a share may still join; ``ends`` and ``true_ends`` every shared node as
    ``(expected end, node)``, ascending (by walltime, and truly), so that a decision reads the
    nodes' releases in time order without sorting them."""

    __slots__ = ("ends", "loads", "open", "shape", "true_ends")

    def __init__(self, shape: NodeShape) -> None:
        self.shape = shape
        self.loads: dict[NodeId, NodeLoad] = {}
        self.open: dict[NodeId, NodeLoad] = {}
        self.ends: list[tuple[float, NodeId]] = []
        self.true_ends: list[tuple[float, NodeId]] = []

    def __len__(self) -> int:
        return len(self.loads)

    def add(self, node: NodeId, jid: JobId, cores: int, gpus: int, end: float,
            true_end: float, mem: int = 0) -> Placement:
        """Place a share of ``mem`` bytes on ``node`` (a free node, which becomes shared, or
        a shared node with room: the caller checked)."""
        load = self.loads.get(node)
        if load is None:
            load = self.loads[node] = self.open[node] = NodeLoad(node, self.shape)
        else:
            self._unlist(load)
        placed = load.add(jid, cores, gpus, end, true_end, mem)
        self._list(load)
        if not load.free_cores:
            self.open.pop(node, None)
        return placed

    def know_memory(self, mem: int) -> None:
        """The nodes' memory became known (``mem`` bytes each): shares are packed by it from
        now on, and each shared node's room is what its shares leave of it (a share started
        before asked for none: the driver learns the memory before it offers one that does).
        """
        self.shape = NodeShape(self.shape.cores, self.shape.gpus, self.shape.cores_per_gpu,
                               self.shape.near, mem)
        for load in self.loads.values():
            load.mem_room = self.shape.mem_room - sum(p.mem for p, _, _ in load.jobs.values())

    def remove(self, node: NodeId, jid: JobId) -> bool:
        """A share on ``node`` ended; ``True`` when it was the last one (the node is free)."""
        load = self.loads[node]
        self._unlist(load)
        load.remove(jid)
        if not load.jobs:
            del self.loads[node]
            self.open.pop(node, None)
            return True
        self._list(load)
        self.open[node] = load
        return False

    def _list(self, load: NodeLoad) -> None:
        """Enter ``load``'s expected ends in ``ends`` and ``true_ends``."""
        insort(self.ends, (load.end, load.node))
        insort(self.true_ends, (load.true_end, load.node))

    def _unlist(self, load: NodeLoad) -> None:
        """Take ``load``'s expected ends out of ``ends`` and ``true_ends`` (before they
        change)."""
        for row, key in ((self.ends, (load.end, load.node)),
                         (self.true_ends, (load.true_end, load.node))):
            del row[bisect_left(row, key)]


class ShareRoom:
    """One decision's view of the shared nodes: the snapshot's, less what this decision's
    starts took, plus the free nodes it opened for shares. Never mutates the snapshot's.

    ``taken`` maps a node to the cores, GPUs and CPU-only cores this decision gave shares on
    it, its latest end so far and the memory it gave; ``full`` remembers the share sizes
    (cores, GPUs, memory) no node had room for,
    so that a long queue of such shares costs one comparison each. ``filled`` holds the nodes
    this decision's starts left without a free core, and ``closed`` counts the snapshot's open
    nodes that are no longer open (filled or dropped), so that :meth:`any_open` is a count.
    """

    __slots__ = ("closed", "dropped", "filled", "full", "opened", "opened_filled", "oracle",
                 "shape", "shared", "taken")

    def __init__(self, shared: SharedNodes, oracle: bool) -> None:
        self.shared = shared
        self.shape = shared.shape
        self.oracle = oracle
        self.taken: dict[NodeId, list[float]] = {}
        self.opened: list[NodeId] = []
        self.full: list[tuple[int, int, int]] = []
        self.filled: set[NodeId] = set()
        self.closed = 0
        self.opened_filled = 0
        self.dropped: set[NodeId] = set()
        """Shared nodes this decision preempted whole (free nodes now)."""

    def _room(self, node: NodeId) -> tuple[int, int, int, float, int]:
        """``(free cores, free GPUs, CPU-only room, expected end, memory room)`` of a node
        now."""
        load = self.shared.loads.get(node)
        if load is None:  # opened by this decision
            c, g, cpu, end = self.shape.cores, self.shape.gpus, self.shape.cpu_only, -math.inf
            mem = self.shape.mem_room
        else:
            c, g, cpu = len(load.free_cores), len(load.free_gpus), load.cpu_room
            end, mem = load.expected_end(self.oracle), load.mem_room
        t = self.taken.get(node)
        if t is not None:
            c, g, cpu, end = c - int(t[0]), g - int(t[1]), cpu - int(t[2]), max(end, t[3])
            mem -= int(t[4])
        return c, g, cpu, end, mem

    def drop(self, node: NodeId) -> None:
        """A shared node was preempted whole by this decision: it is a free node now."""
        if node in self.shared.open and node not in self.filled and node not in self.dropped:
            self.closed += 1
        self.dropped.add(node)
        self.full.clear()

    def any_open(self) -> bool:
        """Whether some shared node may still have room for a share: a node this decision
        opened, or one of the snapshot's open nodes, that no start has filled since."""
        return len(self.opened) > self.opened_filled or len(self.shared.open) > self.closed

    def join(self, cores: int, gpus: int, end: float, *, shadow: float,
             extend: bool = True, mem: int = 0) -> NodeId | None:
        """A shared node where a share of ``cores``, ``gpus`` and ``mem`` bytes ending at
        ``end`` may run now, or ``None``. The share must not hold a node past ``shadow`` that
        would have been free by then (EASY's protection of its head); with ``extend`` false
        it must not hold the node past its expected end at all (conservative backfilling's
        promise)."""
        for c, g, m in self.full:
            # a larger share finds no room either, except a GPU share after a CPU-only one:
            # the cores kept back for GPUs are free to it
            if cores >= c and gpus >= g and mem >= m and (g or not gpus):
                return None
        roomy = False
        taken, dropped, oracle = self.taken, self.dropped, self.oracle
        # the snapshot's open nodes, read directly (this loop is the cost of a share's start)
        for node, load in self.shared.open.items():
            c, g, cpu = len(load.free_cores), len(load.free_gpus), load.cpu_room
            if cores > c or gpus > g or (not gpus and cores > cpu) or mem > load.mem_room:
                continue
            node_end = load.true_end if oracle else load.end
            if taken:
                t = taken.get(node)
                if t is not None:
                    c, g, cpu = c - int(t[0]), g - int(t[1]), cpu - int(t[2])
                    if cores > c or gpus > g or (not gpus and cores > cpu) or \
                            mem > load.mem_room - int(t[4]):
                        continue
                    node_end = max(node_end, t[3])
            if dropped and node in dropped:
                continue
            roomy = True
            if end <= node_end or (extend and (end <= shadow or node_end > shadow)):
                return node
        for node in self.opened:
            c, g, cpu, node_end, m = self._room(node)
            if cores > c or gpus > g or (not gpus and cores > cpu) or mem > m:
                continue
            roomy = True
            if end <= node_end or (extend and (end <= shadow or node_end > shadow)):
                return node
        if not roomy:
            self.full.append((cores, gpus, mem))
        return None

    def open_node(self, node: NodeId) -> None:
        """A free node taken for a share by this decision becomes shared."""
        self.opened.append(node)
        self.full.clear()  # room the sizes found none of

    def take(self, node: NodeId, cores: int, gpus: int, end: float, mem: int = 0) -> None:
        """Record a share of ``mem`` bytes started on ``node``."""
        t = self.taken.get(node)
        if t is None:
            t = self.taken[node] = [0.0, 0.0, 0.0, -math.inf, 0.0]
        t[0] += cores
        t[1] += gpus
        if not gpus:
            t[2] += cores
        t[3] = max(t[3], end)
        t[4] += mem
        if node not in self.filled and self._room(node)[0] <= 0:
            self.filled.add(node)
            if node in self.shared.open and node not in self.dropped:
                self.closed += 1
            if node in self.opened:
                self.opened_filled += 1

    def releases(self, now: float) -> list[tuple[float, int]]:
        """``(time, 1)`` for each shared node, in time order: when its last share is expected
        to end (``now`` at the earliest)."""
        taken, dropped = self.taken, self.dropped
        # the cluster keeps the nodes in end order: the untouched ones stay in it
        ordered = self.shared.true_ends if self.oracle else self.shared.ends
        if not taken and not dropped:
            return [(e if e > now else now, 1) for e, _ in ordered]
        out = [(e if e > now else now, 1) for e, n in ordered
               if n not in taken and n not in dropped]
        if taken:
            out += [(max(self._room(n)[3], now), 1) for n in taken]
            out.sort()  # a long run and a short one: a merge
        return out
