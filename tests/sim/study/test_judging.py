"""How the study judges one part of an observation (:mod:`sim.study.judging`), worked by
hand."""

from __future__ import annotations

import math

import pytest

from sim.study.judging import Paired, Word, _band


def test_the_interval_of_a_mean_is_students_over_the_runs() -> None:
    """Runs 1, 2 and 3: mean 2, sample standard deviation sqrt((1 + 0 + 1) / 2) = 1, so the
    95% interval is 2 -+ t(0.975, 2 dof) / sqrt(3) = 2 -+ 4.303 / 1.732."""
    low, high, n = Paired({("W5", 0): 1.0, ("W5", 1): 2.0, ("W5", 2): 3.0}).interval()
    half = 4.303 / math.sqrt(3)
    assert n == 3
    assert low == pytest.approx(2 - half, abs=1e-3) and high == pytest.approx(2 + half, abs=1e-3)


def test_an_interval_that_touches_the_band_is_not_wholly_outside_it() -> None:
    """The band's part holds when the interval lies inside it, is contradicted when it lies
    wholly outside, and is undecided when it reaches an edge: touching one counts."""
    x = Paired({("W5", 0): 1.0, ("W5", 1): 2.0, ("W5", 2): 3.0})
    low, high, _ = x.interval()
    assert _band(x, low - 1, low) is Word.UNDECIDED
    assert _band(x, high, high + 1) is Word.UNDECIDED
    assert _band(x, low - 2, low - 1) is Word.CONTRADICTED
    assert _band(x, low, high) is Word.HOLDS
