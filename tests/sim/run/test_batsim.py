"""``metaq simulate --format batsim``: Batsim 4's jobs.csv and schedule.csv, column for column
as Batsim's JobsTracer writes them, with a placement that holds no machine twice."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from typer.testing import CliRunner

from metaq_py.cli import app
from sim.run.batsim import JOBS_COLUMNS, SCHEDULE_COLUMNS, intervals

SWF = """; MaxNodes: 8
; MaxProcs: 8
1 0 0 100 4 -1 -1 4 200 -1 1 -1 -1 -1 -1 -1 -1 -1
2 10 0 50 8 -1 -1 8 50 -1 1 -1 -1 -1 -1 -1 -1 -1
3 20 0 30 2 -1 -1 2 60 -1 1 -1 -1 -1 -1 -1 -1 -1
4 30 0 40 3 -1 -1 3 100 -1 1 -1 -1 -1 -1 -1 -1 -1
"""
# On 8 nodes under EASY: 1 (4 nodes) runs 0-100; 2 (8 nodes) waits for it and runs 100-150;
# 3 (2 nodes, 30 s) backfills at 20; 4 (3 nodes, 40 s) finds 2 free at 30 and backfills when
# 3 ends at 50, ending at 90, before 2 needs the machine.
# Job 2's runtime equals its walltime: Batsim reports it killed at its walltime.

BATSIM_JOBS_HEADER = ("job_id,workload_name,profile,submission_time,"
                      "requested_number_of_resources,requested_time,success,final_state,"
                      "starting_time,execution_time,finish_time,waiting_time,turnaround_time,"
                      "stretch,allocated_resources,consumed_energy,metadata")
"""The header line Batsim 4.2 writes, spelled out here rather than joined from the module."""


def machines(text: str) -> set[int]:
    out: set[int] = set()
    for part in text.split():
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


@pytest.fixture
def run(tmp_path: Path) -> Path:
    trace = tmp_path / "t.swf"
    trace.write_text(SWF)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["simulate", "--trace", str(trace), "--format", "batsim",
                                      "--out", str(out), "--no-plots", "--no-cache"])
    assert result.exit_code == 0, result.output
    return out


def test_jobs_csv_is_batsims(run: Path) -> None:
    text = (run / "jobs.csv").read_text()
    assert text.splitlines()[0] == BATSIM_JOBS_HEADER == ",".join(JOBS_COLUMNS)
    rows = {r["job_id"]: r for r in csv.DictReader(text.splitlines())}
    assert set(rows) == {"1", "2", "3", "4"}
    two = rows["2"]
    assert two["submission_time"] == "10.000000" and two["starting_time"] == "100.000000"
    assert (two["success"], two["final_state"]) == ("0", "COMPLETED_WALLTIME_REACHED")
    assert (rows["1"]["success"], rows["1"]["final_state"]) == ("1", "COMPLETED_SUCCESSFULLY")
    assert two["waiting_time"] == "90.000000" and two["stretch"] == f"{140 / 50:f}"
    assert two["allocated_resources"] == "0-7"
    assert all(line.endswith(',0.000000,""') for line in text.splitlines()[1:])  # no energy
    assert rows["3"]["workload_name"] == "w0" and rows["3"]["profile"] == "30"
    spans = []
    for r in rows.values():
        start, run_, finish = (float(r[k]) for k in ("starting_time", "execution_time",
                                                     "finish_time"))
        assert finish == start + run_
        assert float(r["waiting_time"]) == start - float(r["submission_time"])
        held = machines(r["allocated_resources"])
        assert len(held) == int(r["requested_number_of_resources"])
        assert held <= set(range(8))
        spans.append((start, finish, held))
    for i, (s1, e1, h1) in enumerate(spans):
        for s2, e2, h2 in spans[i + 1:]:
            assert not (s1 < e2 and s2 < e1 and h1 & h2), "a machine held twice at once"


def test_schedule_csv_is_batsims(run: Path) -> None:
    lines = (run / "schedule.csv").read_text().splitlines()
    assert lines[0].split(",") == list(SCHEDULE_COLUMNS) == sorted(SCHEDULE_COLUMNS)
    values = dict(zip(lines[0].split(","), lines[1].split(","), strict=True))
    assert values["batsim_version"].startswith("metaq-py ")
    assert values["nb_jobs"] == values["nb_jobs_finished"] == "4"
    assert (values["nb_jobs_success"], values["nb_jobs_killed"]) == ("3", "1")
    assert values["makespan"] == "150.000000" and values["nb_computing_machines"] == "8"
    computing = 4 * 100 + 8 * 50 + 2 * 30 + 3 * 40
    assert values["time_computing"] == f"{computing:f}"
    assert values["time_idle"] == f"{8 * 150 - computing:f}"
    assert not (run / "jobs.csv").read_text().startswith("id,")  # ours is replaced


def test_intervals_print_as_batsim_does() -> None:
    assert intervals([7, 0, 1, 2, 3]) == "0-3 7"
    assert intervals([5]) == "5" and intervals([]) == ""


def test_a_hybrid_workload_is_refused_in_one_sentence(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["simulate", "--jobs", "200", "--workload", "W5",
                                      "--format", "batsim", "--out", str(tmp_path / "o"),
                                      "--no-plots"])
    assert result.exit_code == 1
    assert "--format batsim writes rigid jobs' schedules" in result.output
    bad = CliRunner().invoke(app, ["simulate", "--jobs", "10", "--format", "swf",
                                   "--out", str(tmp_path / "b")])
    assert bad.exit_code == 1 and "--format must be metaq or batsim" in bad.output
