"""Node ids handed out highest first: EASY's schedule does not depend on which ids a job gets
(every node is alike and nothing breaks a tie by node), so it is the same job for job."""

from __future__ import annotations

import pytest

from metaq_py.policy import make_scheduler
from sim.engine.core import simulate
from sim.trace.synthetic import synthetic_trace


@pytest.mark.parametrize("policy", ["easy", "conservative"])
def test_a_baseline_schedule_is_the_same_highest_first(policy: str) -> None:
    trace = synthetic_trace(jobs=1500, seed=4, load=0.95, nodes=256)
    low = simulate(trace, policy=make_scheduler(policy))
    high = simulate(trace, policy=make_scheduler(policy, node_order="highest-first"))
    assert low.outcomes == high.outcomes
    assert any(o.start > o.submit for o in low.outcomes), "some jobs waited"
