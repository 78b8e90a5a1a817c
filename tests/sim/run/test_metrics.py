"""Metrics on small hand-computed runs."""

from __future__ import annotations

import json

import pytest

from metaq_py.policy.model import Kind
from sim.engine.core import simulate
from sim.run.metrics import (
    JobOutcome,
    Stats,
    bounded_slowdown,
    cqsim_utilisation,
    decision_times,
    summarise,
    utilisation,
)
from sim.trace.synthetic import synthetic_trace
from sim.workload.model import WorkloadModel, hybrid_workload

R, M, OD = Kind.RIGID, Kind.MALLEABLE, Kind.ONDEMAND

# A 10-node machine. Hand-worked values are in the comments.
OUTCOMES = [
    # rigid: wait 10, turnaround 110, bsld 110/100 = 1.1; preempted once, lost 50 node-s
    JobOutcome(id=1, kind=R, size=4, submit=0, start=10, end=110, runtime=100,
               useful_node_seconds=400, preemptions=1, lost_node_seconds=50),
    # rigid: wait 0, turnaround 5, runtime 5 -> bsld max(1, 5/10) = 1
    JobOutcome(id=2, kind=R, size=2, submit=20, start=20, end=25, runtime=5,
               useful_node_seconds=10),
    # malleable: wait 30, turnaround 230, bsld 230/200 = 1.15; shrunk twice, never preempted
    JobOutcome(id=3, kind=M, size=5, submit=0, start=30, end=230, runtime=200,
               useful_node_seconds=1000, shrinks=2),
    # on-demand, instant: wait 0, turnaround 50, bsld 1
    JobOutcome(id=4, kind=OD, size=3, submit=100, start=100, end=150, runtime=50,
               useful_node_seconds=150, instant_start=True, notice="early"),
    # on-demand, delayed: wait 40, turnaround 90, bsld 90/50 = 1.8
    JobOutcome(id=5, kind=OD, size=3, submit=110, start=150, end=200, runtime=50,
               useful_node_seconds=150, instant_start=False, notice="none"),
]


def test_per_job_values() -> None:
    assert [o.wait for o in OUTCOMES] == [10, 0, 30, 0, 40]
    assert [o.turnaround for o in OUTCOMES] == [110, 5, 230, 50, 90]
    assert [bounded_slowdown(o) for o in OUTCOMES] == pytest.approx([1.1, 1, 1.15, 1, 1.8])
    unfinished = JobOutcome(id=9, kind=R, size=1, submit=0, start=None, end=None, runtime=1,
                            useful_node_seconds=1)
    assert unfinished.wait is None and bounded_slowdown(unfinished) is None


def test_stats() -> None:
    s = Stats.of([10, 0, 30, 0, 40])
    assert (s.count, s.mean, s.median) == (5, 16, 10)
    assert s.p95 == pytest.approx(38)  # linear: 30 + 0.8 * (40 - 30)
    assert Stats.of([]) == Stats(0, None, None, None)


def test_summary() -> None:
    s = summarise(OUTCOMES, nodes=10, decision_durations=[0.001, 0.003, 0.002])
    assert (s.jobs, s.finished) == (5, 5)
    assert s.wait.all.mean == 16
    assert s.wait.kinds["rigid"].mean == 5 and s.wait.kinds["ondemand"].mean == 20
    assert s.turnaround.all.mean == 97  # (110 + 5 + 230 + 50 + 90) / 5
    assert s.turnaround.kinds["malleable"].median == 230
    assert s.bounded_slowdown.all.mean == pytest.approx((1.1 + 1 + 1.15 + 1 + 1.8) / 5)
    # useful 1710 node-s over 10 nodes x (230 - 0) s
    assert s.utilisation.value == pytest.approx(1710 / 2300)
    assert (s.utilisation.start, s.utilisation.end) == (0, 230)
    assert s.utilisation.useful_node_hours == pytest.approx(1710 / 3600)
    # CQSim: (400 + 10 + 1000 + 150 + 150) / (10 x 230)
    assert s.cqsim_utilisation == pytest.approx(1710 / 2300)
    assert s.instant_start_rate == 0.5
    assert s.preemption_ratio == {"rigid": 0.5, "malleable": 0.0}
    assert s.shrink_ratio == 1.0
    assert s.lost_node_hours == pytest.approx(50 / 3600)
    assert s.decision_time.count == 3 and s.decision_time.p50 == pytest.approx(0.002)
    data = json.loads(json.dumps(s.to_dict()))
    assert data["wait"]["rigid"]["mean"] == 5 and data["wait"]["all"]["count"] == 5
    assert data["utilisation"]["end"] == 230


def test_utilisation_in_a_window_prorates_jobs() -> None:
    # window 0..100: job 1 runs 10..110 -> 90% of 400; job 2 whole 10; job 3 30..230 -> 35%
    # of 1000; job 4 100..150 -> 0 (starts at the window's end)
    u = utilisation(OUTCOMES, nodes=10, window=(0, 100))
    assert u.value == pytest.approx((360 + 10 + 350) / 1000)
    assert (u.start, u.end, u.nodes) == (0, 100, 10)


def test_cqsim_utilisation_counts_runtime_not_useful_work() -> None:
    one = [JobOutcome(id=1, kind=R, size=2, submit=10, start=20, end=70, runtime=50,
                      useful_node_seconds=0)]
    assert cqsim_utilisation(one, nodes=4) == pytest.approx(100 / (4 * 60))


def test_decision_times_and_empty_inputs() -> None:
    d = decision_times([0.0] * 99 + [1.0])
    assert d.mean == pytest.approx(0.01) and d.max == 1.0 and d.p50 == 0
    assert d.p99 == pytest.approx(0.01)  # 0 + 0.01 * (1 - 0)
    empty = summarise([], nodes=4)
    assert empty.instant_start_rate is None and empty.utilisation.value is None
    assert empty.preemption_ratio == {"rigid": None, "malleable": None}


@pytest.mark.parametrize("policy", ["easy", "CUA&SPAA", "CUP&PAA"])
def test_engine_columns_and_outcome_values_give_the_same_summary(policy: str) -> None:
    trace = synthetic_trace(jobs=400, seed=3, nodes=128)
    result = simulate(hybrid_workload(trace, WorkloadModel.for_workload("W5", seed=3)),
                      policy=policy)
    from_columns = result.summary().to_dict()
    from_values = summarise(list(result.outcomes), nodes=result.nodes,
                            decision_durations=result.decision_seconds).to_dict()
    assert from_columns == from_values
    assert from_columns["jobs"] == 400 and from_columns["finished"] == 400
    window = (trace.first_submit, trace.first_submit + 3600.0)
    assert result.summary(window=window).to_dict() == summarise(
        list(result.outcomes), nodes=result.nodes, window=window,
        decision_durations=result.decision_seconds).to_dict()
