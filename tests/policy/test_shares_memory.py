"""Shares of a node packed by memory (``MEM``) beside cores and GPUs: the Cluster's books, the
schedulers' starts, and the invariant that no node ever gives its shares more memory than it
has. Shares that do not say their memory count for none, as before."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metaq_py.cluster import Cluster, ClusterError
from metaq_py.policy import Job, Notice
from metaq_py.policy.model import Kind
from metaq_py.policy.shares import NodeShape, ShareRoom
from tests.policy.test_shares import Driver, whole

GIB = 1 << 30
MEMSHAPE = NodeShape(cores=4, gpus=2, mem=16 * GIB)


def share(jid: str, cores: int, mem: int, gpus: int = 0, walltime: float = 100.0, *,
          submit: float = 0.0) -> Job:
    return Job(jid, Kind.RIGID, 1, walltime, submit, cores=cores, gpus=gpus, mem=mem)


def mem_given(c: Cluster) -> dict[int, int]:
    """Each shared node's memory given to its shares, from the placements (not from the
    Cluster's own counts, which Cluster.check compares with these)."""
    out: dict[int, int] = {}
    for jid, p in c.placements.items():
        assert p.mem == c.running[jid].job.mem
        out[p.node] = out.get(p.node, 0) + p.mem
    return out


def test_a_share_joins_a_node_only_where_its_memory_is_free() -> None:
    c = Cluster(2, shape=MEMSHAPE)
    c.start(share("a", 1, 10 * GIB), (0,), now=0.0)
    with pytest.raises(ClusterError, match=r"node 0 has 3 cores, 2 GPUs and 6442450944 bytes"):
        c.start(share("b", 1, 8 * GIB), (0,), now=0.0)
    c.start(share("b", 1, 6 * GIB), (0,), now=0.0)  # exactly what is left
    assert c.shares is not None and c.shares.loads[0].mem_room == 0
    c.start(share("c", 1, 0), (0,), now=0.0)  # says no memory: counts for none, as before
    c.check()
    c.finish("a", now=1.0)
    assert c.shares.loads[0].mem_room == 10 * GIB
    c.start(share("d", 1, 8 * GIB), (0,), now=1.0)
    c.check()
    assert mem_given(c) == {0: 14 * GIB}


def test_a_share_larger_than_a_node_is_refused_even_on_a_free_node() -> None:
    c = Cluster(1, shape=MEMSHAPE)
    with pytest.raises(ClusterError, match="more than a node has"):
        c.start(share("a", 1, 17 * GIB), (0,), now=0.0)
    assert set(c.free) == {0}


def test_memory_not_known_is_not_counted_until_it_is() -> None:
    c = Cluster(1, shape=NodeShape(cores=4))
    c.start(share("a", 1, 10 * GIB), (0,), now=0.0)
    c.start(share("b", 1, 10 * GIB), (0,), now=0.0)  # unknown memory: both fit
    with pytest.raises(ClusterError, match="more than the 17179869184 it has"):
        c.know_memory(16 * GIB)  # they hold 20 GiB: the books cannot say 16
    c.finish("b", now=1.0)
    c.know_memory(16 * GIB)
    assert c.shares is not None and c.shares.loads[0].mem_room == 6 * GIB
    with pytest.raises(ClusterError, match="bytes free for it"):
        c.start(share("c", 1, 7 * GIB), (0,), now=1.0)
    c.start(share("c", 1, 6 * GIB), (0,), now=1.0)
    c.check()


@pytest.mark.parametrize("policy", ["easy", "conservative", "CUA&SPAA"])
def test_four_shares_of_6g_take_two_16g_nodes_two_by_two(policy: str) -> None:
    """Cores would let all four run on one node; memory allows two per node."""
    d = Driver(2, MEMSHAPE, policy)
    d.submit(*(share(f"s{i}", 1, 6 * GIB, submit=float(i)) for i in range(4)))
    d.decide()
    assert set(d.starts) == {"s0", "s1", "s2", "s3"}
    nodes = mem_given(d.cluster)
    assert nodes == {0: 12 * GIB, 1: 12 * GIB}


@pytest.mark.parametrize("policy", ["easy", "conservative"])
def test_shares_wait_for_memory_and_run_when_it_frees(policy: str) -> None:
    d = Driver(1, MEMSHAPE, policy)
    d.submit(share("big", 1, 12 * GIB, walltime=50.0),
             share("s1", 1, 6 * GIB, submit=1.0),
             share("s2", 1, 3 * GIB, walltime=40.0, submit=2.0))
    d.decide()
    assert set(d.starts) == {"big", "s2"}, "s1 waits: 4 GiB left; s2's 3 GiB fit beside"
    d.run()
    assert d.starts["s1"] == [50.0]


def test_shares_without_mem_keep_filling_cores_beside_a_node_full_of_memory() -> None:
    d = Driver(1, MEMSHAPE)
    d.submit(share("m", 1, 16 * GIB), share("a", 1, 0, submit=1.0),
             share("b", 2, 0, submit=2.0))
    d.decide()
    assert set(d.starts) == {"m", "a", "b"}


def test_a_room_remembers_memory_no_node_had() -> None:
    c = Cluster(2, shape=MEMSHAPE)
    c.start(share("a", 1, 12 * GIB), (0,), now=0.0)
    c.start(Job("w", Kind.RIGID, 1, 100.0, 0.0), (1,), now=0.0)
    assert c.shares is not None
    room = ShareRoom(c.shares, oracle=False)
    assert room.join(1, 0, 10.0, shadow=math.inf, mem=5 * GIB) is None
    assert room.join(1, 0, 10.0, shadow=math.inf, mem=6 * GIB) is None  # remembered as full
    assert room.join(1, 0, 10.0, shadow=math.inf, mem=4 * GIB) == 0
    room.take(0, 1, 0, 10.0, 4 * GIB)
    assert room.join(1, 0, 10.0, shadow=math.inf, mem=1) is None, "this decision took the rest"
    assert room.join(1, 0, 10.0, shadow=math.inf) == 0, "a share without MEM still fits"


# --- invariants over random mixes ----------------------------------------------------------

_jobs = st.lists(
    st.one_of(
        st.tuples(st.just("share"), st.integers(1, 4), st.integers(0, 2), st.integers(1, 300),
                  st.sampled_from([0, 1, 3, 4, 6, 8, 10, 16])),
        st.tuples(st.just("whole"), st.integers(1, 3), st.just(0), st.integers(1, 300),
                  st.just(0)),
        st.tuples(st.just("ondemand"), st.integers(1, 2), st.just(0), st.integers(1, 100),
                  st.just(0)),
    ),
    min_size=1, max_size=30,
)


class MemDriver(Driver):
    """The driver of test_shares, checking after every action that no node gave its shares
    more memory than it has."""

    def decide(self) -> list[object]:
        actions = super().decide()
        for node, held in mem_given(self.cluster).items():
            assert held <= MEMSHAPE.mem, f"node {node} gave {held} bytes of {MEMSHAPE.mem}"
        return actions


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["easy", "conservative", "N&PAA", "CUA&SPAA", "CUP&PAA"]), _jobs,
       st.integers(0, 3))
def test_no_node_gives_more_memory_than_it_has_and_every_job_runs(policy: str, spec: list,
                                                                  reserve: int) -> None:
    d = MemDriver(3, MEMSHAPE, policy)
    if reserve and "&" in policy:
        d.cluster.add_notice(Notice("n", reserve, arrival=200.0, walltime=50.0, issued=0.0))
    jobs = []
    for i, (what, a, b, t, gib) in enumerate(spec):
        if what == "share":
            jobs.append(share(f"j{i}", a, gib * GIB, b, float(t), submit=float(i)))
        elif what == "whole":
            jobs.append(whole(f"j{i}", a, float(t), submit=float(i)))
        elif "&" in policy:
            jobs.append(whole(f"j{i}", a, float(t), submit=float(i), kind=Kind.ONDEMAND))
    d.submit(*jobs)
    d.run()
    assert not d.waiting, "every job ran: each fits a node alone"
    assert d.cluster.shares is not None and not d.cluster.shares.loads
    assert set(d.starts) == {j.id for j in jobs}


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.sampled_from([0, 2, 5, 7, 9, 16])),
                min_size=1, max_size=12))
def test_one_decision_never_overcommits_a_node(spec: list[tuple[int, int]]) -> None:
    """Everything submitted at once on one node: the decision's starts fit its memory, and
    a share is left waiting only when the memory or the cores it needs are taken."""
    d = MemDriver(1, MEMSHAPE, "easy")
    d.submit(*(share(f"s{i}", c, g * GIB, submit=float(i)) for i, (c, g) in enumerate(spec)))
    d.decide()
    held = mem_given(d.cluster).get(0, 0)
    cores = sum(len(p.cores) for p in d.cluster.placements.values())
    for job in d.waiting.values():
        assert job.mem > MEMSHAPE.mem - held or job.cores > 4 - cores
