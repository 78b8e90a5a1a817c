"""NodePool, a decision's copy of a live pool: distinct nodes, lowest (or highest) first, live
pool untouched."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from metaq_py.policy.pool import NodePool
from metaq_py.policy.spans import Spans

TOTAL = 48


FREE = st.sets(st.integers(0, TOTAL - 1))
TAKES = st.lists(st.integers(1, 6), max_size=12)
BACK = st.sets(st.integers(TOTAL, TOTAL + 10), max_size=5)


def hand_out(free: set[int], takes: list[int], back: set[int], spans: bool, *,
             down: bool) -> list[int]:
    """The nodes a pool over the live ``free`` nodes (as Spans or a frozenset), given
    ``back``, hands out for ``takes`` in order (stopping at the first take too large, which must
    be refused), checking each take is distinct and ascending and the live pool untouched."""
    live: Spans | frozenset[int]
    if spans:
        live = Spans.full(TOTAL)
        live.remove(set(range(TOTAL)) - free)
    else:
        live = frozenset(free)
    before = sorted(live)
    pool = NodePool(live, down=down)
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
    assert pool.count == len(free) + len(back) - len(handed)
    assert sorted(live) == before  # the live pool is never changed by a decision
    return handed


@given(free=FREE, takes=TAKES, back=BACK, spans=st.booleans(), down=st.booleans())
def test_given_back_nodes_come_first_then_the_lowest_or_highest_live_ids(
        free: set[int], takes: list[int], back: set[int], spans: bool, down: bool) -> None:
    handed = hand_out(free, takes, back, spans, down=down)
    if len(handed) <= len(back):
        assert set(handed) <= back
    else:
        taken = len(handed) - len(back)
        ids = sorted(free, reverse=down)  # walking down hands out the highest first
        assert set(handed) == back | set(ids[:taken])


def test_walking_down_across_runs_by_hand() -> None:
    live = Spans.full(10)
    live.remove({3, 4, 7})  # runs 0-2, 5-6, 8-9
    pool = NodePool(live, down=True)
    assert pool.take(1) == (9,)
    assert pool.take(3) == (5, 6, 8)
    assert pool.take(3) == (0, 1, 2)
    assert pool.count == 0


def test_a_pool_hands_out_its_lowest_ids_first_unless_told_otherwise() -> None:
    """NodeOrder's default, lowest-first, is also the pool's own."""
    assert NodePool({5, 1, 3, 7}).take(2) == (1, 3)
    assert NodePool({5, 1, 3, 7}, down=True).take(2) == (5, 7)
