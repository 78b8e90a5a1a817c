"""Shares of a node: the Cluster's books of cores and GPUs, EASY and conservative backfilling
with shares beside whole-node jobs, and the on-demand layer on shared nodes."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metaq_py.cluster import Cluster, ClusterError
from metaq_py.policy import Job, Notice, Preempt, Start, make_scheduler
from metaq_py.policy.checkpoint import resumed
from metaq_py.policy.model import Kind
from metaq_py.policy.shares import NodeShape

SHAPE = NodeShape(cores=4, gpus=2)


def share(jid: str, cores: int, gpus: int = 0, walltime: float = 100.0, *,
          submit: float = 0.0, runtime: float | None = None) -> Job:
    return Job(jid, Kind.RIGID, 1, walltime, submit, runtime=runtime, cores=cores, gpus=gpus)


def whole(jid: str, size: int, walltime: float = 100.0, *, submit: float = 0.0,
          kind: Kind = Kind.RIGID, notice: str | None = None) -> Job:
    return Job(jid, kind, size, walltime, submit, notice=notice)


class Driver:
    """Decide, apply, move to the next end, finish what ended; requeue what was preempted."""

    def __init__(self, nodes: int, shape: NodeShape, policy: str = "easy") -> None:
        self.cluster = Cluster(nodes, shape=shape)
        self.scheduler = make_scheduler(policy)
        self.waiting: dict[object, Job] = {}
        self.now = 0.0
        self.starts: dict[object, list[float]] = {}
        self.preempted: list[object] = []
        self.wake: float | None = None

    def submit(self, *jobs: Job) -> None:
        for j in jobs:
            self.waiting[j.id] = j

    def decide(self) -> list[object]:
        snap = self.cluster.snapshot(now=self.now, waiting=list(self.waiting.values()))
        decision = self.scheduler.decide(snap)
        self.wake = decision.wake
        actions = list(decision.actions)
        for a in actions:
            j = self.waiting.get(a.job) if isinstance(a, Start) else None
            effect = self.cluster.apply(a, now=self.now, job=j)
            if isinstance(a, Start):
                del self.waiting[a.job]
                self.starts.setdefault(a.job, []).append(self.now)
            elif isinstance(a, Preempt):
                assert effect is not None
                self.preempted.append(a.job)
                self.waiting[a.job] = resumed(effect, self.now)
            self.cluster.check()
            assert_disjoint(self.cluster)
        return actions

    def step(self) -> bool:
        """Move to the next end (or the wake time the last decision asked for) and finish what
        ended then; False when nothing runs and no wake time is asked for."""
        running = self.cluster.running
        ends = [r.end for r in running.values()]
        if self.wake is not None and self.wake > self.now:
            ends.append(self.wake)
        if not ends:
            return False
        self.now = min(ends)
        for jid in [j for j, r in running.items() if r.end <= self.now]:
            self.cluster.finish(jid, now=self.now)
            self.cluster.check()
        return True

    def run(self, limit: int = 10_000) -> None:
        for _ in range(limit):
            self.decide()
            if not self.step():
                return
        raise AssertionError("the run did not end")


def assert_disjoint(c: Cluster) -> None:
    """No core and no GPU of any node is given to two running shares, and no whole-node job
    holds a node a share runs on: checked here from the placements, not by Cluster.check."""
    given: set[tuple[int, str, int]] = set()
    whole_nodes = {n for r in c.running.values() if not r.job.cores for n in r.nodes}
    for jid, p in c.placements.items():
        r = c.running[jid]
        assert p.node == r.nodes[0] and p.node not in whole_nodes and p.node not in c.free
        assert (len(p.cores), len(p.gpus)) == (r.job.cores, r.job.gpus)
        for kind, ids, most in (("core", p.cores, SHAPE.cores), ("gpu", p.gpus, SHAPE.gpus)):
            for i in ids:
                assert 0 <= i < most
                assert (p.node, kind, i) not in given, f"{kind} {i} of node {p.node} twice"
                given.add((p.node, kind, i))


# --- the Cluster ---------------------------------------------------------------------------


def test_shares_fill_a_node_with_distinct_cores_and_gpus() -> None:
    c = Cluster(2, shape=SHAPE)
    c.start(share("a", 1, 1), (0,), now=0.0)
    c.start(share("b", 1, 1), (0,), now=0.0)
    c.start(share("c", 2), (0,), now=0.0)
    p = c.placements
    assert (p["a"].cores, p["a"].gpus) == ((0,), (0,))
    assert (p["b"].cores, p["b"].gpus) == ((1,), (1,))
    assert p["c"].cores == (2, 3) and p["c"].gpus == ()
    assert set(c.free) == {1}
    assert c.shares is not None and 0 not in c.shares.open  # every core is given
    assert not c.ending, "a share alone frees no node: it is not in the end order"
    c.check()


def test_the_node_is_free_again_only_when_its_last_share_ends() -> None:
    c = Cluster(2, shape=SHAPE)
    c.start(share("a", 1, 1), (1,), now=0.0)
    c.start(share("b", 3, 1), (1,), now=0.0)
    c.finish("a", now=5.0)
    assert set(c.free) == {0}
    c.start(share("d", 1), (1,), now=5.0)  # a's core is free again, and goes to d
    assert c.placements["d"].cores == (0,)
    c.finish("b", now=6.0)
    c.preempt("d", now=7.0)
    assert set(c.free) == {0, 1} and c.shares is not None and not c.shares.loads
    c.check()


@pytest.mark.parametrize(("jobs", "nodes", "words"), [
    ([share("a", 5)], (0,), "more than a node has"),
    ([share("a", 1, 3)], (0,), "more than a node has"),
    ([share("a", 1), share("b", 1)], (0, 1), "one node"),
    ([share("a", 2, 1), share("b", 3)], (0,), "node 0 has 2 cores, 1 GPUs"),
    ([whole("w", 1), share("b", 1)], (0,), "neither free nor shared"),
])
def test_refused_shares_say_why(jobs: list[Job], nodes: tuple[int, ...], words: str) -> None:
    c = Cluster(2, shape=SHAPE)
    for j in jobs[:-1]:
        c.start(j, (0,), now=0.0)
    with pytest.raises(ClusterError, match=words):
        c.start(jobs[-1], nodes, now=0.0)
    c.check()


def test_a_whole_node_job_cannot_take_a_shared_node() -> None:
    c = Cluster(2, shape=SHAPE)
    c.start(share("a", 1), (0,), now=0.0)
    with pytest.raises(ClusterError, match="not free"):
        c.start(whole("w", 2), (0, 1), now=0.0)


def test_a_cluster_without_a_node_shape_runs_no_share() -> None:
    with pytest.raises(ClusterError, match="does not know its nodes' cores"):
        Cluster(2).start(share("a", 1), (0,), now=0.0)


def test_cores_kept_for_gpus_limit_cpu_only_shares() -> None:
    shape = NodeShape(cores=8, gpus=2, cores_per_gpu=3)  # 2 cores for CPU-only work
    c = Cluster(1, shape=shape)
    c.start(share("cpu", 2), (0,), now=0.0)
    with pytest.raises(ClusterError, match="free for it"):
        c.start(share("cpu2", 1), (0,), now=0.0)
    c.start(share("gpu", 6, 2), (0,), now=0.0)  # a GPU share may use the cores kept back
    c.check()


def test_a_share_is_a_rigid_job_on_one_node() -> None:
    with pytest.raises(ValueError, match="rigid job on one node"):
        Job("x", Kind.RIGID, 2, 10.0, 0.0, cores=1)
    with pytest.raises(ValueError, match="rigid job on one node"):
        Job("x", Kind.ONDEMAND, 1, 10.0, 0.0, cores=1)


# --- backfilling ---------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["easy", "conservative", "CUA&PAA"])
def test_four_one_gpu_shares_run_at_once_on_two_nodes(policy: str) -> None:
    d = Driver(2, SHAPE, policy)
    d.submit(*[share(f"s{i}", 1, 1, submit=float(i)) for i in range(4)])
    d.decide()
    assert not d.waiting
    placed = {(p.node, p.gpus) for p in d.cluster.placements.values()}
    assert placed == {(0, (0,)), (0, (1,)), (1, (0,)), (1, (1,))}


def test_a_whole_node_job_waits_for_whole_free_nodes() -> None:
    d = Driver(2, SHAPE)
    d.submit(share("s", 1, 0, 50.0), whole("w", 2, 10.0, submit=1.0))
    d.decide()
    assert set(d.cluster.running) == {"s"}
    d.step()
    d.decide()
    assert set(d.cluster.running) == {"w"} and d.starts["w"] == [50.0]


def test_easy_backfills_shares_without_delaying_the_head() -> None:
    """A whole-node head needs both nodes; node 0 is shared until 50. A short share may join
    node 0 (it ends before 50), a long share must not (it would hold node 0 past the head's
    shadow time), and on the full node 1 nothing more fits."""
    d = Driver(2, SHAPE)
    d.cluster.start(share("a", 1, walltime=50.0), (0,), now=0.0)
    d.cluster.start(whole("b", 1, walltime=50.0), (1,), now=0.0)
    d.submit(whole("head", 2, 10.0, submit=1.0), share("long", 1, walltime=500.0, submit=2.0),
             share("short", 1, walltime=30.0, submit=3.0))
    d.decide()
    assert "short" in d.cluster.running and "long" not in d.cluster.running
    d.run()
    assert d.starts["head"] == [50.0], "the head starts at its shadow time"
    assert d.starts["long"] == [60.0]


def test_a_share_joins_a_node_that_stays_busy_past_the_shadow_time() -> None:
    """Node 0 is shared until 500, past the head's shadow time at 50: a long share joining it
    delays nobody."""
    d = Driver(2, SHAPE)
    d.cluster.start(share("a", 1, walltime=500.0), (0,), now=0.0)
    d.cluster.start(whole("b", 1, walltime=50.0), (1,), now=0.0)
    d.submit(whole("head", 1, 10.0, submit=1.0), share("long", 1, walltime=400.0, submit=2.0))
    d.decide()
    assert d.cluster.placements["long"].node == 0


def test_conservative_never_lets_a_share_hold_a_node_past_its_expected_end() -> None:
    d = Driver(2, SHAPE, "conservative")
    d.cluster.start(share("a", 1, walltime=50.0), (0,), now=0.0)
    d.cluster.start(whole("b", 1, walltime=50.0), (1,), now=0.0)
    d.submit(whole("head", 2, 10.0, submit=1.0), share("long", 1, walltime=500.0, submit=2.0),
             share("short", 1, walltime=30.0, submit=3.0))
    d.decide()
    assert set(d.cluster.running) == {"a", "b", "short"}


# --- the on-demand layer -------------------------------------------------------------------


def test_paa_preempts_a_shared_node_whole_and_each_share_resumes_once() -> None:
    d = Driver(2, SHAPE, "N&PAA")
    d.cluster.start(whole("big", 1, walltime=1000.0), (1,), now=0.0)
    for i in range(3):
        d.cluster.start(share(f"s{i}", 1, walltime=100.0), (0,), now=0.0)
    d.now = 10.0
    d.submit(whole("od", 1, 20.0, kind=Kind.ONDEMAND, submit=10.0))
    d.decide()
    assert sorted(map(str, d.preempted)) == ["s0", "s1", "s2"], "the cheapest node: the shares"
    assert d.cluster.running["od"].nodes == (0,)
    d.run()
    assert all(len(d.starts[f"s{i}"]) == 1 for i in range(3)), "each resumes exactly once"
    assert not d.waiting and not d.cluster.running


def test_cua_collects_a_shared_node_only_when_its_shares_have_ended() -> None:
    d = Driver(2, SHAPE, "CUA&PAA")
    d.cluster.start(share("s0", 1, walltime=100.0), (0,), now=0.0)
    d.cluster.start(share("s1", 2, walltime=40.0), (0,), now=0.0)
    d.cluster.add_notice(Notice("n", 2, arrival=500.0, walltime=50.0, issued=0.0))
    d.decide()
    assert set(d.cluster.reserved["n"]) == {1}
    d.step()  # s1 ends at 40: node 0 still has s0
    d.decide()
    assert set(d.cluster.reserved["n"]) == {1}
    d.step()  # s0 ends at 100: the node is collected
    d.decide()
    assert set(d.cluster.reserved["n"]) == {0, 1}


# --- invariants over random mixes ----------------------------------------------------------

_jobs = st.lists(
    st.one_of(
        st.tuples(st.just("share"), st.integers(1, 4), st.integers(0, 2),
                  st.integers(1, 300)),
        st.tuples(st.just("whole"), st.integers(1, 3), st.just(0), st.integers(1, 300)),
        st.tuples(st.just("ondemand"), st.integers(1, 2), st.just(0), st.integers(1, 100)),
    ),
    min_size=1, max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["easy", "conservative", "N&PAA", "CUA&SPAA", "CUP&PAA"]), _jobs,
       st.integers(0, 3))
def test_no_core_or_gpu_is_given_twice_and_nothing_is_lost(policy: str, spec: list,
                                                            reserve: int) -> None:
    d = Driver(3, SHAPE, policy)
    if reserve and "&" in policy:
        d.cluster.add_notice(Notice("n", reserve, arrival=200.0, walltime=50.0, issued=0.0))
    jobs = []
    for i, (what, a, b, t) in enumerate(spec):
        if what == "share":
            jobs.append(share(f"j{i}", a, b, float(t), submit=float(i)))
        elif what == "whole":
            jobs.append(whole(f"j{i}", a, float(t), submit=float(i)))
        elif "&" in policy:
            jobs.append(whole(f"j{i}", a, float(t), submit=float(i), kind=Kind.ONDEMAND))
    d.submit(*jobs)
    d.run()
    assert not d.waiting, "every job ran"
    assert not d.cluster.running and not d.cluster.placements
    assert len(d.cluster.free) + sum(len(p) for p in d.cluster.reserved.values()) == 3
    assert d.cluster.shares is not None and not d.cluster.shares.loads
    assert set(d.starts) == {j.id for j in jobs}
    assert all(math.isfinite(t) for ts in d.starts.values() for t in ts)


def test_a_node_this_decision_fills_is_no_longer_open() -> None:
    from metaq_py.policy.shares import ShareRoom

    c = Cluster(3, shape=SHAPE)
    c.start(share("a", 3), (0,), now=0.0)
    c.start(Job("w", Kind.RIGID, 1, 100.0, 0.0), (1,), now=0.0)
    assert c.shares is not None
    room = ShareRoom(c.shares, oracle=False)
    assert room.any_open(), "node 0 has a free core"
    room.take(0, 1, 0, 50.0)
    assert not room.any_open(), "its last core went to this decision's start"
    assert room.join(1, 0, 10.0, shadow=math.inf) is None
    room.open_node(2)  # the free node
    assert room.any_open()
    room.take(2, 4, 2, 50.0)
    assert not room.any_open()


@pytest.mark.parametrize("policy", ["easy", "conservative"])
def test_a_gpu_share_joins_where_a_cpu_only_share_found_no_room(policy: str) -> None:
    """Node 0 keeps 2 of its 4 cores for its GPU, and a CPU-only share holds the other 2: a
    CPU-only share of 1 core finds no room, but a share of 1 core and the GPU does (cores kept
    for GPUs are free to GPU shares), though it comes after the refused one in the queue."""
    shape = NodeShape(cores=4, gpus=1, cores_per_gpu=2)
    d = Driver(1, shape, policy)
    d.cluster.start(share("cpu", 2, walltime=100.0), (0,), now=0.0)
    d.submit(share("more_cpu", 1, walltime=50.0, submit=1.0),
             share("gpu", 1, 1, walltime=50.0, submit=2.0))
    d.decide()
    assert set(d.cluster.running) == {"cpu", "gpu"}


def test_a_share_takes_cores_next_to_its_gpu_where_the_shape_says_which_are() -> None:
    """GPU 0 is next to cores 0 and 1, GPU 1 next to cores 2 and 3: a GPU share takes its GPU's
    cores, and a CPU-only share a core next to no free GPU (core 1, by the busy GPU 0) before
    one that a later GPU share would want."""
    c = Cluster(1, shape=NodeShape(cores=4, gpus=2, near=((0, 1), (2, 3))))
    c.start(share("g0", 1, 1), (0,), now=0.0)
    c.start(share("cpu", 1), (0,), now=0.0)
    c.start(share("g1", 2, 1), (0,), now=0.0)
    p = c.placements
    assert (p["g0"].cores, p["g0"].gpus) == ((0,), (0,))
    assert p["cpu"].cores == (1,)
    assert (p["g1"].cores, p["g1"].gpus) == ((2, 3), (1,))
    c.check()


def test_cores_next_to_a_gpu_the_shape_does_not_name_are_any_free_ones() -> None:
    """Only GPU 0's cores are known (core 0): a share on GPU 1 takes the lowest free core."""
    c = Cluster(1, shape=NodeShape(cores=4, gpus=2, near=((0,),)))
    c.start(share("g0", 1, 1), (0,), now=0.0)
    c.start(share("g1", 1, 1), (0,), now=0.0)
    p = c.placements
    assert (p["g0"].cores, p["g0"].gpus) == ((0,), (0,))
    assert (p["g1"].cores, p["g1"].gpus) == ((1,), (1,))


def test_a_one_gpu_share_may_use_the_cores_kept_for_gpus() -> None:
    """8 cores, 2 GPUs, 3 cores kept per GPU: CPU-only shares may use 2 cores together. Once
    they do, a share of 5 cores and one GPU still fits (5 cores are free)."""
    c = Cluster(1, shape=NodeShape(cores=8, gpus=2, cores_per_gpu=3))
    c.start(share("cpu", 2), (0,), now=0.0)
    c.start(share("gpu", 5, 1), (0,), now=0.0)
    c.check()


def test_a_share_with_no_room_and_no_free_node_is_easys_head() -> None:
    """Node 0 runs a whole-node job until 100; node 1 is shared, 3 of its 4 cores held until
    50. S (2 cores) finds no room and no free node: it heads the queue, and waits for node 1
    at 50. S2 (1 core, 200 s) would hold node 1 past 50: it must not join."""
    d = Driver(2, NodeShape(cores=4))
    d.cluster.start(whole("W", 1, walltime=100.0), (0,), now=0.0)
    d.cluster.start(share("A", 3, walltime=50.0), (1,), now=0.0)
    d.submit(share("S", 2, walltime=10.0, submit=1.0),
             share("S2", 1, walltime=200.0, submit=2.0))
    d.decide()
    assert set(d.cluster.running) == {"W", "A"}
    d.run()
    assert d.starts["S"] == [50.0]


def test_a_share_that_leaves_its_node_by_the_shadow_time_uses_no_extra_node() -> None:
    """4 nodes, W on 2 of them until 100: head H (3 nodes) starts at 100 with one node to
    spare. S opens a free node and leaves it exactly at 100, so X (1 node, 500 s) may still
    take the spare node."""
    d = Driver(4, NodeShape(cores=4))
    d.cluster.start(whole("W", 2, walltime=100.0), (0, 1), now=0.0)
    d.submit(whole("H", 3, 10.0, submit=1.0), share("S", 1, walltime=100.0, submit=2.0),
             whole("X", 1, 500.0, submit=3.0))
    d.decide()
    assert set(d.cluster.running) == {"W", "S", "X"}
    d.run()
    assert d.starts["H"] == [100.0]
