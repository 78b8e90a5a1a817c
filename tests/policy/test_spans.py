"""Spans, the run-length node pool, against a plain Python set doing the same operations."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from metaq_py.policy.spans import Spans, size

TOTAL = 64


def _canonical(spans: Spans) -> None:
    """The bounds are strictly increasing, runs are non-empty and never touch."""
    b = spans.bounds
    assert len(b) % 2 == 0
    assert all(x < y for x, y in pairwise(b))
    assert len(spans) == size(b) == len(set(spans))


node_sets = st.sets(st.integers(0, TOTAL - 1))


def _pool(nodes: set[int]) -> Spans:
    """A pool of ids ``0 .. TOTAL-1`` holding exactly ``nodes``."""
    spans = Spans.full(TOTAL)
    spans.remove(set(range(TOTAL)) - nodes)
    return spans


@given(start=node_sets, ops=st.lists(st.tuples(st.booleans(), node_sets), max_size=20))
@settings(max_examples=300)
def test_add_and_remove_match_a_set(start: set[int], ops: list[tuple[bool, set[int]]]) -> None:
    spans = _pool(start)
    model = set(start)
    for adding, nodes in ops:
        if adding:
            if nodes & model:
                with pytest.raises(ValueError):
                    spans.add(nodes)
            else:
                spans.add(nodes)
                model |= nodes
        elif nodes <= model:
            spans.remove(nodes)
            model -= nodes
        else:
            with pytest.raises(ValueError):
                spans.remove(nodes)
        assert set(spans) == model
        assert list(spans) == sorted(model)
        _canonical(spans)


@given(free=node_sets, want=st.lists(st.integers(-3, TOTAL + 3), max_size=12))
@settings(max_examples=500)
def test_claim_takes_exactly_ascending_free_nodes_or_nothing(free: set[int],
                                                             want: list[int]) -> None:
    spans = _pool(free)
    before = list(spans.bounds)
    got = spans.claim(tuple(want))
    valid = all(a < b for a, b in pairwise(want)) and set(want) <= free
    if not valid:
        assert got is None and spans.bounds == before
        return
    assert got is not None
    bounds, canon = got
    assert canon == tuple(want)
    assert set(spans) == free - set(want)
    assert spans.nodes(bounds) == canon
    _canonical(spans)


@given(free=node_sets, k=st.integers(1, TOTAL))
def test_claim_of_a_lowest_first_take_is_the_fast_single_run(free: set[int], k: int) -> None:
    spans = _pool(free)
    take = tuple(sorted(free)[:k])
    got = spans.claim(take)
    assert got is not None and got[1] == take
    assert set(spans) == free - set(take)
    spans.give_runs(got[0])
    assert set(spans) == free
    _canonical(spans)


@given(free=node_sets, back=node_sets)
@settings(max_examples=500)
def test_give_back_adds_runs_clear_of_the_pool_or_nothing(free: set[int],
                                                          back: set[int]) -> None:
    spans = _pool(free)
    before = list(spans.bounds)
    runs = _pool(back)  # the runs of ``back``: one or many
    gave = spans.give_back(list(runs.bounds))
    assert gave == (not back & free)
    if gave:
        assert set(spans) == free | back
    else:
        assert spans.bounds == before
    _canonical(spans)


def test_claim_refuses_what_is_not_node_ids() -> None:
    spans = Spans.full(8)
    assert spans.claim(("a", "b")) is None
    assert spans.claim((1.5,)) is None
    assert spans.claim(()) == ([], ())
    assert len(spans) == 8


@given(free=node_sets, a=st.integers(0, TOTAL - 1), n=st.integers(1, 8))
@settings(max_examples=300)
def test_claim_of_consecutive_ids_takes_them_only_when_all_are_free(free: set[int], a: int,
                                                                    n: int) -> None:
    """A run of consecutive ids, the shape a decision's take usually has: claimed whole when
    every id is free, else refused with nothing changed, even when it starts in a free run."""
    spans = _pool(free)
    before = list(spans.bounds)
    want = tuple(range(a, min(a + n, TOTAL)))
    got = spans.claim(want)
    if set(want) <= free:
        assert got is not None and got[1] == want
        assert set(spans) == free - set(want)
    else:
        assert got is None and spans.bounds == before
    _canonical(spans)


@example(nodes=[0, 5, 3])
@given(nodes=st.lists(st.integers(0, TOTAL - 1), max_size=8))
@settings(max_examples=300)
def test_runs_are_found_only_for_ascending_distinct_ids(nodes: list[int]) -> None:
    got = Spans.full(TOTAL).runs(tuple(nodes))
    if all(a < b for a, b in pairwise(nodes)):
        assert got is not None and got[1] == tuple(nodes)
        assert [i for lo, hi in zip(got[0][::2], got[0][1::2], strict=True)
                for i in range(lo, hi)] == nodes
    else:
        assert got is None


def test_nodes_named_in_any_order_are_removed_and_added_back() -> None:
    spans = Spans.full(8)
    spans.remove((5, 1, 3))
    assert list(spans) == [0, 2, 4, 6, 7]
    spans.add((3, 5, 1))
    assert list(spans) == list(range(8))
    _canonical(spans)
