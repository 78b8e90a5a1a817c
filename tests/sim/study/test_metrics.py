"""Hand-worked figures of :mod:`sim.study.metrics` that a run's summary does not hold."""

from __future__ import annotations

import pytest

from metaq_py.hybrid import Kind
from sim.run.metrics import Columns, JobOutcome
from sim.study.metrics import window_runtimes


def _job(id: int, submit: float, runtime: float) -> JobOutcome:
    return JobOutcome(id=id, kind=Kind.RIGID, size=1, submit=submit, start=submit,
                      end=submit + runtime, runtime=runtime, useful_node_seconds=runtime,
                      preemptions=0, shrinks=0, lost_node_seconds=0.0)


def test_the_window_is_counted_in_mean_runtimes_of_the_jobs_submitted_in_it() -> None:
    # submitted in [100, 1000]: runtimes 100 and 200, mean 150; the window lasts 900 s
    jobs = Columns.of([_job(1, 0.0, 5000.0), _job(2, 100.0, 100.0), _job(3, 1000.0, 200.0),
                       _job(4, 2000.0, 7.0)])
    assert window_runtimes(jobs, window=(100.0, 1000.0)) == pytest.approx(6.0)


def test_an_empty_window_has_no_figure() -> None:
    jobs = Columns.of([_job(1, 0.0, 50.0)])
    assert window_runtimes(jobs, window=(10.0, 20.0)) is None
    assert window_runtimes(jobs, window=(0.0, 0.0)) is None
