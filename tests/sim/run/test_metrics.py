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


# --- the steady-state window -------------------------------------------------------------

# 10 nodes; (submit, size, walltime, runtime). EASY lets J4 take the head's extra nodes, so
# J3 (the whole machine) waits for it; conservative backfilling holds J3's place first.
# J5 comes late, so the submits span [0, 400].
#   EASY:          J1 0-100 (6), J4 3-1003 (2), J2 100-200 (8), J5 400-410 (1), J3 1003-1103
#   conservative:  J1 0-100 (6), J2 100-200 (8), J3 200-300 (10), J4 300-1300 (2), J5 400-410
STEADY = [(0, 6, 100, 100), (1, 8, 100, 100), (2, 10, 100, 100), (3, 2, 1000, 1000),
          (400, 1, 10, 10)]


def test_steady_state_utilisation_differs_where_the_whole_run_hides_it() -> None:
    from sim.run.metrics import busy_utilisation, steady_window, useful_node_hours
    from tests.sim_worlds import tiny_trace

    trace = tiny_trace(STEADY, nodes=10)
    easy, cons = (simulate(trace, policy=p) for p in ("easy", "conservative"))
    window = steady_window(easy.outcomes, warmup=0)
    assert window == (0, 400) == steady_window(cons.outcomes, warmup=0)
    # EASY in [0, 400]: J1 600 + J4 2 x 397 + J2 800 + J3 0 + J5 0 = 2194 node-s of 4000
    # conservative:      J1 600 + J2 800 + J3 1000 + J4 2 x 100 + J5 0 = 2600 node-s
    assert utilisation(easy.outcomes, nodes=10, window=window).value == pytest.approx(0.5485)
    assert utilisation(cons.outcomes, nodes=10, window=window).value == pytest.approx(0.65)
    # nothing is lost here, so the busy series gives the same figures exactly
    for result, value in ((easy, 0.5485), (cons, 0.65)):
        assert busy_utilisation(result.series.time, result.series.busy, nodes=10,
                                window=window) == pytest.approx(value)
    # both did the same 4410 node-s of work; the paper's reading divides it by the makespan
    assert useful_node_hours(easy.outcomes) == useful_node_hours(cons.outcomes) == \
        pytest.approx(4410 / 3600)
    assert utilisation(easy.outcomes, nodes=10).value == pytest.approx(4410 / 11030)
    assert utilisation(cons.outcomes, nodes=10).value == pytest.approx(4410 / 13000)


def test_steady_window_warm_up_is_capped_by_the_span() -> None:
    from sim.run.metrics import STEADY_WARMUP, steady_window

    short = [JobOutcome(id=i, kind=R, size=1, submit=s, start=s, end=s + 1, runtime=1,
                        useful_node_seconds=1) for i, s in enumerate((100, 500, 1100))]
    assert steady_window(short) == (200, 1100)  # a tenth of the 1000 s span
    long = [*short, JobOutcome(id=9, kind=R, size=1, submit=100 + 100 * 86400, start=None,
                               end=None, runtime=1, useful_node_seconds=1)]
    assert steady_window(long) == (100 + STEADY_WARMUP, 100 + 100 * 86400)
    assert steady_window([]) == (0.0, 0.0)


def test_busy_node_hours_add_the_lost_work() -> None:
    from sim.run.metrics import busy_node_hours, useful_node_hours

    # useful 400 + 10 + 1000 + 150 + 150 = 1710 node-s; lost 50 node-s
    assert useful_node_hours(OUTCOMES) == pytest.approx(1710 / 3600)
    assert busy_node_hours(OUTCOMES) == pytest.approx(1760 / 3600)


def test_busy_utilisation_integrates_the_step_function() -> None:
    import numpy as np

    from sim.run.metrics import busy_utilisation

    time, busy = np.array([0.0, 10.0, 30.0]), np.array([4, 10, 0])
    # in [5, 40] on 10 nodes: 4 x 5 + 10 x 20 + 0 x 10 = 220 of 350
    assert busy_utilisation(time, busy, nodes=10, window=(5, 40)) == pytest.approx(220 / 350)
    assert busy_utilisation(time, busy, nodes=10, window=(5, 5)) is None
