"""A decision's working state (:mod:`metaq_py.policy.work`): the running jobs' end order it
sorts itself when the cluster keeps no list for it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from metaq_py.cluster import Cluster
from metaq_py.policy import Notice
from metaq_py.policy.model import Kind
from metaq_py.policy.work import Work, ending_order
from tests.policy_world import job

# each job: its nodes (a block of the machine's 8) and its walltime and runtime
RUNS = st.lists(st.tuples(st.integers(1, 3), st.sampled_from([10.0, 20.0]),
                          st.sampled_from([5.0, 10.0, None])), min_size=1, max_size=4)


@settings(max_examples=200, deadline=None)
@given(RUNS, st.randoms(use_true_random=False))
def test_the_end_order_sorted_here_is_the_one_the_cluster_keeps(
        runs: list[tuple[int, float, float | None]], rng: object) -> None:
    """A Cluster that keeps only one of its two end-ordered lists leaves the other to the
    decision, which must sort the running jobs "to the same order" (ending.EndOrder): jobs
    that end together are ordered by their lowest node, whatever order their nodes are in."""
    kept_both, kept_one = Cluster(8), Cluster(8, ends="end")
    nodes = list(range(8))
    rng.shuffle(nodes)  # type: ignore[attr-defined]
    for i, (k, wall, run) in enumerate(runs):
        mine, nodes = nodes[:k], nodes[k:]
        if not mine:
            break
        for c in (kept_both, kept_one):
            c.start(job(i, len(mine), wall, runtime=run), tuple(sorted(mine)), now=0.0)
    both, one = (c.snapshot(now=0.0, waiting=[]) for c in (kept_both, kept_one))
    assert one.ending_true is None
    assert list(ending_order(one, oracle=True)) == list(both.ending_true or ())
    assert list(ending_order(one, oracle=False)) == list(both.ending or ())


def test_a_job_shrunk_then_preempted_in_one_decision_releases_nothing_later() -> None:
    """Preempted, a job hands its nodes back now: the decision must not also expect the
    nodes of its shrunk self to free at its end."""
    c = Cluster(4)
    c.start(job("M", 4, 100.0, kind=Kind.MALLEABLE, min_size=1), (0, 1, 2, 3), now=0.0)
    work = Work(c.snapshot(now=0.0, waiting=[]), oracle=False)
    assert list(work.releases()) == [(100.0, 4)]
    work.shrink("M", 2, for_job=None)
    assert list(work.releases()) == [(200.0, 2)], "2 nodes for twice as long"
    assert work.preempt("M") == (0, 1)
    assert list(work.releases()) == []
    assert work.free.count == 2


def test_a_preempted_borrower_gives_its_nodes_back_to_the_reservation_while_it_holds() -> None:
    """A job backfilled onto a notice's reserved nodes gives them back to that reservation
    when preempted (R7), or to the free pool once the notice is closed."""
    for closed in (False, True):
        c = Cluster(4)
        c.add_notice(Notice("n1", 2, 500.0, 100.0, 0.0))
        c.reserve("n1", (2, 3))
        c.start(job("B", 2, 50.0), (2, 3), now=0.0, borrowed="n1")
        work = Work(c.snapshot(now=0.0, waiting=[]), oracle=False)
        if closed:
            work.close("n1", release=True)
        assert work.preempt("B") == (2, 3)
        assert (work.reserved("n1").count, work.free.count) == ((0, 4) if closed else (2, 2))
