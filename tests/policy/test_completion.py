"""The paper's completion rule (R12): when an on-demand job ends, a job it preempted that still
waits gets the nodes back and resumes at once if it can; a job it shrank is expanded. Every
expectation below is worked out by hand in the docstring of its test."""

from __future__ import annotations

import pytest

from metaq_py.cluster import Cluster, ClusterError
from metaq_py.policy import Job, Kind, Preempt, Start, make_scheduler
from tests.policy_world import World, job


def machine(completion: str, victim_wall: float = 1900.0) -> World:
    """10 nodes. L (rigid, 4 nodes) has run since t=-1000 and ends at t=2000. W (10 nodes,
    submitted at -10) heads the queue: its shadow time is 2000. R (6 nodes, walltime
    ``victim_wall``, submitted at 0) ends by 2000, so EASY backfills it at t=0 on nodes 4-9.
    At t=100 on-demand O (6 nodes, 50 s) arrives: PAA preempts R, the cheapest victim
    (100 s lost on 6 nodes, against L's 1,100 s on 4), and O starts on R's nodes."""
    w = World(10, "N&PAA", completion=completion)
    w.run(job("L", 4, 3000.0), range(4), start=-1000.0)
    w.submit(job("W", 10, 100.0, submit=-10.0), job("R", 6, victim_wall, submit=0.0))
    d = w.decide(0.0)
    assert [(a.job, a.nodes) for a in d.actions] == [("R", (4, 5, 6, 7, 8, 9))]
    w.submit(job("O", 6, 50.0, kind=Kind.ONDEMAND, submit=100.0))
    d = w.decide(100.0)
    assert d.actions == (Preempt("R", "O"), Start("O", (4, 5, 6, 7, 8, 9)))
    assert w.waiting["R"].walltime == victim_wall, "no checkpoint: R lost its 100 s"
    return w


def test_a_victim_that_still_waits_resumes_at_once_on_the_nodes_it_gave() -> None:
    """O ends at t=150. R (1,900 s) restarted now would end at 2,050, past W's shadow time
    2,000, with no extra nodes (W needs all 10): EASY would not start it. Under R12 it
    resumes at once, on the 6 nodes O gave back."""
    w = machine("return")
    w.now = 150.0
    w.finish("O")
    assert dict(w.cluster.returned) == {"R": (4, 5, 6, 7, 8, 9)}
    d = w.decide()
    assert [(a.job, a.nodes) for a in d.actions] == [("R", (4, 5, 6, 7, 8, 9))]
    assert not w.cluster.returned, "the claim is met"


def test_without_the_rule_the_victim_waits_for_its_turn() -> None:
    """The same, with the nodes going to the common pool: EASY keeps R waiting (it would
    delay W), and the 6 nodes stay idle."""
    w = machine("pool")
    w.now = 150.0
    w.finish("O")
    assert w.decide().actions == ()
    assert "R" in w.waiting and len(w.cluster.free) == 6


def test_a_victim_that_fits_the_backfill_anyway_starts_the_same_either_way() -> None:
    """With R at 1,000 s it ends at 1,150 when restarted at 150, before W's shadow: EASY
    backfills it as well. Both rules start it on the same nodes."""
    for completion in ("return", "pool"):
        w = machine(completion, victim_wall=1000.0)
        w.now = 150.0
        w.finish("O")
        assert [(a.job, a.nodes) for a in w.decide().actions] == [("R", (4, 5, 6, 7, 8, 9))]


def test_a_victim_that_cannot_start_keeps_waiting_and_its_claim_lapses() -> None:
    """As above, but R comes back needing 7 nodes (say its task now asks for them): only 6
    are free at t=150, so nothing starts and R waits in the queue; its claim lasts until
    another job takes a free node."""
    w = machine("return")
    w.now = 150.0
    w.finish("O")
    w.waiting["R"] = job("R", 7, 1900.0, submit=0.0)
    assert w.decide().actions == ()
    assert dict(w.cluster.returned) == {"R": (4, 5, 6, 7, 8, 9)}, "nothing else started"
    w.cluster.start(job("X", 1, 10.0), (4,), now=150.0)
    assert not w.cluster.returned, "another job took a free node: the claim lapsed"


def test_a_malleable_victim_resumes_at_the_largest_size_it_can() -> None:
    """10 nodes. Malleable M (8 nodes, minimum 2, 1,000 s) runs on 0-7 from t=0 and rigid X
    on 8-9 until t=5,000. At t=10 on-demand O (8 nodes, 50 s) arrives under N&PAA: M is the
    cheapest victim (a malleable job loses only its setup, here 0 s; X would lose 10 s) and O
    takes nodes 0-7. Y (3 nodes, 100 s) arrives at t=20 and waits (nothing is free). At
    t=60 O ends: M, ahead of Y in the queue, resumes at once at its full size on the 8
    nodes."""
    w = World(10, "N&PAA")
    w.run(job("X", 2, 5000.0), (8, 9))
    w.run(job("M", 8, 1000.0, kind=Kind.MALLEABLE, min_size=2), range(8))
    w.submit(job("O", 8, 50.0, kind=Kind.ONDEMAND, submit=10.0))
    d = w.decide(10.0)
    assert d.actions == (Preempt("M", "O"), Start("O", tuple(range(8))))
    w.submit(job("Y", 3, 100.0, submit=20.0))
    assert w.decide(20.0).actions == ()
    w.now = 60.0
    w.finish("O")
    d = w.decide()
    assert [(a.job, a.nodes) for a in d.actions] == [("M", tuple(range(8)))]


def test_a_shrunk_victim_is_expanded_to_its_original_size() -> None:
    """R12's other half, as before: under N&SPAA, malleable M (8 nodes, min 2) on 0-7 is
    shrunk by 6 for on-demand O (6 nodes) at t=10, keeping nodes 0-1; when O ends at t=60,
    the 6 nodes are owed to M and the next decision expands it back to 8."""
    w = World(10, "N&SPAA")
    w.run(job("X", 2, 5000.0), (8, 9))
    w.run(job("M", 8, 1000.0, kind=Kind.MALLEABLE, min_size=2), range(8))
    w.submit(job("O", 6, 50.0, kind=Kind.ONDEMAND, submit=10.0))
    w.decide(10.0)
    assert w.cluster.running["M"].nodes == (0, 1)
    w.now = 60.0
    w.finish("O")
    assert dict(w.cluster.owed) == {"M": (2, 3, 4, 5, 6, 7)} and not w.cluster.returned
    w.decide()
    assert w.cluster.running["M"].nodes == tuple(range(8))


def test_the_cluster_returns_only_nodes_the_victim_held_and_only_if_it_waits() -> None:
    """Victim V held 0-3 and gave them to O, which started on 0-5 (4-5 were free). When O
    ends, V gets 0-3 back, not 4-5. Had V started again meanwhile, nothing comes back."""
    v = Job("V", Kind.RIGID, 4, 100.0, 0.0)
    o = Job("O", Kind.ONDEMAND, 6, 10.0, 5.0)
    c = Cluster(8)
    c.start(v, (0, 1, 2, 3), now=0.0)
    c.apply(Preempt("V", "O"), now=5.0)
    c.start(o, (0, 1, 2, 3, 4, 5), now=5.0)
    c.finish("O", now=15.0)
    assert dict(c.returned) == {"V": (0, 1, 2, 3)}
    c.check()
    c.start(v, (4, 5, 6, 7), now=15.0)
    assert not c.returned, "the victim started: its claim is met"

    c = Cluster(10)
    c.start(v, (0, 1, 2, 3), now=0.0)
    c.apply(Preempt("V", "O"), now=5.0)
    c.start(o, (0, 1, 2, 3, 4, 5), now=5.0)
    c.start(v, (6, 7, 8, 9), now=6.0)
    c.finish("O", now=15.0)
    assert not c.returned, "V runs again: nothing comes back to it"


def test_a_preemption_without_an_on_demand_job_returns_nothing() -> None:
    """CUP's planned preemptions and failures name no on-demand job: no claim."""
    c = Cluster(4)
    c.start(Job("V", Kind.RIGID, 2, 100.0, 0.0), (0, 1), now=0.0)
    c.apply(Preempt("V"), now=5.0)
    c.start(Job("O", Kind.ONDEMAND, 2, 10.0, 5.0), (0, 1), now=5.0)
    c.finish("O", now=15.0)
    assert not c.returned


def test_a_bad_completion_word_is_one_sentence() -> None:
    with pytest.raises(ValueError, match="unknown completion 'later'; choose return or pool"):
        make_scheduler("N&PAA", completion="later")


def test_the_check_refuses_a_claim_on_a_node_that_is_not_free() -> None:
    c = Cluster(4)
    c.start(Job("V", Kind.RIGID, 2, 100.0, 0.0), (0, 1), now=0.0)
    c.apply(Preempt("V", "O"), now=5.0)
    c.start(Job("O", Kind.ONDEMAND, 2, 10.0, 5.0), (0, 1), now=5.0)
    c.finish("O", now=15.0)
    c._lending.returned["V"] = (0, 1, 2)
    c._free.remove({2})
    c._reserved["n"] = c._free.empty()
    c._reserved["n"].add((2,))
    with pytest.raises(ClusterError, match="not all free"):
        c.check()
