"""The one queue order."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from metaq_py.policy.model import Kind
from metaq_py.policy.order import in_order, ondemand_first, queue_key
from tests.policy_world import job


def test_rank_then_priority_then_submit() -> None:
    a = job("a", 1, submit=5.0, rank=1)
    b = job("b", 1, submit=9.0, rank=0, priority=0)
    c = job("c", 1, submit=7.0, rank=0, priority=3)
    d = job("d", 1, submit=1.0, rank=0, priority=0)
    assert [j.id for j in in_order([a, b, c, d])] == ["c", "d", "b", "a"]


def test_ordered_input_is_trusted() -> None:
    a, b = job("a", 1, submit=5.0), job("b", 1, submit=1.0)
    assert [j.id for j in in_order([a, b], ordered=True)] == ["a", "b"]


def test_ondemand_first_is_stable() -> None:
    jobs = [job("r1", 1), job("o1", 1, kind=Kind.ONDEMAND), job("r2", 1),
            job("o2", 1, kind=Kind.ONDEMAND)]
    assert [j.id for j in ondemand_first(jobs)] == ["o1", "o2", "r1", "r2"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(-2, 2), st.integers(0, 5)),
                max_size=20))
def test_order_is_sorted_and_ties_keep_input_order(keys: list[tuple[int, int, int]]) -> None:
    jobs = [job(i, 1, rank=r, priority=p, submit=float(s)) for i, (r, p, s) in enumerate(keys)]
    out = in_order(jobs)
    assert sorted(j.id for j in out) == list(range(len(jobs)))
    for x, y in pairwise(out):
        assert queue_key(x) < queue_key(y) or (queue_key(x) == queue_key(y) and x.id < y.id)
