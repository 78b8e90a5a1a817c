"""Node failures on a Cluster: who is killed, what they lose, and the node's repair."""

from __future__ import annotations

import pytest

from metaq_py.cluster import Cluster
from metaq_py.policy.model import Job, Kind, Notice
from sim.engine.failures import FailureModel, NodeFailures, killed

HOUR = 3600.0


def failing_node(nodes: int, seed: int = 0) -> int:
    """The node the first failure of ``seed`` hits (read from a throwaway source)."""
    probe = NodeFailures(FailureModel(mtbf=HOUR, seed=seed), nodes=nodes, start=0.0)
    return probe.strike(Cluster(nodes), probe.next_time()).node


def test_failure_times_are_seeded_and_have_the_mtbf() -> None:
    def times(seed: int) -> list[float]:
        src = NodeFailures(FailureModel(mtbf=5 * HOUR, seed=seed), nodes=16, start=100.0)
        cluster = Cluster(16)
        out = []
        for _ in range(400):
            t = src.next_time()
            out.append(t)
            s = src.strike(cluster, t)
            if s.repair is not None:
                src.repaired(cluster, s.repair, t)
        return out

    a = times(1)
    assert a == times(1) and a != times(2)
    gaps = [b - c for b, c in zip(a[1:], a, strict=False)]
    assert sum(gaps) / len(gaps) == pytest.approx(5 * HOUR, rel=0.15)
    assert a[0] > 100.0


def test_a_free_node_goes_out_of_service_until_repaired() -> None:
    cluster = Cluster(8)
    src = NodeFailures(FailureModel(mtbf=HOUR, repair=6 * HOUR, seed=3), nodes=8, start=0.0)
    t = src.next_time()
    strike = src.strike(cluster, t)
    assert strike.kill is None and strike.node not in cluster.free
    assert 3 * HOUR <= strike.repaired_at - t <= 9 * HOUR
    repair = cluster.running[strike.repair]
    assert repair.job.kind is Kind.ONDEMAND and repair.nodes == (strike.node,)
    assert repair.end == strike.repaired_at  # schedulers see when the node returns
    src.repaired(cluster, strike.repair, strike.repaired_at)
    assert strike.node in cluster.free
    cluster.check()
    assert src.counts() == {"failures": 1.0, "failure_kills": 0.0,
                            "failure_lost_node_hours": 0.0}


def test_a_rigid_job_loses_the_work_since_its_last_checkpoint() -> None:
    cluster = Cluster(4)
    job = Job(id=1, kind=Kind.RIGID, size=4, walltime=10 * HOUR, submit=0.0,
              runtime=8 * HOUR, setup=600.0, checkpoint_interval=HOUR, checkpoint_cost=600.0)
    cluster.start(job, (0, 1, 2, 3), now=0.0)
    src = NodeFailures(FailureModel(mtbf=HOUR, seed=0), nodes=4, start=0.0)
    # checkpoints complete at 600 + k * 4200 s; strike at 3 h: last checkpoint at 9,000 s
    strike = src.strike(cluster, 3 * HOUR)
    kill = strike.kill
    assert kill is not None and kill.running.job.id == 1
    assert kill.lost_node_seconds == pytest.approx((3 * HOUR - 9000 + 600) * 4)
    assert kill.requeued.runtime == pytest.approx(8 * HOUR - (9000 - 600))
    assert 1 not in cluster.running
    assert sorted(cluster.free) == sorted({0, 1, 2, 3} - {strike.node})
    cluster.check()
    assert src.counts()["failure_kills"] == 1.0


def test_malleable_and_ondemand_jobs_lose_everything_since_their_start() -> None:
    r_mall = Cluster(4)
    job = Job(id=2, kind=Kind.MALLEABLE, size=4, min_size=1, walltime=4 * HOUR, submit=0.0,
              runtime=2 * HOUR, setup=100.0)
    r = r_mall.start(job, (0, 1), now=0.0)  # at half size it needs 4 h
    k = killed(r, HOUR)
    assert k.lost_node_seconds == pytest.approx(2 * HOUR)  # one hour on two nodes
    assert k.requeued == job
    od = Job(id=3, kind=Kind.ONDEMAND, size=2, walltime=HOUR, submit=0.0, runtime=HOUR)
    ro = r_mall.start(od, (2, 3), now=600.0)
    k = killed(ro, 1200.0)
    assert k.lost_node_seconds == pytest.approx(1200.0) and k.requeued == od


def test_an_ondemand_holder_is_killed_and_loaned_nodes_are_reclaimed() -> None:
    cluster = Cluster(4)
    lender = Job(id=10, kind=Kind.MALLEABLE, size=4, min_size=1, walltime=10 * HOUR,
                 submit=0.0, runtime=8 * HOUR)
    cluster.start(lender, (0, 1, 2, 3), now=0.0)
    node = failing_node(4)
    others = tuple(n for n in range(4) if n != node)
    cluster.shrink(10, (node,), now=100.0, for_job=11)
    od = Job(id=11, kind=Kind.ONDEMAND, size=1, walltime=HOUR, submit=100.0, runtime=HOUR)
    cluster.start(od, (node,), now=100.0)
    src = NodeFailures(FailureModel(mtbf=HOUR, seed=0), nodes=4, start=0.0)
    strike = src.strike(cluster, 200.0)
    assert strike.node == node and strike.kill is not None
    assert strike.kill.running.job.id == 11
    assert cluster.running[strike.repair].nodes == (node,)
    assert cluster.running[10].nodes == others  # the lender did not get the failed node
    assert 10 not in cluster.owed
    cluster.check()


def test_a_reserved_idle_node_can_fail_too() -> None:
    cluster = Cluster(4)
    cluster.add_notice(Notice(id="n", nodes=4, arrival=HOUR, walltime=HOUR, issued=0.0))
    cluster.reserve("n", (0, 1, 2, 3))
    src = NodeFailures(FailureModel(mtbf=HOUR, seed=0), nodes=4, start=0.0)
    strike = src.strike(cluster, 10.0)
    assert strike.node not in cluster.reserved["n"]
    assert len(cluster.reserved["n"]) == 3
    cluster.check()


def test_a_node_under_repair_failing_again_changes_nothing() -> None:
    cluster = Cluster(1)
    src = NodeFailures(FailureModel(mtbf=HOUR, seed=0), nodes=1, start=0.0)
    first = src.strike(cluster, 10.0)
    second = src.strike(cluster, 20.0)
    assert second.repair is None and second.kill is None
    assert list(cluster.running) == [first.repair]
    assert src.counts()["failures"] == 2.0


def test_bad_models_are_refused() -> None:
    with pytest.raises(ValueError):
        FailureModel(mtbf=0)
    with pytest.raises(ValueError):
        FailureModel(mtbf=HOUR, repair_spread=1.0)
    assert FailureModel.of({"failure_mtbf": 5 * HOUR}, seed=2).repair == 6 * HOUR


def test_the_engine_replays_failures_reproducibly_and_every_job_ends() -> None:
    from sim.engine.core import simulate
    from sim.trace.synthetic import synthetic_trace
    from sim.workload.model import WorkloadModel, hybrid_workload

    trace = synthetic_trace(jobs=300, seed=4, nodes=512)
    workload = hybrid_workload(trace, WorkloadModel.for_workload("W5", seed=1))

    def run(policy: str, mtbf: float | None):
        src = None if mtbf is None else NodeFailures(
            FailureModel(mtbf=mtbf, seed=1), nodes=trace.nodes, start=trace.first_submit,
            end=trace.last_submit)
        return simulate(workload, policy=policy, failures=src), src

    for policy in ("easy", "CUA&SPAA"):
        clean, _ = run(policy, None)
        hit, src = run(policy, 2 * HOUR)
        again, _ = run(policy, 2 * HOUR)
        assert src is not None and src.failures > 10 and src.kills > 0
        assert all(o.end is not None for o in hit.outcomes)  # nothing lost for ever
        assert [o.end for o in hit.outcomes] == [o.end for o in again.outcomes]
        # killed work is redone, so the machine needs longer on average
        assert hit.summary().turnaround.all.mean > clean.summary().turnaround.all.mean
        # a failure-free source changes nothing
        idle, _ = run(policy, 1e12)
        assert [o.end for o in idle.outcomes] == [o.end for o in clean.outcomes]


def test_a_shorter_repair_returns_the_node_sooner() -> None:
    """The same strike (same seed) under repairs of 6 h and of 1 h: the node is back within
    3-9 h in the first, within 0.5-1.5 h in the second (repairs vary by half either way)."""
    back = {}
    for repair in (6 * HOUR, HOUR):
        cluster = Cluster(8)
        src = NodeFailures(FailureModel(mtbf=HOUR, repair=repair, seed=3), nodes=8, start=0.0)
        t = src.next_time()
        strike = src.strike(cluster, t)
        back[repair] = strike.repaired_at - t
    assert 3 * HOUR <= back[6 * HOUR] <= 9 * HOUR
    assert 0.5 * HOUR <= back[HOUR] <= 1.5 * HOUR
