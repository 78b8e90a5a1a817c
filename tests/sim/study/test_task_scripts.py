"""A study emitted as #METAQ task scripts, run through bash, and collected back."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from metaq_py.directives import read_task
from sim.run.spec import SpecError, TraceSource
from sim.study.aggregate import aggregate
from sim.study.execution import run_grid
from sim.study.grid import STUDIES, build_grid
from sim.study.task_scripts import RUNS, collect, emit_tasks

REPO = Path(__file__).resolve().parents[3]
SPECS = build_grid(STUDIES["paper"], trace=TraceSource(jobs=80, seed=5), seeds=1,
                   workloads=["W2"], policies=["easy", "CUA&SPAA"])


def test_emitted_scripts_are_valid_tasks(tmp_path: Path) -> None:
    emitted = emit_tasks(SPECS, tmp_path, context={"name": "paper"}, walltime=600,
                         project="study")
    assert len(emitted.tasks) == 2
    for task, spec in zip(emitted.tasks, SPECS, strict=True):
        parsed = read_task(task)  # the queue's own reader: executable, valid header
        assert parsed.nodes == 1 and parsed.min_wc_time == 600 and parsed.project == "study"
        text = task.read_text()
        assert f"--run-one {tmp_path / 'specs' / spec.key}.json" in text
        assert os.access(task, os.X_OK)
    manifest = json.loads((tmp_path / "grid.json").read_text())
    assert manifest["runs"] == [s.key for s in SPECS]


def test_run_emitted_tasks_then_collect_equals_running_directly(tmp_path: Path) -> None:
    emitted = emit_tasks(SPECS, tmp_path, context={"name": "paper"})
    partial = collect(tmp_path)
    assert partial.records == () and partial.missing == tuple(s.key for s in SPECS)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for task in emitted.tasks:
        done = subprocess.run(["bash", str(task)], capture_output=True, text=True, env=env,
                              timeout=120)
        assert done.returncode == 0, done.stderr
    got = collect(tmp_path)
    assert got.missing == ()
    assert [r.spec for r in got.records] == list(SPECS)
    direct = run_grid(SPECS, workers=1)
    assert aggregate(list(got.records)) == aggregate(direct)
    assert len(list((tmp_path / RUNS).glob("*.json"))) == 2


def test_collect_refuses_a_directory_without_manifest(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="--emit-tasks"):
        collect(tmp_path)
    with pytest.raises(SpecError, match="no run"):
        emit_tasks((), tmp_path, context={})
