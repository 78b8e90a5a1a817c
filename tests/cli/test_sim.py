"""``metaq simulate`` from the command line."""

from __future__ import annotations

import json
import sys

from typer.testing import CliRunner

from metaq_py.cli import app
from tests.sim_traces import real_trace

runner = CliRunner()


def test_no_arguments_simulates_the_synthetic_default(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["simulate"])
    assert result.exit_code == 0, result.output
    out = tmp_path / "simulation"
    assert {p.name for p in out.iterdir()} == {
        "jobs.csv", "summary.json", "utilisation.png", "queue.png", "waits.png"}
    doc = json.loads((out / "summary.json").read_text())
    assert doc["run"]["jobs"] == 10_000 and doc["run"]["nodes"] == 4360
    assert doc["run"]["policy"] == "easy" and doc["run"]["seed"] == 0
    assert "wait: mean / median / p95" in result.output
    assert str(out) in result.output.replace("\n", "")
    # the source tree runs here, so the pure-Python core
    assert "by the pure Python policy core" in result.output.replace("\n", " ")


def test_hybrid_workload_with_a_mechanism(tmp_path) -> None:
    result = runner.invoke(app, ["simulate", "--jobs", "400", "--nodes", "1024",
                                 "--workload", "w3", "--policy", "cua&spaa", "--seed", "7",
                                 "--out", str(tmp_path), "--no-plots"])
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "summary.json").read_text())
    assert (doc["run"]["policy"], doc["run"]["workload"], doc["run"]["seed"]) == (
        "CUA&SPAA", "W3", 7)
    assert doc["run"]["nodes"] == 1024
    assert "on-demand instant starts" in result.output
    assert not (tmp_path / "waits.png").exists()


def test_bad_arguments_get_one_sentence(tmp_path) -> None:
    cases = {
        ("--policy", "fifo"): "unknown scheduler 'fifo'",
        ("--workload", "W9"): "unknown workload 'W9'",
        ("--jobs", "0"): "--jobs must be at least 1",
        ("--nodes", "0"): "--nodes must be a positive number",
        ("--trace", str(tmp_path / "missing.swf")): "no trace file at",
        ("--trace", sys.executable, "--jobs", "5"): "cannot be combined with --trace",
    }
    for args, message in cases.items():
        result = runner.invoke(app, ["simulate", "--out", str(tmp_path / "o"), *args])
        assert result.exit_code == 1, (args, result.output)
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert lines == [lines[0]] and message in lines[0], (args, result.output)
    assert not (tmp_path / "o").exists()


def test_a_malformed_trace_is_one_sentence(tmp_path) -> None:
    bad = tmp_path / "bad.swf"
    bad.write_text("1 0 -1 100 4\n")
    result = runner.invoke(app, ["simulate", "--trace", str(bad), "--out", str(tmp_path)])
    assert result.exit_code == 1
    assert "bad.swf" in result.output and len(result.output.strip().splitlines()) == 1


def test_a_real_trace_records_its_cleaning(tmp_path) -> None:
    path = real_trace("theta_2022.swf.gz")
    result = runner.invoke(app, ["simulate", "--trace", str(path), "--out", str(tmp_path),
                                 "--no-plots"])
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "summary.json").read_text())
    assert doc["cleaning"] == ["capped 6264 runtimes at their requested walltime"]
    assert doc["run"]["jobs"] == 23911 and doc["run"]["trace"] == "theta_2022.swf.gz"
