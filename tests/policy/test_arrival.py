"""Arrival strategies: PAA, SPAA, SPAA+ (hand-made scenarios with known answers)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metaq_py.policy import Preempt, Scheduler, Shrink, make_scheduler
from metaq_py.policy.arrival import spread
from metaq_py.policy.choices import Borrowers, OtherReservations, PreemptWhen, VictimOrder
from metaq_py.policy.model import Kind
from metaq_py.policy.pool import NodeOrder
from tests.policy.switches import check_switch
from tests.policy_world import World, job


def kinds(actions: tuple) -> list[tuple[str, object, int]]:
    out = []
    for a in actions:
        n = len(a.nodes) if hasattr(a, "nodes") else 0
        out.append((type(a).__name__, a.job, n))
    return out


def two_malleable(name: str) -> World:
    """10 nodes, all busy with two malleable jobs of 5 nodes (minimum 2, slack 3 each)."""
    w = World(10, name)
    w.run(job("M1", 5, 1000.0, kind=Kind.MALLEABLE, min_size=2, setup=10.0), range(5))
    w.run(job("M2", 5, 1000.0, kind=Kind.MALLEABLE, min_size=2, setup=20.0), range(5, 10))
    w.now = 50.0
    return w


def test_shrink_exactly_covers_the_request() -> None:
    w = two_malleable("N&SPAA")
    w.submit(job("O", 6, 100.0, kind=Kind.ONDEMAND, submit=50.0))
    d = w.decide()
    assert kinds(d.actions) == [("Shrink", "M1", 3), ("Shrink", "M2", 3), ("Start", "O", 6)]
    assert all(a.for_job == "O" for a in d.actions if isinstance(a, Shrink))
    assert len(w.holder("M1").nodes) == len(w.holder("M2").nodes) == 2
    assert w.holder("O") is not None and not w.lost


def test_shrink_spreads_evenly_with_the_odd_node_from_the_larger_slack() -> None:
    w = two_malleable("N&SPAA")
    w.submit(job("O", 5, 100.0, kind=Kind.ONDEMAND, submit=50.0))
    d = w.decide()
    assert sorted((a.job, len(a.nodes)) for a in d.actions if isinstance(a, Shrink)) == [
        ("M1", 2), ("M2", 3)]


def test_spaa_falls_back_to_paa() -> None:
    w = two_malleable("N&SPAA")
    w.submit(job("O", 7, 100.0, kind=Kind.ONDEMAND, submit=50.0))
    d = w.decide()
    assert kinds(d.actions) == [("Preempt", "M1", 0), ("Preempt", "M2", 0), ("Start", "O", 7)]
    assert w.lost == {"M1": 10.0, "M2": 20.0}, "malleable jobs lose only their setup"


def test_spaa_plus_preempts_only_what_shrinking_cannot_cover() -> None:
    w = two_malleable("N&SPAA+")
    w.submit(job("O", 7, 100.0, kind=Kind.ONDEMAND, submit=50.0))
    d = w.decide()
    assert kinds(d.actions) == [("Preempt", "M1", 0), ("Shrink", "M2", 2), ("Start", "O", 7)]


def test_paa_orders_by_node_seconds_lost() -> None:
    w = World(6, "N&PAA")
    w.run(job("wide", 4, 1000.0), range(4), start=0.0)      # 100 s lost x 4 = 400
    w.run(job("narrow", 1, 1000.0), (4,), start=-200.0)    # 300 s lost x 1 = 300
    w.run(job("busy", 1, 1000.0, kind=Kind.ONDEMAND), (5,))
    w.submit(job("O", 1, kind=Kind.ONDEMAND, submit=100.0))
    d = w.decide(100.0)
    assert kinds(d.actions) == [("Preempt", "narrow", 0), ("Start", "O", 1)]
    assert d.actions[0] == Preempt("narrow", "O")


def wide_and_narrow(scheduler: Scheduler) -> World:
    """A wide job that lost 100 s on 4 nodes, a narrow one that lost 300 s on 1, one on-demand
    node busy, and a one-node on-demand job arriving at 100 s: the two victim orders differ."""
    w = World(6, scheduler)
    w.run(job("wide", 4, 1000.0), range(4), start=0.0)      # 100 s lost x 4 = 400
    w.run(job("narrow", 1, 1000.0), (4,), start=-200.0)    # 300 s lost x 1 = 300
    w.run(job("busy", 1, 1000.0, kind=Kind.ONDEMAND), (5,))
    w.submit(job("O", 1, kind=Kind.ONDEMAND, submit=100.0))
    return w


def test_paa_victim_order_in_seconds_preempts_the_job_that_lost_least_time() -> None:
    default = wide_and_narrow(make_scheduler("N&PAA"))
    assert kinds(default.decide(100.0).actions) == [("Preempt", "narrow", 0), ("Start", "O", 1)]
    w = wide_and_narrow(make_scheduler("N&PAA", victim_order="seconds"))
    d = w.decide(100.0)
    assert kinds(d.actions) == [("Preempt", "wide", 0), ("Start", "O", 1)]
    assert w.lost == {"wide": 100.0}


def test_victim_order_default_and_bad_value() -> None:
    check_switch("victim_order", VictimOrder, "N&PAA", "jobs")


def test_rigid_preemption_loses_work_since_checkpoint_plus_setup() -> None:
    w = World(4, "N&PAA")
    w.run(job("R", 4, 1000.0, setup=5.0), range(4), start=0.0, checkpoint=60.0)
    w.submit(job("O", 4, kind=Kind.ONDEMAND, submit=100.0))
    w.decide(100.0)
    assert w.lost == {"R": 40.0 + 5.0}
    assert w.waiting["R"].walltime == 1000.0 - (60.0 - 5.0)
    assert w.waiting["R"].submit == 0.0, "a preempted job keeps its submit time"


def test_nothing_is_preempted_in_vain_and_the_job_heads_the_queue() -> None:
    w = World(8, "N&PAA")
    w.run(job("other", 4, 1000.0, kind=Kind.ONDEMAND), range(4))
    w.run(job("soon", 2, 50.0, kind=Kind.ONDEMAND), (4, 5))
    w.run(job("R", 1, 50.0), (6,))
    w.submit(job("O", 4, kind=Kind.ONDEMAND, submit=10.0),
             job("B", 1, 500.0, submit=0.0))  # would delay O, whose shadow is t=50
    d = w.decide(10.0)
    assert d.actions == (), "4 nodes cannot be freed: no preemption, and B must not start"
    w.now = 50.0
    w.finish("soon")
    w.finish("R")
    d = w.decide()
    assert kinds(d.actions)[0] == ("Start", "O", 4)


def test_preempt_when_always_preempts_in_vain_and_the_job_still_waits() -> None:
    # the machine above: 1 free node and R's 1 are 2 of O's 4. By default nothing goes
    # (tested above); under always R is preempted for O all the same, and O waits
    w = World(8, "N&PAA", preempt_when="always")
    w.run(job("other", 4, 1000.0, kind=Kind.ONDEMAND), range(4))
    w.run(job("soon", 2, 50.0, kind=Kind.ONDEMAND), (4, 5))
    w.run(job("R", 1, 50.0), (6,))
    w.submit(job("O", 4, kind=Kind.ONDEMAND, submit=10.0),
             job("B", 1, 500.0, submit=0.0))
    d = w.decide(10.0)
    assert d.actions == (Preempt("R", "O"),), "R goes in vain; O and B do not start"
    assert w.lost == {"R": 10.0} and "O" in w.waiting
    w.now = 50.0
    w.finish("soon")
    assert kinds(w.decide().actions)[0] == ("Start", "O", 4)


def short_of_six(**options: object) -> World:
    """O needs all 6 nodes; the free one, M's 3 and R's 1 are 5 (X is on-demand)."""
    w = World(6, "N&SPAA", **options)
    w.run(job("M", 3, 1000.0, kind=Kind.MALLEABLE, min_size=1), (0, 1, 2))
    w.run(job("R", 1, 1000.0), (3,))
    w.run(job("X", 1, 1000.0, kind=Kind.ONDEMAND), (4,))
    w.submit(job("O", 6, kind=Kind.ONDEMAND, submit=10.0))
    return w


def test_preempt_when_always_under_spaa_preempts_every_candidate() -> None:
    assert short_of_six().decide(10.0).actions == ()
    d = short_of_six(preempt_when="always").decide(10.0)
    assert sorted(kinds(d.actions)) == [("Preempt", "M", 0), ("Preempt", "R", 0)]


def test_preempt_when_default_and_bad_value() -> None:
    check_switch("preempt_when", PreemptWhen, "N&PAA", "never")


def test_reserved_nodes_of_other_notices_before_preemption() -> None:
    w = World(6, "CUA&PAA")
    w.run(job("R", 4, 1000.0), range(4))
    w.notice("later", 2, arrival=900.0)
    w.decide(0.0)
    assert len(w.cluster.reserved["later"]) == 2
    w.submit(job("O", 2, kind=Kind.ONDEMAND, submit=10.0))
    d = w.decide(10.0)
    assert kinds(d.actions) == [("Start", "O", 2)]


def test_other_reservations_spared_preempts_instead() -> None:
    # the same machine as above: with the other notice's 2 idle nodes spared, the only way
    # to 2 nodes is to preempt R, which loses its 10 s on 4 nodes
    w = World(6, "CUA&PAA", other_reservations="spared")
    w.run(job("R", 4, 1000.0), range(4))
    w.notice("later", 2, arrival=900.0)
    w.decide(0.0)
    w.submit(job("O", 2, kind=Kind.ONDEMAND, submit=10.0))
    d = w.decide(10.0)
    assert kinds(d.actions)[:2] == [("Preempt", "R", 0), ("Start", "O", 2)]
    assert w.lost == {"R": 10.0} and len(w.cluster.reserved["later"]) == 2


def test_other_reservations_default_and_bad_value() -> None:
    check_switch("other_reservations", OtherReservations, "CUA&PAA", "kept")


def test_borrowers_of_own_reservation_go_first() -> None:
    w = World(6, "CUA&PAA")
    w.run(job("R", 2, 1000.0), range(2), start=0.0)
    w.notice("n", 4, arrival=300.0)
    w.submit(job("short", 4, 100.0, submit=0.0))
    w.decide(0.0)
    assert w.holder("short").borrowed == "n"
    w.submit(job("O", 4, kind=Kind.ONDEMAND, notice="n", submit=50.0))
    d = w.decide(50.0)
    assert kinds(d.actions) == [("Preempt", "short", 0), ("Start", "O", 4)]
    assert w.holder("R") is not None


def two_borrowers(**options: object) -> World:
    """6 nodes: R holds 2; a notice for 4 nodes at t=300 reserves the other 4, which two
    2-node jobs borrow from t=0 (they end by t=100); at t=50 its 2-node job arrives."""
    w = World(6, "CUA&PAA", **options)
    w.run(job("R", 2, 1000.0), range(2), start=0.0)
    w.notice("n", 4, arrival=300.0)
    w.submit(job("b1", 2, 100.0, submit=0.0), job("b2", 2, 100.0, submit=0.0))
    w.decide(0.0)
    assert w.holder("b1").borrowed == w.holder("b2").borrowed == "n"
    w.submit(job("O", 2, kind=Kind.ONDEMAND, notice="n", submit=50.0))
    return w


def test_borrowers_as_needed_preempts_one_and_all_preempts_both() -> None:
    # b1 and b2 lost the same 50 s x 2 nodes; the tie goes to b2, on the lower nodes (2, 3)
    default = two_borrowers()
    assert default.holder("b2").nodes == (2, 3)
    assert kinds(default.decide(50.0).actions) == [("Preempt", "b2", 0), ("Start", "O", 2)]
    assert default.lost == {"b2": 50.0} and default.holder("b1") is not None
    paper = two_borrowers(borrowers="all")
    d = paper.decide(50.0)
    assert kinds(d.actions)[:3] == [("Preempt", "b2", 0), ("Preempt", "b1", 0),
                                    ("Start", "O", 2)]
    assert paper.lost == {"b1": 50.0, "b2": 50.0} and paper.holder("R") is not None


@pytest.mark.parametrize(("old", "new"), [(1, 2), (2, 1)])
@pytest.mark.parametrize("old_nodes", [(2, 3), (4, 5)])
def test_borrowers_as_needed_go_cheapest_first(old: int, new: int,
                                               old_nodes: tuple[int, int]) -> None:
    """Of two borrowers of the job's own reservation, the one that started later has lost
    less (R9: ascending preemption overhead), so it alone goes, whatever their ids and
    whichever holds the lower nodes."""
    w = World(6, "CUA&PAA")
    w.run(job("R", 2, 1000.0), range(2), start=0.0)
    w.notice("n", 4, arrival=300.0)
    w.cluster.reserve("n", (2, 3, 4, 5))
    new_nodes = (4, 5) if old_nodes == (2, 3) else (2, 3)
    w.cluster.start(job(old, 2, 1000.0), old_nodes, now=0.0, borrowed="n")
    w.cluster.start(job(new, 2, 1000.0), new_nodes, now=30.0, borrowed="n")
    w.submit(job("O", 2, kind=Kind.ONDEMAND, notice="n", submit=50.0))
    assert kinds(w.decide(50.0).actions) == [("Preempt", new, 0), ("Start", "O", 2)]
    assert w.lost == {new: 20.0}


def test_borrowers_all_preempts_them_even_when_free_nodes_suffice() -> None:
    w = two_borrowers(borrowers="all")
    w.finish("R")  # nodes 0 and 1 free: the job needs no borrower's nodes
    d = w.decide(50.0)
    assert {a.job for a in d.actions if isinstance(a, Preempt)} == {"b1", "b2"}
    default = two_borrowers()
    default.finish("R")
    assert not [a for a in default.decide(50.0).actions if isinstance(a, Preempt)]


def test_borrowers_default_and_bad_value() -> None:
    check_switch("borrowers", Borrowers, "CUA&PAA", "some")


def twins(**options: object) -> World:
    """6 nodes: A then B, 3 nodes each, start at t=0 on a free machine; at t=50 a 3-node
    on-demand job arrives. A and B lost the same 150 node-seconds: the tie goes to the job
    holding the lowest node."""
    w = World(6, "N&PAA", **options)
    w.submit(job("A", 3, 1000.0, submit=0.0), job("B", 3, 1000.0, submit=0.0))
    w.decide(0.0)
    w.submit(job("O", 3, kind=Kind.ONDEMAND, submit=50.0))
    return w


def test_node_order_decides_which_of_two_equal_victims_goes() -> None:
    # lowest first: A takes nodes 0-2, so A is preempted; highest first: A takes 3-5 and B
    # takes 0-2, so B is
    low = twins()
    assert low.holder("A").nodes == (0, 1, 2)
    assert kinds(low.decide(50.0).actions) == [("Preempt", "A", 0), ("Start", "O", 3)]
    high = twins(node_order="highest-first")
    assert high.holder("A").nodes == (3, 4, 5) and high.holder("B").nodes == (0, 1, 2)
    assert kinds(high.decide(50.0).actions) == [("Preempt", "B", 0), ("Start", "O", 3)]


def test_node_order_default_and_bad_value() -> None:
    check_switch("node_order", NodeOrder, "easy", "random")
    check_switch("node_order", NodeOrder, "CUA&PAA", "random")


def test_spread_is_even_and_exact() -> None:
    assert sorted(spread([(1, 0, "a"), (5, 1, "b"), (5, 2, "c")], 7)) == [
        ("a", 1), ("b", 3), ("c", 3)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 20), min_size=1, max_size=8), st.data())
def test_spread_properties(slacks: list[int], data: st.DataObject) -> None:
    amount = data.draw(st.integers(0, sum(slacks)))
    items = [(s, i, i) for i, s in enumerate(slacks)]
    out = dict(spread(items, amount))
    assert sum(out.values()) == amount
    for i, s in enumerate(slacks):
        assert 0 <= out.get(i, 0) <= s, "never below a job's minimum"
    # even: a job that gives less than another gave all its slack
    for i, s in enumerate(slacks):
        for j in range(len(slacks)):
            if out.get(i, 0) + 1 < out.get(j, 0):
                assert out.get(i, 0) == s
