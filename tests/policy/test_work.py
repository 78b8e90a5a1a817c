"""A decision's working state (:mod:`metaq_py.policy.work`): the running jobs' end order it
sorts itself when the cluster keeps no list for it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from metaq_py.cluster import Cluster
from metaq_py.policy.work import ending_order
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
