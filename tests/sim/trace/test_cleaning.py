"""The cleaning rules: each one applied, counted, and described in one human line."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.trace.cleaning import clean
from sim.trace.columns import JobTable, TraceJob


def job(i: int, **kw: object) -> TraceJob:
    values: dict[str, object] = {"submit": float(i), "runtime": 100.0, "nodes": 4,
                                 "walltime": 200.0}
    values.update(kw)
    return TraceJob(id=i, **values)  # type: ignore[arg-type]


def test_every_rule_is_applied_and_counted() -> None:
    jobs = [
        job(1),
        job(2, submit=None),
        job(3, runtime=None),
        job(4, runtime=0.0),
        job(5, nodes=None, requested_nodes=8),      # takes its requested size
        job(6, nodes=None),
        job(7, nodes=0),
        job(8, walltime=None),
        job(9, nodes=20),                           # larger than the 16-node machine
        job(10, runtime=500.0),                     # runs past its walltime
        job(1, submit=0.5),                         # repeated id, and out of order
    ]
    table, report = clean(JobTable.from_jobs(jobs), nodes=16)
    assert report.records == 11 and report.kept == 4 and report.dropped == 7
    assert (report.no_submit, report.no_runtime, report.nonpositive_runtime) == (1, 1, 1)
    assert (report.size_from_request, report.no_size, report.nonpositive_size) == (1, 1, 1)
    assert (report.no_walltime, report.oversize_dropped, report.capped_runtime) == (1, 1, 1)
    assert (report.renumbered_ids, report.out_of_order) == (1, 1)
    assert list(table.submit) == [0.5, 1.0, 5.0, 10.0]
    assert list(table.id) == [11, 1, 5, 10]
    assert list(table.nodes) == [4, 4, 8, 4]
    assert list(table.runtime) == [100.0, 100.0, 100.0, 200.0]
    assert report.lines() == [
        "dropped 1 jobs with no submit time",
        "dropped 1 jobs with unknown runtime",
        "dropped 1 jobs with runtime <= 0",
        "took the requested size for 1 jobs with no allocated size",
        "dropped 1 jobs with unknown size",
        "dropped 1 jobs with size <= 0",
        "dropped 1 jobs with no requested walltime",
        "dropped 1 jobs larger than the machine (16 nodes)",
        "capped 1 runtimes at their requested walltime",
        "gave fresh ids to 1 jobs whose id was unknown or repeated",
        "sorted 1 jobs that were out of submit order",
    ]
    assert report.to_dict()["dropped"] == 7


def test_variants_keep_jobs_instead_of_dropping_them() -> None:
    jobs = [job(1, walltime=None), job(2, nodes=40), job(3, runtime=900.0)]
    table, report = clean(JobTable.from_jobs(jobs), nodes=16, missing_walltime="runtime",
                          oversize="clamp", cap_runtime=False)
    assert report.kept == 3 and report.dropped == 0
    assert (report.walltime_from_runtime, report.oversize_clamped) == (1, 1)
    assert list(table.walltime) == [100.0, 200.0, 200.0]
    assert list(table.nodes) == [4, 16, 4]
    assert list(table.runtime) == [100.0, 100.0, 900.0]
    assert "shrank 1 jobs larger than the machine to 16 nodes" in report.lines()


def test_equal_submits_keep_file_order() -> None:
    jobs = [job(1, submit=5.0), job(2, submit=3.0), job(3, submit=3.0), job(4, submit=3.0)]
    table, report = clean(JobTable.from_jobs(jobs), nodes=16)
    assert list(table.id) == [2, 3, 4, 1]
    assert report.out_of_order == 3


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError, match="oversize"):
        clean(JobTable.from_jobs([job(1)]), nodes=4, oversize="shrink")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one node"):
        clean(JobTable.from_jobs([job(1)]), nodes=0)


maybe = st.one_of(st.none(), st.integers(-3, 50).map(float))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(maybe, maybe, st.one_of(st.none(), st.integers(-2, 40)), maybe),
                max_size=30))
def test_cleaned_traces_meet_their_invariants(rows: list[tuple]) -> None:
    jobs = [job(i + 1, submit=s, runtime=r, nodes=n, walltime=w)
            for i, (s, r, n, w) in enumerate(rows)]
    table, report = clean(JobTable.from_jobs(jobs), nodes=32)
    assert report.records == len(rows) == report.kept + report.dropped
    assert len(table) == report.kept
    assert np.all(np.diff(table.submit) >= 0)
    assert np.all((table.nodes >= 1) & (table.nodes <= 32))
    assert np.all((table.runtime > 0) & (table.runtime <= table.walltime))
    assert len(set(table.id.tolist())) == len(table)


def test_a_start_before_its_submit_leaves_the_recorded_wait_unknown() -> None:
    jobs = [job(1, wait=30.0), job(2, wait=-120.0), job(3, wait=0.0), job(4, wait=-1e-3)]
    table, report = clean(JobTable.from_jobs(jobs), nodes=16)
    assert report.kept == 4 and report.negative_wait == 2
    assert np.isnan(table.wait[[1, 3]]).all() and list(table.wait[[0, 2]]) == [30.0, 0.0]
    assert report.lines() == ["found 2 jobs whose recorded start precedes their submit: their "
                              "recorded wait is left unknown"]
