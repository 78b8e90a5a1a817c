"""The checks that make a wrong answer loud: overload, a suspect machine size, a guessed
machine, cleaning that kept little."""

from __future__ import annotations

import math
from pathlib import Path

from sim.trace.loader import load_trace
from sim.trace.sanity import check_trace


def record(job: int, submit: int, runtime: int, procs: int, walltime: int = 1000) -> str:
    return f"{job} {submit} -1 {runtime} {procs} -1 -1 {procs} {walltime} -1 1 " \
           "-1 -1 -1 -1 -1 -1 -1"


def write(tmp_path: Path, header: str, rows: list[str]) -> Path:
    path = tmp_path / "t.swf"
    path.write_text(header + "\n".join(rows) + "\n")
    return path


def test_offered_load_is_work_over_capacity_and_span(tmp_path: Path) -> None:
    # 2 jobs of 100 s on 4 processors, submitted 100 s apart on 8 processors:
    # 2 * 100 * 4 / (8 * 100) = 100%, which is not yet an overload.
    path = write(tmp_path, "; MaxProcs: 8\n", [record(1, 0, 100, 4), record(2, 100, 100, 4)])
    check = check_trace(load_trace(path))
    assert check.offered_load == 1.0
    assert check.warnings == ()


def test_overload_warns_in_plain_words(tmp_path: Path) -> None:
    # 3 jobs of 300 s on all 4 processors, submitted over 200 s: 3600 / (4 * 200) = 450%.
    rows = [record(1, 0, 300, 4), record(2, 100, 300, 4), record(3, 200, 300, 4)]
    check = check_trace(load_trace(write(tmp_path, "; MaxProcs: 4\n", rows)))
    assert math.isclose(check.offered_load, 3 * 300 * 4 / (4 * 200))
    assert len(check.warnings) == 1
    assert "offered load is 450% of the machine" in check.warnings[0]
    assert "the queue grows without bound" in check.warnings[0]
    assert "the waits measure the overload, not the policy" in check.warnings[0]


def test_many_oversize_jobs_say_the_machine_size_is_probably_wrong(tmp_path: Path) -> None:
    # MaxProcs says 8, yet 2 of 100 jobs ask for 16: 2% > 1%.
    rows = [record(i, i * 1000, 10, 16 if i <= 2 else 1) for i in range(1, 101)]
    trace = load_trace(write(tmp_path, "; MaxNodes: 2\n; MaxProcs: 8\n", rows))
    assert trace.report.oversize_dropped == 2
    (warning,) = check_trace(trace).warnings
    assert warning.startswith("2 jobs (2.0%) were dropped as larger than the machine of 8 "
                              "processors, so the machine size is probably wrong")
    assert "SWF header MaxProcs: 8, MaxNodes: 2" in warning
    assert "header fields read: MaxProcs, MaxNodes" in warning


def test_one_oversize_job_in_a_hundred_is_not_a_warning(tmp_path: Path) -> None:
    rows = [record(i, i * 1000, 10, 16 if i == 1 else 1) for i in range(1, 101)]
    trace = load_trace(write(tmp_path, "; MaxProcs: 8\n", rows))
    assert trace.report.oversize_dropped == 1 and check_trace(trace).warnings == ()


def test_a_guessed_machine_and_a_mostly_dropped_trace_are_said(tmp_path: Path) -> None:
    rows = [record(1, 0, 10, 4), record(2, 50, -1, 4), record(3, 60, 0, 4)]
    warnings = check_trace(load_trace(write(tmp_path, "", rows))).warnings
    assert any("states no machine size" in w and "(4 processors)" in w for w in warnings)
    assert any(w.startswith("Cleaning dropped 2 of 3 jobs (67%)") for w in warnings)


def test_missing_walltimes_get_an_estimate_by_default(tmp_path: Path) -> None:
    rows = [record(1, 0, 100, 4, walltime=-1), record(2, 10, 50, 4, walltime=-1),
            record(3, 20, 70, 4, walltime=900)]
    path = write(tmp_path, "; MaxProcs: 8\n", rows)
    limit = load_trace(path)
    assert list(limit.jobs.walltime) == [900.0, 900.0, 900.0]
    assert limit.report.lines() == [
        "gave 2 jobs with no requested walltime their queue's limit as walltime"]
    doubled = load_trace(path, missing_walltime="2x")
    assert list(doubled.jobs.walltime) == [200.0, 100.0, 900.0]
    assert doubled.report.lines() == [
        "gave 2 jobs with no requested walltime 2 times their runtime as walltime"]
    assert len(load_trace(path, missing_walltime="drop")) == 1


def test_the_queue_limit_is_per_queue(tmp_path: Path) -> None:
    # queue 1 asks for up to 900 s, queue 2 for up to 5000 s, queue 3 never asks
    rows = [
        "1 0 -1 100 4 -1 -1 4 900 -1 1 -1 -1 -1 1 -1 -1 -1",
        "2 10 -1 100 4 -1 -1 4 -1 -1 1 -1 -1 -1 1 -1 -1 -1",
        "3 20 -1 100 4 -1 -1 4 5000 -1 1 -1 -1 -1 2 -1 -1 -1",
        "4 30 -1 100 4 -1 -1 4 -1 -1 1 -1 -1 -1 2 -1 -1 -1",
        "5 40 -1 100 4 -1 -1 4 -1 -1 1 -1 -1 -1 3 -1 -1 -1",
    ]
    trace = load_trace(write(tmp_path, "; MaxProcs: 8\n", rows))
    # queue 3 has no request of its own: the trace's largest, 5000
    assert list(trace.jobs.walltime) == [900.0, 900.0, 5000.0, 5000.0, 5000.0]
