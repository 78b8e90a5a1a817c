"""Scaling a trace's load: inter-arrival gaps divided by the factor, nothing else changed."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.trace.scaling import LoadError, scale_load
from tests.sim_worlds import tiny_trace

ROWS = [(100, 4, 600, 500), (160, 2, 300, 300), (400, 8, 900, 100), (400, 1, 60, 60),
        (1000, 3, 120, 100)]


def test_load_one_is_the_identity() -> None:
    trace = tiny_trace(ROWS, nodes=10)
    assert scale_load(trace, 1) is trace
    assert scale_load(trace, 1.0) is trace


def test_load_two_halves_every_gap() -> None:
    trace = tiny_trace(ROWS, nodes=10)
    doubled = scale_load(trace, 2)
    assert doubled.jobs.submit.tolist() == [100, 130, 250, 250, 550]
    assert np.diff(doubled.jobs.submit).tolist() == (np.diff(trace.jobs.submit) / 2).tolist()
    for column in ("id", "nodes", "runtime", "walltime"):
        assert getattr(doubled.jobs, column).tolist() == getattr(trace.jobs, column).tolist()
    assert doubled.offered_load() == pytest.approx(2 * trace.offered_load())
    assert trace.jobs.submit.tolist() == [100, 160, 400, 400, 1000]  # the original is kept


@given(st.lists(st.floats(0, 1e7), min_size=2, max_size=30),
       st.floats(0.1, 10, allow_nan=False))
def test_scaling_keeps_order_and_first_submit(gaps: list[float], factor: float) -> None:
    submits = np.cumsum(gaps)
    trace = tiny_trace([(s, 1, 10, 10) for s in submits], nodes=4)
    scaled = scale_load(trace, factor).jobs.submit
    assert scaled[0] == submits[0]
    assert np.all(np.diff(scaled) >= 0)
    assert np.allclose(np.diff(scaled), np.diff(submits) / factor, rtol=1e-9, atol=1e-6)


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), True, "2"])
def test_bad_factors_are_one_sentence(bad: object) -> None:
    with pytest.raises(LoadError, match="a load factor is a positive number"):
        scale_load(tiny_trace(ROWS, nodes=10), bad)  # type: ignore[arg-type]
