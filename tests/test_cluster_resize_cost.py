"""The cluster's shrink and expand under a charge per resize (``Job.resize_cost``) end the
job where the policy's plan says, worked out by hand."""

from __future__ import annotations

import pytest

from metaq_py.cluster import Cluster, ClusterError
from metaq_py.policy import Shrink, Start
from metaq_py.policy.model import Job, Kind
from metaq_py.policy.work import Work
from tests.policy_world import World, job


def m(*, fixed: bool = False) -> Job:
    """M: malleable, 4 nodes at most, 1 at least, 100 s at 4 nodes, setup 10 s, and each
    resize costing its setup (at the new size, or with ``fixed`` 10 s at any size)."""
    return job("M", 4, 100.0, kind=Kind.MALLEABLE, min_size=1, runtime=100.0, setup=10.0,
               resize_cost=10.0, resize_fixed=fixed)


# at the new size: 60 s left at 4 nodes is 120 s at 2, plus the setup at 2 nodes (10 * 4 / 2):
# 40 + 140; then 100 s left at 2 nodes is 50 s at 4, plus the setup at 4 nodes (10): 80 + 60.
# Fixed: 40 + 120 + 10; then 90 s at 2 nodes is 45 s at 4, plus 10: 80 + 55
@pytest.mark.parametrize(("fixed", "shrunk", "grown"), [(False, 180.0, 140.0),
                                                         (True, 170.0, 135.0)])
def test_a_shrink_and_an_expand_end_where_the_policy_planned(fixed: bool, shrunk: float,
                                                             grown: float) -> None:
    c = Cluster(4)
    c.start(m(fixed=fixed), (0, 1, 2, 3), now=0.0)
    work = Work(c.snapshot(now=40.0, waiting=()), oracle=False)
    lent = work.shrink("M", 2, for_job=None)
    planned = work.changed["M"]
    got = c.shrink("M", lent, now=40.0)
    assert lent == (2, 3) and planned.nodes == got.nodes == (0, 1)
    assert planned.end == got.end == shrunk and planned.true_end == got.true_end == shrunk
    work = Work(c.snapshot(now=80.0, waiting=()), oracle=False)
    work.expand("M", (2, 3))
    planned = work.changed["M"]
    got = c.expand("M", (2, 3), now=80.0)
    assert planned.end == got.end == grown and planned.true_end == got.true_end == grown
    c.check()


def test_spaa_shrinks_for_an_arrival_and_gives_back_with_both_charges() -> None:
    w = World(4, "N&SPAA")
    w.run(m(), range(4))
    w.submit(job("O", 2, 10.0, kind=Kind.ONDEMAND, runtime=10.0, submit=50.0))
    d = w.decide(at=50.0)
    assert [type(a) for a in d.actions] == [Shrink, Start]
    # 50 s left at 4 nodes is 100 s at 2, plus 20 for the shrink: 50 + 120
    held = w.holder("M")
    assert held is not None and held.nodes == (0, 1) and held.end == 170.0
    w.now = 60.0
    w.finish("O")
    w.decide()
    # the 2 nodes come back at 60: 110 s left at 2 nodes is 55 s at 4, plus 10: 60 + 65
    held = w.holder("M")
    assert held is not None and held.nodes == (0, 1, 2, 3) and held.end == 125.0
    # free, M would end at 105 (tests/sim/engine/test_malleable_speedup.py): the two charges
    # (20 s at 2 nodes, worth 10 s at 4, and 10 s at 4) add 20 s


def test_a_node_owed_to_a_charged_lender_is_reclaimed_without_resizing_it() -> None:
    c = Cluster(4)
    c.start(m(), (0, 1, 2, 3), now=0.0)
    c.shrink("M", (2, 3), now=40.0, for_job="O")
    c.start(job("O", 2, 10.0, kind=Kind.ONDEMAND, runtime=10.0), (2, 3), now=40.0)
    c.finish("O", now=50.0)
    before = c.running["M"]
    assert before.end == 180.0 and c.owed == {"M": (2, 3)}
    assert c.reclaim(3) == "M"
    # the node is free and no longer owed; the lender paid nothing more and kept its end
    assert c.owed == {"M": (2,)} and 3 in c.free and c.running["M"] == before
    with pytest.raises(ClusterError, match=r"^node 3 is owed to no lender$"):
        c.reclaim(3)
    c.check()
