"""EASY and conservative backfilling, the wall clock, the oracle switch, malleable sizes."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metaq_py.cluster import Cluster
from metaq_py.policy import Start, make_scheduler
from metaq_py.policy.backfill import ALL, EASY, decision
from metaq_py.policy.model import NOTHING, Job, Kind
from metaq_py.policy.shares import NodeShape
from tests.policy_world import World, job


def started(world: World, at: float | None = None) -> list[object]:
    return [a.job for a in world.decide(at).actions if isinstance(a, Start)]


def _blocked_head(world: World) -> None:
    """10 nodes, a job on 6 of them until t=100; the head needs 8 (shadow 100, extra 2)."""
    world.run(job("A", 6, 100.0), range(6))
    world.submit(job("H", 8, 100.0, submit=1.0))


def test_fcfs_starts_in_order_while_jobs_fit() -> None:
    w = World(10)
    w.submit(job("a", 4, submit=0.0), job("b", 4, submit=1.0), job("c", 4, submit=2.0))
    assert started(w) == ["a", "b"]


def test_easy_extra_nodes_rule() -> None:
    w = World(10)
    _blocked_head(w)
    w.submit(
        job("X", 2, 500.0, submit=2.0),   # ends after the shadow time: uses the 2 extra nodes
        job("Y", 2, 500.0, submit=3.0),   # would too, but the extra nodes are gone
        job("Z", 2, 50.0, submit=4.0),    # ends before the shadow time: fine
    )
    assert started(w) == ["X", "Z"]


def test_easy_does_not_backfill_what_would_delay_the_head() -> None:
    w = World(10)
    _blocked_head(w)
    w.submit(job("long", 3, 500.0, submit=2.0))
    assert started(w) == []


def test_conservative_protects_every_job_easy_only_the_head() -> None:
    def world(name: str) -> World:
        w = World(10, name)
        _blocked_head(w)
        w.submit(job("H2", 9, 300.0, submit=2.0), job("B", 2, 1000.0, submit=3.0))
        return w

    assert started(world("easy")) == ["B"], "B only uses EASY's extra nodes"
    assert started(world("conservative")) == [], "B would delay H2's reservation at t=200"


def test_conservative_backfills_what_fits_before_reservations() -> None:
    w = World(10, "conservative")
    _blocked_head(w)
    w.submit(job("short", 4, 90.0, submit=2.0), job("late", 1, 10.0, submit=3.0))
    assert started(w) == ["short"]


def test_wall_clock_is_a_resource() -> None:
    w = World(10, end=50.0)
    w.submit(job("too_long", 2, 60.0, submit=0.0), job("fits", 2, 40.0, submit=1.0))
    assert started(w) == ["fits"]


def test_hopeless_head_does_not_block() -> None:
    w = World(4)
    w.submit(job("huge", 5, submit=0.0), job("small", 2, submit=1.0))
    assert started(w) == ["small"]


def test_oracle_decides_on_true_runtimes() -> None:
    def world(oracle: bool) -> World:
        w = World(10, oracle=oracle)
        _blocked_head(w)
        w.submit(job("B", 4, 1000.0, runtime=50.0, submit=2.0))
        return w

    assert started(world(False)) == []
    assert started(world(True)) == ["B"]


def test_malleable_starts_at_the_largest_size_that_fits() -> None:
    w = World(10)
    w.run(job("A", 5), range(5))
    w.submit(job("m", 8, 100.0, kind=Kind.MALLEABLE, min_size=2))
    w.decide()
    assert len(w.holder("m").nodes) == 5


def test_malleable_backfill_shrinks_to_the_extra_nodes() -> None:
    w = World(10)
    _blocked_head(w)
    # 4 free: at 4 nodes it would end at t=400, after the shadow; so only the 2 extra nodes
    w.submit(job("m", 4, 200.0, kind=Kind.MALLEABLE, min_size=2, submit=2.0))
    w.decide()
    assert len(w.holder("m").nodes) == 2


def test_malleable_backfill_grows_to_end_before_the_shadow() -> None:
    w = World(10)
    _blocked_head(w)
    w.submit(job("m", 4, 90.0, kind=Kind.MALLEABLE, min_size=1, submit=2.0))
    w.decide()
    assert len(w.holder("m").nodes) == 4


def test_baselines_ignore_kinds() -> None:
    w = World(4)
    w.run(job("r", 4, 100.0), range(4))
    w.submit(job("o", 2, kind=Kind.ONDEMAND))
    assert w.decide().actions == ()


# --- the EASY guarantee, over random states ------------------------------------------------


def reference_shadow(total: int, running: list[tuple[float, int]], free: int, need: int) -> float:
    """Textbook shadow time, written independently: sort ends, add nodes until ``need`` fit."""
    if free >= need:
        return -math.inf
    for end, k in sorted(running):
        free += k
        if free >= need:
            return end
    return math.inf


_state = st.tuples(
    st.lists(st.tuples(st.integers(1, 8), st.integers(1, 300)), min_size=1, max_size=8),
    st.lists(st.tuples(st.integers(1, 12), st.integers(1, 400), st.booleans()), min_size=1,
             max_size=12),
)


@settings(max_examples=200, deadline=None)
@given(_state)
def test_easy_never_delays_the_head(state: tuple[list[tuple[int, int]], list]) -> None:
    running, queue = state
    total = 24
    w = World(total)
    node = 0
    for i, (k, wall) in enumerate(running):
        if node + k > total:
            break
        w.run(job(f"r{i}", k, float(wall)), range(node, node + k))
        node += k
    jobs: list[Job] = []
    for i, (k, wall, malleable) in enumerate(queue):
        kind = Kind.MALLEABLE if malleable else Kind.RIGID
        jobs.append(job(f"q{i}", k, float(wall), kind=kind, submit=float(i),
                        min_size=max(1, k // 3) if malleable else 0))
    w.submit(*jobs)
    w.now = 1.0

    def head_and_shadow() -> tuple[Job, float] | None:
        free = len(w.cluster.free)
        ends = [(max(r.end, w.now), len(r.nodes)) for r in w.cluster.running.values()]
        for j in sorted(w.waiting.values(), key=lambda j: j.submit):
            s = reference_shadow(total, ends, free, j.min_size)
            if s > -math.inf:
                return j, s
            return None  # the first waiting job fits: no head yet
        return None

    w.decide()
    after = head_and_shadow()
    if after is None:
        return
    head, shadow_after = after
    # rebuild the state before the decision for the same head
    w2 = World(total)
    node = 0
    for i, (k, wall) in enumerate(running):
        if node + k > total:
            break
        w2.run(job(f"r{i}", k, float(wall)), range(node, node + k))
        node += k
    started_ids = {a.job for a in w.decisions[0].actions}
    for j in jobs:
        if j.id in started_ids and j.submit < head.submit:
            r = w.cluster.running[j.id]
            w2.run(j, r.nodes, start=1.0)
    ends = [(max(r.end, 1.0), len(r.nodes)) for r in w2.cluster.running.values()]
    shadow_before = reference_shadow(total, ends, len(w2.cluster.free), head.min_size)
    assert shadow_after <= shadow_before


@settings(max_examples=100, deadline=None)
@given(_state)
def test_same_input_same_decision(state: tuple[list[tuple[int, int]], list]) -> None:
    running, queue = state
    decisions = []
    for name in ("easy", "conservative"):
        for _ in range(2):
            w = World(24, make_scheduler(name))
            node = 0
            for i, (k, wall) in enumerate(running):
                if node + k <= 24:
                    w.run(job(f"r{i}", k, float(wall)), range(node, node + k))
                    node += k
            w.submit(*[job(f"q{i}", k, float(wall), submit=float(i))
                       for i, (k, wall, _) in enumerate(queue)])
            snap = w.snapshot()
            first = w.scheduler.decide(snap)
            assert w.scheduler.decide(snap) == first
            decisions.append(first)
    assert decisions[0] == decisions[1] and decisions[2] == decisions[3]


def test_a_backfilling_decision_is_the_baselines_and_nothing_without_work() -> None:
    for depth, name in ((EASY, "easy"), (ALL, "conservative")):
        w = World(10)
        _blocked_head(w)
        assert decision(w.snapshot(), depth=depth, oracle=False) == \
            make_scheduler(name).decide(w.snapshot())
        w.submit(job("X", 2, 500.0, submit=2.0), job("Z", 2, 50.0, submit=4.0))
        made = decision(w.snapshot(), depth=depth, oracle=False)
        assert made == make_scheduler(name).decide(w.snapshot()) and made.actions
        assert decision(World(10).snapshot(), depth=depth, oracle=False) is NOTHING


def test_the_reservation_depth_protects_that_many_waiting_jobs() -> None:
    """10 nodes, A on 6 until t=100. H (8 nodes), H2 (9) and H3 (10), 100 s each, must wait:
    reserved from 100, 200 and 300. D (2 nodes, 250 s) fits EASY's 2 extra nodes but would
    delay H2 at t=200; C (1 node, 350 s) delays only H3 (the whole machine from t=300)."""
    w = World(10)
    _blocked_head(w)
    w.submit(job("H2", 9, 100.0, submit=2.0), job("H3", 10, 100.0, submit=3.0),
             job("D", 2, 250.0, submit=4.0), job("C", 1, 350.0, submit=5.0))

    def starts(depth: int) -> list[object]:
        return [a.job for a in decision(w.snapshot(), depth=depth, oracle=False).actions]

    assert starts(EASY) == ["D"], "EASY protects H alone: D takes its extra nodes"
    assert starts(2) == ["C"], "depth 2 protects H and H2, not H3"
    assert starts(3) == starts(ALL) == [], "every waiting job protected"


def test_a_job_the_machine_never_has_room_for_takes_one_of_the_reservations() -> None:
    """10 nodes, 2 held for a notice, A on 6 until t=100. H (7 nodes) is reserved from 100;
    B (9 nodes) can never have room while the notice holds its 2, yet it waits and counts as
    the second reservation of depth 2 (nothing held for it). So H3 (8 nodes) gets none, and C
    (1 node, 350 s), which would delay only H3, starts now; with depth 3 H3 is protected."""
    w = World(10)
    w.notice("n", 2, arrival=5000.0)
    w.cluster.reserve("n", (8, 9))
    w.run(job("A", 6, 100.0), range(6))
    w.submit(job("H", 7, 100.0, submit=1.0), job("B", 9, 100.0, submit=2.0),
             job("H3", 8, 100.0, submit=3.0), job("C", 1, 350.0, submit=4.0))

    def starts(depth: int) -> list[object]:
        return [a.job for a in decision(w.snapshot(), depth=depth, oracle=False).actions]

    assert starts(2) == ["C"]
    assert starts(3) == []


@pytest.mark.parametrize("shape", [None, NodeShape(4)])
@pytest.mark.parametrize("name", ["easy", "conservative"])
def test_a_head_that_cannot_end_by_the_allocations_end_blocks_nothing(
        name: str, shape: NodeShape | None) -> None:
    """The allocation ends at t=150. H (8 nodes, 100 s) could start at its shadow time 100
    at the earliest and would end at 200: it cannot run here, so it is skipped like a job too
    long for the time left, and the short job Z behind it (a share of one core on a cluster of
    shared nodes) starts on a free node; the next one that must wait (G, 9 nodes from t=100)
    is then EASY's head and is protected: Y would hold 2 nodes past t=100, where only 1 is
    left over. (EASY with shares used to stop at H and start nothing.)"""
    c = Cluster(10, shape=shape)
    c.start(job("A", 6, 100.0), tuple(range(6)), now=0.0)
    z = Job("Z", Kind.RIGID, 1, 50.0, 3.0, cores=1) if shape else job("Z", 2, 50.0, submit=3.0)
    queue = [job("H", 8, 100.0, submit=1.0), job("G", 9, 40.0, submit=2.0), z,
             job("Y", 2, 120.0, submit=4.0)]
    d = make_scheduler(name).decide(c.snapshot(now=0.0, waiting=queue, end=150.0))
    assert [a.job for a in d.actions] == ["Z"]


@pytest.mark.parametrize("name", ["easy", "conservative"])
def test_a_malleable_job_starts_at_no_size_that_would_run_past_the_end(name: str) -> None:
    """A malleable job of 4 nodes and 60 s ends by the allocation's end (t=100) at full size,
    but only 2 nodes are free, on which it needs 120 s, and at any smaller size longer still:
    it must not start now."""
    w = World(4, name, end=100.0)
    w.run(job("A", 2, 1000.0), range(2))
    w.submit(job("M", 4, 60.0, kind=Kind.MALLEABLE, min_size=1, submit=1.0))
    assert started(w) == []


def test_a_job_too_long_for_the_time_left_is_no_head() -> None:
    """4 nodes, 2 of them held for a notice, A on node 0 until 50, node 1 free; the
    allocation ends at 100. L (3 nodes, 200 s) can never run here: it is skipped, even though
    the free nodes could never make its 3 either. H (2 nodes, 40 s) is the head: it starts at
    50 on nodes 0 and 1 and ends by 90, so X (1 node, 80 s), which would hold node 1 until 80,
    must not start now."""
    w = World(4, "easy", end=100.0)
    w.run(job("A", 1, 50.0), [0])
    w.notice("n1", 2, arrival=500.0)
    w.cluster.reserve("n1", (2, 3))
    w.submit(job("L", 3, 200.0, submit=1.0), job("H", 2, 40.0, submit=2.0),
             job("X", 1, 80.0, submit=3.0))
    assert started(w) == []
    w.now = 50.0
    w.finish("A")
    assert started(w) == ["H"]
