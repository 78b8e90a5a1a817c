"""Simulated waits beside recorded ones: a trace whose recorded starts are one policy's own
schedule is matched by that policy exactly, and named closest; groups and skipped jobs."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from metaq_py.cli import app
from sim.engine.core import simulate
from sim.trace.formats.swf import SwfHeader, write_swf
from sim.trace.loader import load_trace
from sim.trace.synthetic import synthetic_trace
from sim.validate.candidates import CANDIDATES, Fcfs, candidates
from sim.validate.recorded import MIN_JOBS, compare_recorded
from sim.validate.writing import write_comparison

T0 = 1_640_995_200  # 2022-01-01T00:00:00Z


def recorded_by(policy_name: str, jobs: int = 400, nodes: int = 4360):
    """A trace whose recorded waits are what ``policy_name`` did with it."""
    base = synthetic_trace(jobs=jobs, seed=3, nodes=nodes)
    base = replace(base, jobs=base.jobs.with_columns(submit=base.jobs.submit + T0))
    run = simulate(base, policy=candidates()[policy_name])
    waits = {o.id: o.wait for o in run.outcomes}
    table = base.jobs.with_columns(wait=np.array([waits[int(i)] for i in base.jobs.id]))
    return replace(base, jobs=table)


@pytest.mark.parametrize("truth", ["FCFS", "EASY on estimates"])
def test_the_policy_that_made_the_record_matches_it_and_comes_closest(truth: str) -> None:
    trace = recorded_by(truth)
    results = {name: simulate(trace, policy=s) for name, s in candidates().items()}
    comparison = compare_recorded(trace, results)
    assert comparison.closest == truth and comparison.closeness[truth] == 0
    assert all(comparison.closeness[n] > 0 for n in CANDIDATES if n != truth)
    for row in comparison.rows:
        assert row.simulated[truth] == row.recorded
    assert comparison.compared == len(trace) and comparison.skipped_sentence() is None
    sizes = [r.group for r in comparison.of("size")]
    assert sizes and all(r.jobs >= MIN_JOBS for r in comparison.rows)
    assert sum(r.jobs for r in comparison.of("size")) <= len(trace)
    assert next(r.group for r in comparison.of("month")) == "2022-01"


def test_fcfs_never_lets_a_job_pass_an_earlier_one() -> None:
    trace = synthetic_trace(jobs=300, seed=5)
    run = simulate(trace, policy=Fcfs("fcfs", candidates()["EASY on estimates"].backfill))
    starts = sorted(run.outcomes, key=lambda o: (o.submit, o.id))
    for earlier, later in itertools.pairwise(starts):
        assert later.start >= earlier.start


def test_unknown_recorded_waits_are_left_out_and_counted(tmp_path: Path) -> None:
    trace = recorded_by("FCFS", jobs=100)
    waits = trace.jobs.wait.copy()
    waits[:7] = -60.0  # a start before its submit, as a broken log has it
    header = SwfHeader(entries=(("MaxNodes", "4360"), ("MaxProcs", "4360")), max_nodes=4360,
                       max_procs=4360)
    path = tmp_path / "broken.swf"
    write_swf(trace.jobs.with_columns(wait=waits), path, header=header)
    loaded = load_trace(path)
    assert "found 7 jobs whose recorded start precedes their submit: their recorded wait is " \
           "left unknown" in loaded.report.lines()
    results = {"FCFS": simulate(loaded, policy=candidates()["FCFS"])}
    comparison = compare_recorded(loaded, results)
    assert comparison.compared == 93
    assert comparison.skipped_sentence() == ("left 7 jobs out of the comparison: 7 with no "
                                             "recorded wait")
    written = write_comparison(comparison, tmp_path / "out", title="broken")
    assert [p.name for p in written] == ["compare-recorded.md", "compare-recorded.csv",
                                         "compare-recorded.png"]
    text = written[0].read_text()
    assert "The comparison left 7 jobs out" in text and "| FCFS **(closest)** |" in text
    assert written[2].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_command_compares_and_refuses_a_synthetic_trace(tmp_path: Path) -> None:
    trace = recorded_by("EASY on runtimes", jobs=150)
    path = tmp_path / "t.swf"
    write_swf(trace.jobs, path, header=SwfHeader(entries=(("MaxNodes", "4360"),
                                                          ("MaxProcs", "4360")),
                                                 max_nodes=4360, max_procs=4360))
    result = CliRunner().invoke(app, ["simulate", "--trace", str(path), "--compare-recorded",
                                      "--out", str(tmp_path / "out"), "--no-plots",
                                      "--no-cache"])
    assert result.exit_code == 0, result.output
    assert "Closest to the recorded waits: EASY on runtimes (mean absolute error 0%" \
        in result.output
    assert (tmp_path / "out" / "compare-recorded.csv").is_file()
    assert not (tmp_path / "out" / "compare-recorded.png").exists()
    synthetic = CliRunner().invoke(app, ["simulate", "--compare-recorded", "--jobs", "50",
                                         "--out", str(tmp_path / "s")])
    assert synthetic.exit_code == 1
    assert "--compare-recorded needs a --trace whose jobs were recorded" in synthetic.output
    assert not np.isnan(trace.jobs.wait).any()
