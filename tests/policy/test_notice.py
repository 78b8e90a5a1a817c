"""Notice strategies N, CUA, CUP; release at the threshold; borrowing reserved nodes."""

from __future__ import annotations

from metaq_py.policy import Preempt, Release, Reserve, Start, make_scheduler
from metaq_py.policy.choices import CupTiming
from metaq_py.policy.model import Kind
from tests.policy.switches import check_switch
from tests.policy_world import World, job


def fig2(name: str) -> World:
    """The situation of Fan et al.'s Fig. 2, on 10 nodes.

    A (4 nodes) ends at t=50, before the estimated arrival at t=100; B (4 nodes, rigid)
    checkpoints at t=80 and runs long; C (2 nodes) is on-demand and never preempted. A notice
    at t=0 announces an on-demand job of 8 nodes for t=100.
    """
    w = World(10, name)
    w.run(job("A", 4, 50.0), range(4))
    w.run(job("B", 4, 1000.0, setup=5.0, checkpoint_interval=75.0, checkpoint_cost=0.0),
          range(4, 8))
    w.run(job("C", 2, 1000.0, kind=Kind.ONDEMAND), (8, 9))
    w.notice("n", 8, arrival=100.0)
    return w


def play_fig2(w: World) -> None:
    wake = w.decide(0.0).wake
    w.now = 50.0
    w.finish("A")
    w.decide()
    if wake is not None and wake < 100.0:
        w.decide(wake)
    w.submit(job("O", 8, 100.0, kind=Kind.ONDEMAND, notice="n", submit=100.0))
    w.decide(100.0)


def test_fig2_cua_preempts_at_arrival() -> None:
    w = fig2("CUA&PAA")
    d0 = w.decide(0.0)
    assert d0.actions == () and d0.wake == 700.0, "nothing idle; wake only for the release"
    w.now = 50.0
    w.finish("A")
    assert w.decide().actions == (Reserve("n", (0, 1, 2, 3)),)
    w.submit(job("O", 8, 100.0, kind=Kind.ONDEMAND, notice="n", submit=100.0))
    d = w.decide(100.0)
    assert [type(a) for a in d.actions] == [Preempt, Start]
    assert w.lost == {"B": 20.0 + 5.0}, "work since the checkpoint at t=80, plus setup"


def test_fig2_cup_preempts_right_after_the_checkpoint() -> None:
    w = fig2("CUP&PAA")
    d0 = w.decide(0.0)
    assert d0.actions == () and d0.wake == 80.0, "A is counted; B goes at its checkpoint"
    play_fig2(w)
    assert w.holder("O") is not None
    assert w.lost == {"B": 5.0}, "only the setup is lost"
    assert [type(a) for a in w.decisions[-1].actions] == [Start], "no preemption at arrival"


def test_fig2_cup_at_arrival_preempts_b_at_the_arrival_and_loses_as_cua() -> None:
    w = World(10, make_scheduler("CUP&PAA", cup_preempt="at-arrival"))
    w.run(job("A", 4, 50.0), range(4))
    w.run(job("B", 4, 1000.0, setup=5.0, checkpoint_interval=75.0, checkpoint_cost=0.0),
          range(4, 8))
    w.run(job("C", 2, 1000.0, kind=Kind.ONDEMAND), (8, 9))
    w.notice("n", 8, arrival=100.0)
    d0 = w.decide(0.0)
    assert d0.actions == () and d0.wake == 100.0, "B is planned for the arrival itself"
    play_fig2(w)
    assert w.holder("O") is not None and w.holder("O").start == 100.0
    assert w.lost == {"B": 20.0 + 5.0}, "work since the checkpoint at t=80, plus setup"


def test_cup_at_arrival_preempts_a_malleable_job_at_the_arrival() -> None:
    w = World(4, "CUP&PAA", warning=120.0, cup_preempt="at-arrival")
    w.run(job("M", 4, 1000.0, kind=Kind.MALLEABLE, min_size=2, setup=3.0), range(4))
    w.notice("n", 2, arrival=900.0)
    assert w.decide(0.0).wake == 900.0
    assert not [a for a in w.decide(780.0).actions if isinstance(a, Preempt)]
    d = w.decide(900.0)
    assert d.actions[0] == Preempt("M", None) and isinstance(d.actions[1], Reserve)


def test_cup_preempt_default_and_bad_value() -> None:
    check_switch("cup_preempt", CupTiming, "CUP&PAA", "soon")


def test_fig2_both_start_the_job_at_once_cup_loses_less() -> None:
    cua, cup = fig2("CUA&SPAA"), fig2("CUP&SPAA")
    play_fig2(cua)
    play_fig2(cup)
    assert cua.holder("O").start == cup.holder("O").start == 100.0
    assert sum(cup.lost.values()) < sum(cua.lost.values())


def test_n_does_nothing_before_arrival() -> None:
    w = fig2("N&PAA")
    w.now = 50.0
    w.finish("A")
    d = w.decide()
    assert not [a for a in d.actions if not isinstance(a, Start)]
    assert not w.cluster.reserved


def test_cua_never_preempts_and_collects_released_nodes() -> None:
    w = World(6, "CUA&PAA")
    w.run(job("R1", 2, 30.0), (0, 1))
    w.run(job("R2", 2, 500.0), (2, 3))
    w.notice("n", 4, arrival=100.0)
    d = w.decide(0.0)
    assert d.actions == (Reserve("n", (4, 5)),)
    w.now = 30.0
    w.finish("R1")
    assert w.decide().actions == (Reserve("n", (0, 1)),)
    assert w.holder("R2") is not None


def test_late_arrival_released_at_the_threshold() -> None:
    w = World(4, "CUA&PAA", release_after=600.0)
    w.notice("n", 2, arrival=100.0)
    assert w.decide(0.0).wake == 700.0
    assert w.decide(699.0).actions == ()
    d = w.decide(700.0)
    assert d.actions == (Release("n"),)
    assert set(w.cluster.free) == {0, 1, 2, 3} and not w.cluster.notices
    w.submit(job("O", 2, kind=Kind.ONDEMAND, notice="n", submit=750.0))
    assert [type(a) for a in w.decide(750.0).actions] == [Start]


def test_a_waiting_job_keeps_its_reservation_past_the_threshold() -> None:
    w = World(4, "CUA&PAA", release_after=10.0)
    w.run(job("X", 2, 1000.0, kind=Kind.ONDEMAND), (2, 3))
    w.notice("n", 3, arrival=100.0)
    w.decide(0.0)
    w.submit(job("O", 3, kind=Kind.ONDEMAND, notice="n", submit=100.0))
    w.decide(200.0)
    assert "n" in w.cluster.notices and len(w.cluster.reserved["n"]) == 2


def test_earliest_notice_first() -> None:
    w = World(4, "CUA&PAA")
    w.run(job("R", 2, 50.0), (0, 1))
    w.notice("second", 2, arrival=100.0, issued=5.0)
    w.notice("first", 3, arrival=200.0, issued=1.0)
    assert w.decide(10.0).actions == (Reserve("first", (2, 3)),)
    w.now = 50.0
    w.finish("R")
    assert w.decide().actions == (Reserve("first", (0,)), Reserve("second", (1,)))


def test_reserved_nodes_run_short_work_then_malleable_work() -> None:
    w = World(6, "CUA&PAA")
    w.run(job("R", 2, 1000.0), (0, 1))
    w.notice("n", 4, arrival=100.0)
    w.submit(job("long", 2, 500.0, submit=0.0),
             job("short", 2, 80.0, submit=1.0),
             job("m", 4, 500.0, kind=Kind.MALLEABLE, min_size=1, setup=10.0, submit=2.0))
    w.decide(0.0)
    assert w.holder("short").borrowed == "n"
    assert w.holder("m").borrowed == "n" and len(w.holder("m").nodes) == 2
    assert w.holder("long") is None
    w.submit(job("O", 4, kind=Kind.ONDEMAND, notice="n", submit=90.0))
    d = w.decide(90.0)
    assert {a.job for a in d.actions if isinstance(a, Preempt)} == {"short", "m"}
    assert w.holder("O") is not None and w.holder("R") is not None


def test_cup_malleable_goes_at_its_warning() -> None:
    w = World(4, "CUP&PAA", warning=120.0)
    w.run(job("M", 4, 1000.0, kind=Kind.MALLEABLE, min_size=2, setup=3.0), range(4))
    w.notice("n", 2, arrival=1000.0 - 100.0)
    assert w.decide(0.0).wake == 900.0 - 120.0
    d = w.decide(780.0)
    assert d.actions[0] == Preempt("M", None) and isinstance(d.actions[1], Reserve)


def test_cup_does_not_preempt_when_it_cannot_cover_the_notice() -> None:
    w = World(4, "CUP&PAA")
    w.run(job("X", 3, 1000.0, kind=Kind.ONDEMAND), (0, 1, 2))
    w.notice("n", 4, arrival=100.0)
    w.run(job("R", 1, 1000.0), (3,))
    assert not [a for a in w.decide(0.0).actions if isinstance(a, Preempt)]


def test_cup_preempt_when_always_preempts_in_vain_for_the_notice() -> None:
    # the machine above: R's node is 1 of the 4 the notice needs; under always CUP preempts it
    # now all the same (a rigid job without a checkpoint goes now) and reserves its node
    w = World(4, "CUP&PAA", preempt_when="always")
    w.run(job("X", 3, 1000.0, kind=Kind.ONDEMAND), (0, 1, 2))
    w.notice("n", 4, arrival=100.0)
    w.run(job("R", 1, 1000.0), (3,))
    d = w.decide(0.0)
    assert d.actions[0] == Preempt("R", None) and isinstance(d.actions[1], Reserve)
    assert len(w.cluster.reserved["n"]) == 1


def cup_wide_and_narrow(victim_order: str) -> World:
    """At t=100 a wide rigid job has lost 100 s on 4 nodes, a narrow one 300 s on 1 (neither
    checkpoints), one node runs on-demand work, and a notice wants 1 node at t=200: CUP must
    preempt one of them, and the two victim orders pick differently (R9, R6)."""
    w = World(6, make_scheduler("CUP&PAA", victim_order=victim_order))
    w.run(job("wide", 4, 1000.0), range(4), start=0.0)      # 100 s lost x 4 = 400
    w.run(job("narrow", 1, 1000.0), (4,), start=-200.0)    # 300 s lost x 1 = 300
    w.run(job("busy", 1, 1000.0, kind=Kind.ONDEMAND), (5,))
    w.notice("n", 1, arrival=200.0)
    return w


def test_cup_orders_its_victims_as_paa_does() -> None:
    by_time = cup_wide_and_narrow("seconds")
    d = by_time.decide(100.0)
    assert d.actions[0] == Preempt("wide", None) and isinstance(d.actions[1], Reserve)
    assert by_time.lost == {"wide": 100.0}
    by_nodes = cup_wide_and_narrow("node-seconds")
    d = by_nodes.decide(100.0)
    assert d.actions[0] == Preempt("narrow", None) and isinstance(d.actions[1], Reserve)
    assert by_nodes.lost == {"narrow": 300.0}


def test_one_reserved_idle_node_is_lent_to_a_job_that_ends_before_the_arrival() -> None:
    """R7: the notice's one reserved node lends to a 1-node job that ends by t=100, before
    the on-demand job's estimated arrival at 300."""
    w = World(2, "CUA&PAA")
    w.run(job("R", 1, 1000.0), [0], start=0.0)
    w.notice("n", 1, arrival=300.0)
    w.submit(job("short", 1, 100.0, submit=0.0))
    w.decide(0.0)
    holder = w.holder("short")
    assert holder is not None and holder.borrowed == "n" and holder.nodes == (1,)


def test_the_last_reserved_idle_node_is_lent_to_a_malleable_job() -> None:
    """R7: what no job ending before the arrival took goes to malleable jobs, down to the
    last idle node: M (2 nodes, minimum 1) runs past the arrival, on the one reserved node."""
    w = World(2, "CUA&PAA")
    w.run(job("R", 1, 1000.0), [0], start=0.0)
    w.notice("n", 1, arrival=300.0)
    w.submit(job("M", 2, 1000.0, kind=Kind.MALLEABLE, min_size=1, submit=0.0))
    w.decide(0.0)
    holder = w.holder("M")
    assert holder is not None and holder.borrowed == "n" and holder.nodes == (1,)
