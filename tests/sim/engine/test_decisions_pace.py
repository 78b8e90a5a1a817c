"""How often the engine decides at one instant: once after all its agenda items
(``per-instant``, the default) or after each item that changed something (``per-item``), on a
hand-made workload whose two answers are known, and with the skipping rules still exact."""

from __future__ import annotations

import pytest

from sim.engine.agenda import DecisionPace
from sim.engine.core import Engine, simulate
from sim.trace.synthetic import synthetic_trace
from sim.workload.model import WorkloadModel, hybrid_workload
from tests.sim.engine.whole_machine import batch_then_ondemand


def finish_and_arrival_at_once():
    """4 nodes. R (4 nodes) runs 0..100; B (4 nodes, 200 s, no checkpoint) waits from 10; the
    on-demand O (4 nodes, 10 s) arrives at 100, the instant R ends."""
    return batch_then_ondemand(4, [(0, 100, 100), (10, 200, 200)], ondemand=(100, 10))


def test_per_instant_the_arrival_takes_the_freed_nodes() -> None:
    # one decision at 100 sees R's end and O waiting: O (on-demand first) takes the nodes
    r, b, o = simulate(finish_and_arrival_at_once(), policy="N&PAA").outcomes
    assert (r.end, o.start, o.end) == (100, 100, 110)
    assert (b.start, b.end, b.preemptions) == (110, 310, 0)


def test_per_item_the_batch_job_starts_then_is_preempted() -> None:
    # R's end is decided on alone: B starts at 100; then O arrives and PAA preempts B, which
    # loses nothing yet and starts again when O ends
    r, b, o = simulate(finish_and_arrival_at_once(), policy="N&PAA",
                       decisions="per-item").outcomes
    assert (r.end, o.start, o.end) == (100, 100, 110)
    assert (b.start, b.end, b.preemptions) == (100, 310, 1)


@pytest.mark.parametrize("policy", ["easy", "N&PAA", "CUP&SPAA"])
def test_per_item_skipping_inert_decisions_changes_nothing(policy: str) -> None:
    trace = synthetic_trace(jobs=800, seed=7, load=0.9, nodes=256)
    work = hybrid_workload(trace, WorkloadModel.for_workload("W5", seed=7))
    fast = Engine(work, policy=policy, decisions="per-item", skip_inert=True).run()
    full = Engine(work, policy=policy, decisions="per-item", skip_inert=False).run()
    assert fast.outcomes == full.outcomes
    once = Engine(work, policy=policy).run()
    assert len(full.decision_seconds) > len(Engine(work, policy=policy,
                                                   skip_inert=False).run().decision_seconds)
    assert len(once.outcomes) == len(fast.outcomes)


def test_an_unknown_pace_is_refused_in_one_sentence() -> None:
    with pytest.raises(ValueError, match=r"^unknown decisions 'sometimes'; choose "
                                         r"per-instant or per-item$"):
        simulate(finish_and_arrival_at_once(), policy="easy", decisions="sometimes")
    assert DecisionPace.of("per-instant") is DecisionPace.PER_INSTANT
