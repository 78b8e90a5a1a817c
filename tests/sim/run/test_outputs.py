"""The run's files: jobs.csv, summary.json and the plots."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from metaq_py.policy.model import Kind
from sim.engine.core import simulate
from sim.run.outputs import JOB_COLUMNS, RunInfo, write_outputs
from sim.run.plots import binned_mean
from sim.trace.synthetic import synthetic_trace
from sim.workload.model import WorkloadModel, hybrid_workload
from tests.sim_worlds import Row, tiny_hybrid, tiny_trace

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_jobs_csv_has_one_row_per_job_in_submit_order(tmp_path) -> None:
    # J2 waits for J1 to end at 60.5; fractional times are written so they read back exactly.
    trace = tiny_trace([(0, 4, 100, 60.5), (10, 2, 50, 50)], nodes=4)
    result = simulate(trace, policy="easy")
    write_outputs(result, tmp_path, info=RunInfo(trace="tiny"), plots=False)
    with (tmp_path / "jobs.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0]) == JOB_COLUMNS
    assert [r["id"] for r in rows] == ["1", "2"]
    assert rows[0]["end"] == "60.5" and rows[1]["start"] == "60.5"
    assert rows[1]["wait"] == "50.5" and rows[1]["kind"] == "rigid"
    assert rows[0]["instant_start"] == "" and rows[0]["notice"] == ""


def test_jobs_csv_marks_on_demand_instant_starts(tmp_path) -> None:
    work = tiny_hybrid([Row(submit=0, size=10, walltime=300, runtime=200),
                        Row(submit=50, size=10, walltime=100, runtime=100,
                            kind=Kind.ONDEMAND)], nodes=10)
    write_outputs(simulate(work, policy="N&PAA"), tmp_path, info=RunInfo(trace="tiny"),
                  plots=False)
    with (tmp_path / "jobs.csv").open() as f:
        rigid, ondemand = csv.DictReader(f)
    assert (rigid["preemptions"], rigid["lost_node_seconds"]) == ("1", "500")
    assert (ondemand["instant_start"], ondemand["notice"]) == ("1", "none")


def test_summary_json_states_the_run_the_window_and_the_cleaning(tmp_path) -> None:
    trace = synthetic_trace(jobs=300, seed=2)
    result = simulate(trace, policy="conservative")
    info = RunInfo(trace="synthetic", seed=2, cleaning=("capped 3 runtimes at their requested "
                                                        "walltime",))
    write_outputs(result, tmp_path, info=info, plots=False)
    doc = json.loads((tmp_path / "summary.json").read_text())
    run = doc["run"]
    assert (run["policy"], run["seed"], run["trace"], run["jobs"]) == (
        "conservative", 2, "synthetic", 300)
    first = min(o.submit for o in result.outcomes)
    last = max(o.end for o in result.outcomes)
    assert (run["window"]["start"], run["window"]["end"]) == (first, last)
    assert run["agenda_items_per_second"] == pytest.approx(
        result.agenda_items / result.wall_seconds)
    assert doc["cleaning"] == list(info.cleaning)
    assert doc["summary"]["jobs"] == 300
    assert doc["summary"]["wait"]["all"]["mean"] == pytest.approx(
        np.mean([o.wait for o in result.outcomes]))


def test_same_seed_gives_byte_identical_csv(tmp_path) -> None:
    def run(out):
        work = hybrid_workload(synthetic_trace(jobs=700, seed=4, load=0.9, nodes=1024),
                               WorkloadModel.for_workload("W5", seed=4))
        write_outputs(simulate(work, policy="CUA&SPAA"), out, info=RunInfo(trace="t"),
                      plots=False)
        return (out / "jobs.csv").read_bytes()

    a, b = run(tmp_path / "a"), run(tmp_path / "b")
    assert a == b and a.count(b"\n") == 701


def test_plots_are_written_as_png(tmp_path) -> None:
    work = hybrid_workload(synthetic_trace(jobs=400, seed=1, nodes=1024),
                           WorkloadModel.for_workload("W2", seed=1))
    written = write_outputs(simulate(work, policy="CUA&PAA"), tmp_path,
                            info=RunInfo(trace="synthetic"))
    names = sorted(p.name for p in written)
    assert names == ["jobs.csv", "queue.png", "summary.json", "utilisation.png", "waits.png"]
    for name in ("queue.png", "utilisation.png", "waits.png"):
        data = (tmp_path / name).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 10_000


def test_binned_mean_is_the_exact_time_weighted_mean_of_a_step_function() -> None:
    # 2 on [0, 10), 6 on [10, 30), 0 from 30: bins [0, 20) and [20, 40)
    t = np.array([0.0, 10.0, 30.0])
    v = np.array([2.0, 6.0, 0.0])
    got = binned_mean(t, v, np.array([0.0, 20.0, 40.0]))
    assert got.tolist() == pytest.approx([(2 * 10 + 6 * 10) / 20, (6 * 10) / 20])
