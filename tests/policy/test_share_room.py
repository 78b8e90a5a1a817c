"""One decision's view of the shared nodes (:class:`ShareRoom`), against a plain model of it
written from its docstrings: what each node has free, what this decision took there, when it
is expected to be free, and EASY's and conservative's rules for joining one."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from metaq_py.policy.shares import NodeShape, SharedNodes, ShareRoom

SHAPES = st.builds(NodeShape, cores=st.integers(1, 5), gpus=st.integers(0, 2),
                   cores_per_gpu=st.integers(0, 2))
ENDS = st.sampled_from([10.0, 20.0, 30.0, 40.0])
SIZES = st.tuples(st.integers(1, 5), st.integers(0, 2))


class Model:
    """What the room should see: each node's free ids in the snapshot, less the shares this
    decision started there; the node's expected end, the latest of its shares'."""

    def __init__(self, shared: SharedNodes, shape: NodeShape, oracle: bool) -> None:
        self.shape = shape
        self.base = {n: (len(load.free_cores), len(load.free_gpus), load.cpu_room,
                         load.true_end if oracle else load.end)
                     for n, load in shared.open.items()}
        self.opened: list[int] = []
        self.taken: dict[int, list[tuple[int, int, float]]] = {}
        self.dropped: set[int] = set()

    def room(self, node: int) -> tuple[int, int, int, float]:
        if node in self.base:
            c, g, cpu, end = self.base[node]
        else:  # opened by this decision: an empty node
            c, g, cpu, end = self.shape.cores, self.shape.gpus, self.shape.cpu_only, -math.inf
        for cores, gpus, e in self.taken.get(node, []):
            c, g, end = c - cores, g - gpus, max(end, e)
            if not gpus:
                cpu -= cores
        return c, g, cpu, end

    def candidates(self) -> list[int]:
        return [n for n in self.base if n not in self.dropped] + self.opened

    def fits(self, node: int, cores: int, gpus: int) -> bool:
        c, g, cpu, _ = self.room(node)
        return cores <= c and gpus <= g and (gpus > 0 or cores <= cpu)

    def may_join(self, node: int, cores: int, gpus: int, end: float, shadow: float,
                 extend: bool) -> bool:
        """It fits, and holds the node no later than its expected end, or (EASY) ends by the
        shadow time or joins a node that stays busy past it anyway."""
        node_end = self.room(node)[3]
        return self.fits(node, cores, gpus) and (
            end <= node_end or (extend and (end <= shadow or node_end > shadow)))


@st.composite
def rooms(draw: st.DrawFn) -> tuple[ShareRoom, Model, NodeShape, float]:
    shape = draw(SHAPES)
    oracle = draw(st.booleans())
    shared = SharedNodes(shape)
    for node in range(draw(st.integers(0, 4))):
        for i in range(draw(st.integers(1, 3))):
            cores, gpus = draw(SIZES)
            load = shared.loads.get(node)
            fits = load.fits(cores, gpus) if load is not None else shape.fits(cores, gpus)
            if fits:
                end = draw(ENDS)
                shared.add(node, f"{node}.{i}", cores, gpus, end,
                           draw(st.sampled_from([end, end - 5.0])))
    room = ShareRoom(shared, oracle)
    model = Model(shared, shape, oracle)
    for node in list(shared.loads):
        if draw(st.booleans()) and draw(st.booleans()):
            room.drop(node)
            model.dropped.add(node)
    for node in range(10, 10 + draw(st.integers(0, 2))):
        room.open_node(node)
        model.opened.append(node)
    for _ in range(draw(st.integers(0, 4))):
        cores, gpus = draw(SIZES)
        places = [n for n in model.candidates() if model.fits(n, cores, gpus)]
        if places:
            node = draw(st.sampled_from(places))
            end = draw(ENDS)
            room.take(node, cores, gpus, end)
            model.taken.setdefault(node, []).append((cores, gpus, end))
    return room, model, shape, draw(st.sampled_from([15.0, 25.0, 35.0, math.inf]))


@settings(max_examples=400, deadline=None)
@given(rooms(), st.lists(st.tuples(SIZES, ENDS, st.booleans()), min_size=1, max_size=4))
def test_a_share_joins_a_node_it_may_join_and_only_when_there_is_one(
        made: tuple[ShareRoom, Model, NodeShape, float],
        asks: list[tuple[tuple[int, int], float, bool]]) -> None:
    room, model, _, shadow = made
    for (cores, gpus), end, extend in asks:
        node = room.join(cores, gpus, end, shadow=shadow, extend=extend)
        allowed = [n for n in model.candidates()
                   if model.may_join(n, cores, gpus, end, shadow, extend)]
        if node is None:
            assert allowed == [], f"{cores} cores, {gpus} GPUs to {end} refused; {allowed} fit"
        else:
            assert node in allowed, f"{cores} cores, {gpus} GPUs to {end} joined {node}"


@settings(max_examples=300, deadline=None)
@given(rooms(), st.sampled_from([0.0, 10.0, 20.0, 25.0, 40.0]))
def test_each_shared_node_is_released_once_at_its_expected_end(
        made: tuple[ShareRoom, Model, NodeShape, float], now: float) -> None:
    room, model, _, _ = made
    snapshot_nodes = set(room.shared.loads) - model.dropped
    expected = sorted(
        [(max(model.room(n)[3] if n in model.base else _end(room, n), now), 1)
         for n in snapshot_nodes if n not in model.taken]
        + [(max(model.room(n)[3], now), 1) for n in model.taken])
    assert room.releases(now) == expected


def _end(room: ShareRoom, node: int) -> float:
    """The expected end of a full shared node (not open: not in the model's base)."""
    return room.shared.loads[node].expected_end(room.oracle)


def test_the_cores_kept_for_gpus_count_what_this_decision_gave_cpu_only_shares() -> None:
    """4 cores and a GPU, 2 cores kept for it: 2 cores for CPU-only shares per node. On a
    shared node (a GPU share holds a core and the GPU) and on one the decision opened, a
    CPU-only share this decision started leaves 1 CPU-only core: a second share of 2 cores
    without a GPU no longer fits, one of 1 core does."""
    shape = NodeShape(cores=4, gpus=1, cores_per_gpu=2)
    shared = SharedNodes(shape)
    shared.add(0, "gpu", 1, 1, 100.0, 100.0)
    for node, opened in ((0, False), (10, True)):
        room = ShareRoom(shared, oracle=False)
        if opened:
            room.drop(0)  # node 0 out of the way: only the opened node is left
            room.open_node(node)
        room.take(node, 1, 0, 50.0)
        assert room.join(2, 0, 50.0, shadow=math.inf) is None
        assert room.join(1, 0, 50.0, shadow=math.inf) == node


@settings(max_examples=300, deadline=None)
@given(rooms())
def test_a_room_is_open_while_a_node_it_may_use_has_a_free_core(
        made: tuple[ShareRoom, Model, NodeShape, float]) -> None:
    """any_open: a snapshot's open node not dropped, or a node the decision opened, that the
    decision's starts have not filled."""
    room, model, _, _ = made
    assert room.any_open() == any(model.room(n)[0] > 0 for n in model.candidates())


def test_a_full_shared_node_preempted_whole_closes_no_open_one() -> None:
    """Node 0 is full, node 1 has a free core: preempting node 0 whole (twice, even) leaves
    node 1 open to shares."""
    shared = SharedNodes(NodeShape(cores=2))
    shared.add(0, "a", 2, 0, 100.0, 100.0)
    shared.add(1, "b", 1, 0, 100.0, 100.0)
    room = ShareRoom(shared, oracle=False)
    room.drop(0)
    room.drop(0)
    assert room.any_open() and room.join(1, 0, 50.0, shadow=math.inf) == 1
    room.drop(1)
    assert not room.any_open()


def test_a_node_with_room_but_a_late_end_does_not_mark_the_size_as_full() -> None:
    """The decision opened node 10 (its end: none yet). A share to t=50 may not join it past
    the shadow time 10 (EASY), but the node has room: a share of the same size to t=5 may."""
    room = ShareRoom(SharedNodes(NodeShape(cores=2)), oracle=False)
    room.open_node(10)
    assert room.join(1, 0, 50.0, shadow=10.0) is None
    assert room.join(1, 0, 5.0, shadow=10.0) == 10


def test_filling_a_node_the_decision_opened_closes_no_snapshot_node() -> None:
    """Node 0 (a snapshot's shared node) keeps a free core; the decision opens node 10 and
    fills it: node 0 is still open to shares."""
    shared = SharedNodes(NodeShape(cores=2))
    shared.add(0, "a", 1, 0, 100.0, 100.0)
    room = ShareRoom(shared, oracle=False)
    room.open_node(10)
    room.take(10, 2, 0, 50.0)
    assert room.any_open() and room.join(1, 0, 50.0, shadow=math.inf) == 0
