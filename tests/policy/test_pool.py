"""NodePool, a decision's copy of a live pool: distinct nodes, lowest first, live pool untouched."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from metaq_py.policy.pool import NodePool
from metaq_py.policy.spans import Spans

TOTAL = 48


@given(free=st.sets(st.integers(0, TOTAL - 1)), takes=st.lists(st.integers(1, 6), max_size=12),
       back=st.sets(st.integers(TOTAL, TOTAL + 10), max_size=5), spans=st.booleans())
def test_takes_are_distinct_ascending_and_given_back_nodes_come_first(
        free: set[int], takes: list[int], back: set[int], spans: bool) -> None:
    live: Spans | frozenset[int]
    if spans:
        live = Spans.full(TOTAL)
        live.remove(set(range(TOTAL)) - free)
    else:
        live = frozenset(free)
    before = sorted(live)
    pool = NodePool(live)
    pool.give(back)
    handed: list[int] = []
    for k in takes:
        if k > pool.count:
            with pytest.raises(ValueError):
                pool.take(k)
            break
        got = pool.take(k)
        assert list(got) == sorted(got) and len(set(got)) == k
        handed += got
    assert len(handed) == len(set(handed))
    # nodes given back go first, then the lowest live ids
    if len(handed) <= len(back):
        assert set(handed) <= back
    else:
        assert set(handed) == back | set(sorted(free)[:len(handed) - len(back)])
    assert pool.count == len(free) + len(back) - len(handed)
    assert sorted(live) == before  # the live pool is never changed by a decision
