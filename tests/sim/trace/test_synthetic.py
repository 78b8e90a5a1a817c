"""The synthetic Theta-like workload: seeded, Theta-shaped, at the requested load, and fast."""

from __future__ import annotations

import time

import numpy as np
import pytest

from sim.trace.synthetic import synthetic_trace


def test_same_seed_same_trace_and_different_seed_different_trace() -> None:
    a, b, c = (synthetic_trace(jobs=3000, seed=s) for s in (7, 7, 8))
    for name in ("submit", "runtime", "walltime", "nodes", "project"):
        assert np.array_equal(getattr(a.jobs, name), getattr(b.jobs, name))
    assert not np.array_equal(a.jobs.nodes, c.jobs.nodes)


def test_trace_is_clean_and_meets_the_load() -> None:
    trace = synthetic_trace(jobs=20_000, load=0.6, seed=2)
    jobs = trace.jobs
    assert len(trace) == 20_000 and trace.nodes == 4360 and trace.format == "synthetic"
    assert list(jobs.id) == list(range(1, 20_001))
    assert jobs.submit[0] == 0 and np.all(np.diff(jobs.submit) >= 0)
    assert np.all((jobs.runtime >= 1) & (jobs.runtime <= jobs.walltime))
    assert np.all((jobs.nodes >= 128) & (jobs.nodes <= 4360))
    assert trace.offered_load() == pytest.approx(0.6, rel=1e-3)
    assert trace.report.dropped == 0 and trace.report.lines() == []


def test_distributions_look_like_theta() -> None:
    jobs = synthetic_trace(jobs=100_000, seed=3).jobs
    # Theta 2022: 56% of jobs at 128 nodes, 18% at 256, 5% at 1,024; mean size 311
    assert (jobs.nodes == 128).mean() == pytest.approx(0.56, abs=0.02)
    assert (jobs.nodes == 256).mean() == pytest.approx(0.18, abs=0.02)
    assert (jobs.nodes == 1024).mean() == pytest.approx(0.05, abs=0.01)
    assert jobs.nodes.mean() == pytest.approx(311, rel=0.1)
    # 29% use their whole walltime; bigger jobs ask for longer walltimes
    assert (jobs.runtime >= 0.99 * jobs.walltime).mean() == pytest.approx(0.29, abs=0.03)
    small = jobs.walltime[jobs.nodes == 128].mean()
    large = jobs.walltime[jobs.nodes >= 1024].mean()
    assert large > 3 * small
    # arrivals are bursty: hourly counts are overdispersed
    hourly = np.bincount((jobs.submit // 3600).astype(int))
    assert hourly.var() / hourly.mean() > 3


def test_project_counts_are_skewed() -> None:
    jobs = synthetic_trace(jobs=50_000, seed=4).jobs
    _, counts = np.unique(jobs.project.astype(str), return_counts=True)
    counts = np.sort(counts)[::-1]
    top_tenth = counts[: max(1, len(counts) // 10)].sum() / counts.sum()
    assert top_tenth > 0.4  # a tenth of the projects submit well over a tenth of the jobs


def test_small_machines_and_bad_arguments() -> None:
    trace = synthetic_trace(jobs=500, nodes=256, seed=1)
    assert trace.jobs.nodes.max() <= 256
    with pytest.raises(ValueError):
        synthetic_trace(jobs=0)
    with pytest.raises(ValueError):
        synthetic_trace(jobs=10, load=0)


def test_a_million_jobs_take_seconds() -> None:
    started = time.perf_counter()
    trace = synthetic_trace(jobs=1_000_000, seed=5)
    assert len(trace) == 1_000_000
    assert time.perf_counter() - started < 10
