"""A charge per shrink and expand (``Job.resize_cost``): :func:`resized` moves a malleable job's
end later by its resize cost at the new size; with no cost it gives what it always gave."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from metaq_py.policy.model import Job, Kind, Running
from metaq_py.policy.work import resize_charge, resized
from tests.policy_world import job

MALLEABLE = Kind.MALLEABLE


def before(r: Running, nodes: tuple[int, ...], now: float) -> Running:
    """``resized`` as it was before the resize cost, line for line (commit 5450b67)."""
    job = r.job
    f = (len(r.nodes) / len(nodes) if not job.serial
         else job.slowdown(len(nodes)) / job.slowdown(len(r.nodes)))
    end = now + max(0.0, r.end - now) * f
    true_end = None if r.true_end is None else now + max(0.0, r.true_end - now) * f
    return Running(r.job, nodes, r.start, end, true_end, r.last_checkpoint, r.borrowed)


def m(cost: float = 10.0, **kw: object) -> Job:
    """M: malleable, 4 nodes at most, 1 at least, 100 s at 4 nodes, setup 10 s."""
    return job("M", 4, 100.0, kind=MALLEABLE, min_size=1, runtime=100.0, setup=10.0,
               resize_cost=cost, **kw)


def test_a_shrink_and_an_expand_with_the_charge_end_where_worked_out_by_hand() -> None:
    r = Running(m(), (0, 1, 2, 3), 0.0, 100.0, 100.0)
    # at 40, 60 s are left at 4 nodes: 120 s at 2, plus the setup at 2 nodes, 10 * 4 / 2 = 20
    shrunk = resized(r, (0, 1), 40.0)
    assert (shrunk.end, shrunk.true_end) == (180.0, 180.0)
    # at 80, 100 s are left at 2 nodes: 50 s at 4, plus the setup at 4 nodes, 10
    grown = resized(shrunk, (0, 1, 2, 3), 80.0)
    assert (grown.end, grown.true_end) == (140.0, 140.0)
    # free, the same two resizes end at 160 and then 120
    free = Running(m(0.0), (0, 1, 2, 3), 0.0, 100.0, 100.0)
    assert resized(resized(free, (0, 1), 40.0), (0, 1, 2, 3), 80.0).end == 120.0
    assert (resize_charge(m(), 2), resize_charge(m(), 4), resize_charge(m(0.0), 2)) \
        == (20.0, 10.0, 0.0)


def test_a_fixed_charge_is_the_same_time_at_any_size() -> None:
    r = Running(m(resize_fixed=True), (0, 1, 2, 3), 0.0, 100.0, 100.0)
    # at 40, 60 s left at 4 nodes is 120 s at 2, plus 10: ends 170; at 80, 90 s at 2 nodes is
    # 45 s at 4, plus 10: ends 135
    shrunk = resized(r, (0, 1), 40.0)
    assert (shrunk.end, shrunk.true_end) == (170.0, 170.0)
    grown = resized(shrunk, (0, 1, 2, 3), 80.0)
    assert (grown.end, grown.true_end) == (135.0, 135.0)
    assert resize_charge(r.job, 1) == resize_charge(r.job, 4) == 10.0


def test_only_a_malleable_job_has_a_resize_cost_and_never_a_negative_one() -> None:
    with pytest.raises(ValueError, match=r"^job 'R': only a malleable job has a resize cost, "
                                         r"0 seconds or more, got 5.0$"):
        job("R", 2, resize_cost=5.0)
    with pytest.raises(ValueError, match=r"got -1\.0$"):
        m(-1.0)
    assert m().resize_cost == 10.0 and job("R", 2).resize_cost == 0.0


sizes = st.integers(min_value=1, max_value=64)
times = st.floats(min_value=0.0, max_value=1e6, allow_nan=False)


@st.composite
def resizes(draw: st.DrawFn, cost: st.SearchStrategy[float]
            ) -> tuple[Running, tuple[int, ...], float]:
    """A running malleable job, the nodes it is moved to, and when."""
    size = draw(sizes)
    held = draw(st.integers(1, size))
    k = draw(st.integers(1, size))
    serial = draw(st.sampled_from((0.0, 0.05)))
    start, now, end = sorted((draw(times), draw(times), draw(times)))
    true_end = draw(st.one_of(st.none(), st.floats(min_value=start, max_value=end)))
    j = Job("M", MALLEABLE, size, 100.0, 0.0, 1, serial=serial, setup=draw(cost),
            resize_cost=draw(cost), resize_fixed=draw(st.booleans()))
    return Running(j, tuple(range(held)), start, end, true_end), tuple(range(k)), now


@given(resizes(st.just(0.0)))
def test_without_a_cost_resized_is_what_it_was(case: tuple[Running, tuple[int, ...], float]
                                               ) -> None:
    r, nodes, now = case
    assert resized(r, nodes, now) == before(r, nodes, now)


@given(resizes(st.floats(min_value=0.0, max_value=1e5, allow_nan=False)))
def test_with_a_cost_a_resized_job_never_ends_earlier(
        case: tuple[Running, tuple[int, ...], float]) -> None:
    r, nodes, now = case
    charged, free = resized(r, nodes, now), before(r, nodes, now)
    charge = resize_charge(r.job, len(nodes))
    if r.job.resize_fixed:
        assert charge == r.job.resize_cost
    else:
        assert charge >= r.job.resize_cost  # never cheaper than at full size
    assert charged.end >= free.end and charged.end == pytest.approx(free.end + charge)
    if r.true_end is None:
        assert charged.true_end is None
    else:
        assert free.true_end is not None and charged.true_end is not None
        assert charged.true_end >= free.true_end
        assert charged.true_end == pytest.approx(free.true_end + charge)
    assert (charged.nodes, charged.start, charged.job) == (nodes, r.start, r.job)
