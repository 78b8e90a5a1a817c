"""A charge per shrink and expand (``--set resize_cost=setup``): each resize costs a malleable
job its setup again, at its new size, on hand-made workloads whose answers are worked out by
hand, and on a synthetic trace."""

from __future__ import annotations

from dataclasses import replace

import pytest

from metaq_py.cluster import Cluster
from metaq_py.policy.model import Job, Kind
from sim.engine.arrivals import feed
from sim.engine.core import simulate
from sim.engine.failures import FailureModel, NodeFailures
from sim.trace.synthetic import synthetic_trace
from sim.workload.model import HybridWorkload, WorkloadModel, hybrid_workload
from tests.sim.engine.test_failures import failing_node
from tests.sim_worlds import Row, tiny_hybrid

MALLEABLE = Kind.MALLEABLE


def shrunk_for_ondemand(cost: str) -> HybridWorkload:
    """4 nodes. M (4 nodes, 100 s, minimum 1, setup 10 s) runs from 0; the on-demand O (2
    nodes, 10 s) arrives at 50, and SPAA shrinks M to 2 nodes until O ends at 60."""
    rows = [Row(submit=0, size=4, walltime=100, runtime=100, kind=MALLEABLE, min_size=1,
                setup=10),
            Row(submit=50, size=2, walltime=10, runtime=10, kind=Kind.ONDEMAND)]
    return replace(tiny_hybrid(rows, nodes=4),
                   model=WorkloadModel(resize_cost=cost))  # type: ignore[arg-type]


def test_a_shrink_and_its_expand_each_cost_the_setup_at_the_new_size() -> None:
    # free: at 50, 50 s left at 4 nodes is 100 s at 2; at 60, 90 s at 2 is 45 s at 4: ends 105
    m, o = simulate(shrunk_for_ondemand("none"), policy="N&SPAA").outcomes
    assert (o.start, o.end, m.shrinks, m.end, m.lost_node_seconds) == (50, 60, 1, 105, 0)
    # charged: the shrink adds 10 * 4 / 2 = 20 s at 2 nodes (M ends at 170 on 2 nodes); at
    # 60, 110 s at 2 nodes is 55 s at 4, plus 10 s: ends 125, and each resize loses the
    # setup's 40 node-seconds (20 s x 2 nodes, 10 s x 4)
    m, o = simulate(shrunk_for_ondemand("setup"), policy="N&SPAA").outcomes
    assert (o.start, o.end, m.shrinks, m.end, m.lost_node_seconds) == (50, 60, 1, 125, 80)
    assert m.useful_node_seconds == 400
    # fixed: the shrink adds 10 s (M ends at 160 on 2 nodes); at 60, 100 s at 2 nodes is 50 s
    # at 4, plus 10 s: ends 120, losing 10 s x 2 nodes and 10 s x 4
    m, o = simulate(shrunk_for_ondemand("setup-fixed"), policy="N&SPAA").outcomes
    assert (o.start, o.end, m.shrinks, m.end, m.lost_node_seconds) == (50, 60, 1, 120, 60)


def test_the_charge_goes_to_malleable_jobs_only_and_the_engine_sees_the_same_jobs() -> None:
    trace = synthetic_trace(jobs=400, seed=3, nodes=256)
    charged = hybrid_workload(trace, WorkloadModel(seed=1, resize_cost="setup"))
    free = hybrid_workload(trace, WorkloadModel(seed=1))
    views = list(charged)
    assert [v.resize_cost for v in views] == [
        v.setup if v.kind is MALLEABLE else 0.0 for v in views]
    assert not any(v.resize_fixed for v in views)
    assert any(v.resize_cost > 0 for v in views)
    assert all(v.resize_cost == 0 for v in free)
    assert list(feed(charged).jobs()) == [v.to_job() for v in views]
    assert [charged.job(i) for i in range(len(charged))] == views
    fixed = hybrid_workload(trace, WorkloadModel(seed=1, resize_cost="setup-fixed"))
    views = list(fixed)
    assert [(v.resize_cost, v.resize_fixed) for v in views] == [
        (v.resize_cost, True) for v in list(charged)]
    assert list(feed(fixed).jobs()) == [v.to_job() for v in views]


def test_each_resize_of_a_job_never_preempted_loses_its_setup_at_full_size() -> None:
    # under linear speedup a resize to k nodes costs setup * size / k seconds on k nodes, so
    # setup * size node-seconds whatever k; every shrink lends to one on-demand job, and the
    # nodes come back in at most one expand, so such a job lost n of them, n between its
    # shrinks and twice its shrinks (and nothing when resizing is free)
    trace = synthetic_trace(jobs=600, seed=5, nodes=256)
    runs = {cost: hybrid_workload(trace, WorkloadModel(seed=2, resize_cost=cost))
            for cost in ("none", "setup")}
    jobs = {v.id: v for v in runs["setup"]}
    free = simulate(runs["none"], policy="CUA&SPAA").outcomes
    charged = simulate(runs["setup"], policy="CUA&SPAA").outcomes
    kept = [o for o in free if o.kind is MALLEABLE and not o.preemptions]
    assert any(o.shrinks for o in kept) and all(o.lost_node_seconds == 0 for o in kept)
    seen = 0
    for o in charged:
        j = jobs[o.id]
        if o.kind is not MALLEABLE or o.preemptions or not j.setup:
            continue
        n = o.lost_node_seconds / (j.setup * j.size)
        assert n == pytest.approx(round(n), abs=1e-6)
        assert o.shrinks <= round(n) <= 2 * o.shrinks
        seen += o.shrinks
    assert seen, "the case needs a charged shrink to test anything"


def test_a_failure_that_kills_a_borrower_charges_its_lender_nothing() -> None:
    # the failed node, lent and owed back when its on-demand borrower dies, is taken back
    # from the lender's debt: the lender keeps its end (an expand and a shrink would charge
    # it twice)
    cluster = Cluster(4)
    lender = Job(10, MALLEABLE, 4, 1000.0, 0.0, 1, runtime=1000.0, setup=50.0,
                 resize_cost=50.0)
    cluster.start(lender, (0, 1, 2, 3), now=0.0)
    node = failing_node(4)
    cluster.shrink(10, (node,), now=100.0, for_job=11)
    cluster.start(Job(11, Kind.ONDEMAND, 1, 3600.0, 100.0, runtime=3600.0), (node,),
                  now=100.0)
    before = cluster.running[10]
    # 900 s left at 4 nodes is 1,200 s at 3, plus the setup at 3 nodes (50 * 4 / 3)
    assert before.end == pytest.approx(100 + 1200 + 200 / 3)
    strike = NodeFailures(FailureModel(mtbf=3600.0, seed=0), nodes=4, start=0.0).strike(
        cluster, 200.0)
    assert strike.node == node and strike.kill is not None
    assert cluster.running[10] == before and 10 not in cluster.owed
    cluster.check()
