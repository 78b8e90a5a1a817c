"""Which agenda items due at one instant come first: finishes (``finishes-first``, the
default) or submits (``submits-first``), on the hand-made workload of
``test_decisions_pace``, whose answers are worked out by hand."""

from __future__ import annotations

import pytest

from sim.engine.agenda import InstantOrder
from sim.engine.core import simulate
from sim.trace.synthetic import synthetic_trace
from sim.workload.model import WorkloadModel, hybrid_workload
from tests.sim.engine.test_decisions_pace import finish_and_arrival_at_once


def test_per_item_finishes_first_the_arrival_preempts_the_batch_job_that_just_started() -> None:
    # the default order, as in test_decisions_pace: R's end is decided on alone, B starts at
    # 100 and O's arrival preempts it
    r, b, o = simulate(finish_and_arrival_at_once(), policy="N&PAA", decisions="per-item",
                       instant_order="finishes-first").outcomes
    assert (r.end, r.preemptions) == (100, 0)
    assert (o.start, o.end) == (100, 110)
    assert (b.start, b.end, b.preemptions) == (100, 310, 1)


def test_per_item_submits_first_the_arrival_preempts_the_job_about_to_end() -> None:
    # O is decided on before R's end at 100: R still holds the 4 nodes, so PAA preempts it,
    # losing its 100 s (no checkpoint); O runs 100..110; R, ahead of B in the queue (submitted
    # at 0, B at 10), runs again 110..210, and B 210..410
    r, b, o = simulate(finish_and_arrival_at_once(), policy="N&PAA", decisions="per-item",
                       instant_order="submits-first").outcomes
    assert (o.start, o.end) == (100, 110)
    assert (r.end, r.preemptions) == (210, 1)
    assert (b.start, b.end, b.preemptions) == (210, 410, 0)


@pytest.mark.parametrize("policy", ["easy", "N&PAA", "CUP&SPAA"])
def test_per_instant_the_order_changes_nothing(policy: str) -> None:
    # one decision sees every item of the instant handled, whichever came first
    tiny = [simulate(finish_and_arrival_at_once(), policy=policy, instant_order=o).outcomes
            for o in ("finishes-first", "submits-first")]
    assert tiny[0] == tiny[1] == simulate(finish_and_arrival_at_once(), policy=policy).outcomes
    trace = synthetic_trace(jobs=600, seed=5, load=0.9, nodes=256)
    work = hybrid_workload(trace, WorkloadModel.for_workload("W5", seed=5))
    default = simulate(work, policy=policy).outcomes
    assert simulate(work, policy=policy, instant_order="submits-first").outcomes == default


def test_an_unknown_order_is_refused_in_one_sentence() -> None:
    with pytest.raises(ValueError, match=r"^unknown instant_order 'random'; choose "
                                         r"finishes-first or submits-first$"):
        simulate(finish_and_arrival_at_once(), policy="easy", instant_order="random")
    assert InstantOrder.of("submits-first") is InstantOrder.SUBMITS_FIRST
    assert str(InstantOrder.FINISHES_FIRST) == "finishes-first"
