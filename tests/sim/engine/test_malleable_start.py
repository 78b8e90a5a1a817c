"""The smallest size a malleable job may start at: its minimum (``largest``, the default: it
starts at the largest size the policy allows) or its full size (``full``), on a hand-made
workload whose two answers are known."""

from __future__ import annotations

import pytest

from metaq_py.policy.model import Kind
from sim.engine.core import simulate
from sim.engine.waiting import MalleableStart
from tests.sim_worlds import Row, tiny_hybrid

MALLEABLE = Kind.MALLEABLE


def two_malleable(*extra: Row):
    """4 nodes. M1 (2 nodes, 100 s, minimum 1) runs from 0; M2 (4 nodes, 100 s at 4 nodes,
    minimum 1) comes at 10, when 2 nodes are free."""
    return tiny_hybrid([Row(submit=0, size=2, walltime=100, runtime=100, kind=MALLEABLE,
                            min_size=1),
                        Row(submit=10, size=4, walltime=100, runtime=100, kind=MALLEABLE,
                            min_size=1), *extra], nodes=4)


def test_by_default_a_malleable_job_starts_on_the_nodes_free() -> None:
    # M2 starts at 10 on the 2 free nodes: 400 node-seconds at 2 nodes end at 210
    m1, m2 = simulate(two_malleable(), policy="easy").outcomes
    assert (m1.start, m1.end) == (0, 100)
    assert (m2.start, m2.end) == (10, 210)


def test_full_start_waits_for_the_full_size() -> None:
    # M2 waits for 4 nodes: it starts when M1 ends, at 100, and ends at 200
    m1, m2 = simulate(two_malleable(), policy="easy", malleable_start="full").outcomes
    assert (m1.start, m1.end) == (0, 100)
    assert (m2.start, m2.end) == (100, 200)


def test_a_job_started_full_keeps_its_real_minimum_for_shrinking() -> None:
    # O (2 nodes, 10 s) arrives at 150 with no node free: SPAA shrinks M2 from 4 to 2 nodes
    # (its real minimum is 1) rather than preempt it. M2 did 200 of its 400 node-seconds by
    # 150, 20 more at 2 nodes by 160, then gets its nodes back: 180 / 4 = 45 s, ending at 205.
    o_row = Row(submit=150, size=2, walltime=10, runtime=10, kind=Kind.ONDEMAND)
    _, m2, o = simulate(two_malleable(o_row), policy="N&SPAA",
                        malleable_start="full").outcomes
    assert (o.start, o.end) == (150, 160)
    assert (m2.start, m2.preemptions, m2.shrinks) == (100, 0, 1)
    assert m2.end == pytest.approx(205)


def test_an_unknown_malleable_start_is_refused_in_one_sentence() -> None:
    with pytest.raises(ValueError, match=r"^unknown malleable_start 'smallest'; choose "
                                         r"largest or full$"):
        simulate(two_malleable(), policy="easy", malleable_start="smallest")
    assert MalleableStart.of("largest") is MalleableStart.LARGEST
