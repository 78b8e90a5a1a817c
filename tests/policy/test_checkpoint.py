"""Daly's interval, the checkpoint schedule, lost work and the resumed job."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metaq_py.policy import Running
from metaq_py.policy.checkpoint import (
    checkpoint_cost,
    checkpoint_plan,
    daly_interval,
    last_checkpoint,
    lost_node_seconds,
    lost_seconds,
    next_checkpoint,
    resumed,
)
from metaq_py.policy.model import Kind
from tests.policy_world import job


def test_daly_higher_order_value_by_hand() -> None:
    # d=2, M=9: d/2M = 1/9, sqrt = 1/3, sqrt(2dM) = 6: 6 * (1 + 1/9 + 1/81) - 2 = 384/81
    assert daly_interval(2.0, 9.0) == pytest.approx(384 / 81)


def test_daly_is_near_young_for_small_costs_and_mtbf_beyond() -> None:
    tau = daly_interval(600.0, 86_400.0)
    young = (2 * 600.0 * 86_400.0) ** 0.5
    assert young - 600.0 < tau < young
    assert daly_interval(500.0, 100.0) == 100.0


def test_daly_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="must be positive"):
        daly_interval(0.0, 10.0)


def test_cost_by_size() -> None:
    assert checkpoint_cost(1023) == 600.0
    assert checkpoint_cost(1024) == 1200.0


def test_no_checkpoint_when_interval_exceeds_runtime() -> None:
    tau = daly_interval(600.0, 86_400.0)
    assert checkpoint_plan(128, tau - 1, mtbf=86_400.0) == (None, 600.0)
    assert checkpoint_plan(2048, 10 * tau, mtbf=86_400.0)[0] == pytest.approx(
        daly_interval(1200.0, 86_400.0))


def _rigid(start: float = 0.0, last: float | None = None) -> Running:
    j = job("r", 4, 1000.0, runtime=800.0, setup=10.0, checkpoint_interval=100.0,
            checkpoint_cost=20.0)
    return Running(j, (0, 1, 2, 3), start, start + 1000.0, start + 800.0, last_checkpoint=last)


def test_schedule_after_setup() -> None:
    r = _rigid()
    assert last_checkpoint(r, 129.0) is None
    assert last_checkpoint(r, 130.0) == 130.0
    assert last_checkpoint(r, 300.0) == 250.0
    assert next_checkpoint(r, 0.0) == 130.0
    assert next_checkpoint(r, 130.0) == 250.0
    assert next_checkpoint(r, 999.0) is None, "no checkpoint after the job's end"


def test_recorded_checkpoint_restarts_schedule() -> None:
    r = _rigid(last=200.0)
    assert last_checkpoint(r, 250.0) == 200.0
    assert next_checkpoint(r, 200.0) == 320.0


def test_lost_work() -> None:
    r = _rigid()
    assert lost_seconds(r, 100.0) == 100.0, "no checkpoint yet: everything since start"
    assert lost_seconds(r, 300.0) == 50.0 + 10.0, "since the checkpoint at 250, plus setup"
    assert lost_node_seconds(r, 300.0) == 240.0
    m = Running(job("m", 4, 100.0, kind=Kind.MALLEABLE, setup=7.0, min_size=1), (0,), 0.0, 50.0)
    assert lost_seconds(m, 40.0) == 7.0, "malleable: only the setup"


def test_resumed_rigid_keeps_work_up_to_the_checkpoint() -> None:
    back = resumed(_rigid(), 300.0)
    # kept = 250 - 0 - setup 10 = 240
    assert (back.walltime, back.runtime, back.submit) == (760.0, 560.0, 0.0)
    assert resumed(_rigid(), 100.0).walltime == 1000.0


def test_resumed_malleable_rescales_to_full_size() -> None:
    m = job("m", 8, 400.0, kind=Kind.MALLEABLE, min_size=2, setup=5.0, runtime=300.0)
    r = Running(m, (0, 1, 2, 3), 0.0, 200.0, 150.0)
    back = resumed(r, 100.0)
    # 100 s left at 4 nodes is 50 s at 8, plus setup; 50 s true left -> 25 s, plus setup
    assert (back.walltime, back.runtime) == (55.0, 30.0)


def test_resumed_amdahl_malleable_rescales_by_its_slowdown() -> None:
    """Serial fraction 0.5, size 4, running on 2: the slowdown on 2 nodes is
    (0.5 + 0.5 / 2) / (0.5 + 0.5 / 4) = 1.2, so 60 s left on 2 nodes are 50 s at full size,
    and 36 s true left are 30 s; plus the setup."""
    m = job("m", 4, 100.0, kind=Kind.MALLEABLE, min_size=1, setup=5.0, serial=0.5,
            runtime=70.0)
    r = Running(m, (0, 1), 0.0, 120.0, 96.0)
    back = resumed(r, 60.0)
    assert back.walltime == pytest.approx(55.0) and back.runtime == pytest.approx(35.0)


@settings(max_examples=200, deadline=None)
@given(st.floats(0, 5000), st.floats(1, 50), st.floats(10, 500), st.floats(0, 100),
       st.floats(0, 1))
def test_resume_costs_exactly_the_lost_work(start: float, setup: float, tau: float,
                                            cost: float, frac: float) -> None:
    """Remaining after resumption minus remaining if undisturbed is the work lost."""
    runtime = 4000.0
    j = job("r", 2, runtime, runtime=runtime, setup=setup, checkpoint_interval=tau,
            checkpoint_cost=cost)
    r = Running(j, (0, 1), start, start + runtime, start + runtime)
    now = start + frac * runtime
    lost = lost_seconds(r, now)
    assert 0.0 <= lost <= now - start + setup + 1e-6
    back = resumed(r, now)
    assert back.runtime is not None
    assert back.runtime - (runtime - (now - start)) == pytest.approx(lost, abs=1e-6)


def test_a_job_exactly_as_long_as_dalys_interval_checkpoints() -> None:
    tau = daly_interval(600.0, 86_400.0)
    assert checkpoint_plan(128, tau, mtbf=86_400.0) == (tau, 600.0)


def test_a_recorded_checkpoint_counts_from_the_moment_it_completes() -> None:
    j = job("r", 4, 1000.0, runtime=800.0)  # no checkpoint schedule: only what is recorded
    r = Running(j, (0, 1, 2, 3), 0.0, 1000.0, 800.0, last_checkpoint=200.0)
    assert last_checkpoint(r, 200.0) == 200.0
    assert last_checkpoint(r, 199.0) is None
