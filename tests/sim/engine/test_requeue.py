"""Where a preempted job waits again: its place (``original``) or the back of the queue
(``at-preemption``), on a hand-made workload whose two answers are known."""

from __future__ import annotations

import pytest

from metaq_py.policy import make_scheduler
from sim.engine.core import simulate
from sim.engine.waiting import Requeue
from tests.sim.engine.whole_machine import batch_then_ondemand


def preempted_before_a_waiting_job():
    """10 nodes. R (submit 0, 200 s) runs from 0; B (submit 20, 100 s) waits behind it; the
    on-demand O (10 nodes, 30 s) arrives at 50 and PAA preempts R, which has no checkpoint."""
    return batch_then_ondemand(10, [(0, 300, 200), (20, 100, 100)], ondemand=(50, 30))


def test_a_preempted_job_keeps_its_place_by_default() -> None:
    # R (submitted at 0) is ahead of B (20): R 80..280, then B 280..380
    r, b, o = simulate(preempted_before_a_waiting_job(), policy="N&PAA").outcomes
    assert (o.start, o.end) == (50, 80)
    assert (r.start, r.end, r.preemptions) == (0, 280, 1)
    assert (b.start, b.end) == (280, 380)


def test_requeued_at_the_preemption_it_goes_behind_the_jobs_submitted_before() -> None:
    # R is requeued as if submitted at 50, behind B (20): B 80..180, then R 180..380 (with
    # the nodes of an ended on-demand job going to the common pool: under the paper's
    # completion rule R would get them back at 80, below)
    r, b, o = simulate(preempted_before_a_waiting_job(),
                       policy=make_scheduler("N&PAA", completion="pool"),
                       requeue="at-preemption").outcomes
    assert (o.start, o.end) == (50, 80)
    assert (b.start, b.end) == (80, 180)
    assert (r.start, r.end, r.preemptions) == (0, 380, 1)
    assert r.submit == 0 and r.turnaround == 380, "turnaround counts from the original submit"


def test_the_victim_gets_its_nodes_back_wherever_it_was_requeued() -> None:
    # R12: when O ends at 80, R, still waiting, resumes at once on the nodes it gave, ahead
    # of B even when it was requeued behind it: R 80..280, then B 280..380
    r, b, o = simulate(preempted_before_a_waiting_job(), policy="N&PAA",
                       requeue="at-preemption").outcomes
    assert (o.start, o.end) == (50, 80)
    assert (r.start, r.end, r.preemptions) == (0, 280, 1)
    assert (b.start, b.end) == (280, 380)


def test_an_unknown_requeue_is_refused_in_one_sentence() -> None:
    with pytest.raises(ValueError, match="unknown requeue 'last'; choose original or "
                                         "at-preemption"):
        simulate(preempted_before_a_waiting_job(), policy="N&PAA", requeue="last")
    assert Requeue.of("original") is Requeue.ORIGINAL
