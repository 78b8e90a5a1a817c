"""The machine sampled over a run: one sample per instant, in order, as the run's series."""

from __future__ import annotations

import numpy as np

from metaq_py.policy.spans import Spans
from sim.engine.samples import MachineSamples


def test_each_sample_is_one_row_of_the_series_with_the_reserved_pools_summed() -> None:
    ids = tuple(range(16))
    samples = MachineSamples()
    samples.take(0.0, 4, 2, {})
    samples.take(10.0, 8, 0, {"n1": Spans(ids, [0, 3]), "n2": Spans(ids, [5, 7, 9, 10])})
    samples.take(25.5, 0, 7, {"n1": Spans(ids)})
    assert len(samples) == 3
    series = samples.series()
    assert len(series) == 3
    assert series.time.dtype == np.float64 and series.time.tolist() == [0.0, 10.0, 25.5]
    assert series.busy.dtype == np.int64 and series.busy.tolist() == [4, 8, 0]
    assert series.queued.dtype == np.int64 and series.queued.tolist() == [2, 0, 7]
    assert series.reserved.dtype == np.int64 and series.reserved.tolist() == [0, 6, 0]


def test_no_instant_makes_an_empty_series() -> None:
    series = MachineSamples().series()
    assert len(series) == 0
    assert all(len(column) == 0 for column in
               (series.time, series.busy, series.queued, series.reserved))
