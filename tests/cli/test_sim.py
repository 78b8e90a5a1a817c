"""``metaq simulate`` from the command line."""

from __future__ import annotations

import json
import sys

import pytest
from typer.testing import CliRunner

from metaq_py.cli import app
from tests.sim_traces import real_trace

runner = CliRunner()


@pytest.fixture(autouse=True)
def private_trace_cache(tmp_path_factory, monkeypatch) -> None:
    """These runs keep parsed traces in a cache of their own, never the user's."""
    monkeypatch.setenv("METAQ_CACHE_DIR", str(tmp_path_factory.mktemp("trace-cache")))


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
    # which trace, and why: nothing asked for a trace, so the run says it is the default
    why = "no --trace given: metaq simulate's default is the synthetic workload"
    assert doc["run"]["trace_why"] == why
    assert why in result.output.replace("\n", " ")
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
    assert doc["run"]["trace_why"] == f"--trace {path}"


def _swf(path, header: str, rows: list[tuple[int, int, int, int, int]]) -> None:
    lines = [f"{j} {s} -1 {r} {p} -1 -1 {p} {w} -1 1 -1 -1 -1 -1 -1 -1 -1"
             for j, s, r, p, w in rows]
    path.write_text(header + "\n".join(lines) + "\n")


def test_units_and_machine_size_are_stated(tmp_path) -> None:
    trace = tmp_path / "smp.swf"
    _swf(trace, "; MaxNodes: 4\n; MaxProcs: 16\n",
         [(1, 0, 100, 6, 100), (2, 0, 100, 6, 100), (3, 0, 100, 4, 100)])
    for unit, size, third_start in (("processors", 16, 0), ("nodes", 4, 100)):
        out = tmp_path / unit
        result = runner.invoke(app, ["simulate", "--trace", str(trace), "--unit", unit,
                                     "--out", str(out), "--no-plots"])
        assert result.exit_code == 0, result.output
        text = " ".join(result.output.split())
        assert f"Machine: {size} {unit} (SWF header MaxProcs: 16, MaxNodes: 4)." in text
        doc = json.loads((out / "summary.json").read_text())
        assert doc["trace"]["machine"]["unit"] == unit
        assert doc["trace"]["machine"]["size"] == size == doc["run"]["nodes"]
        assert doc["trace"]["machine"]["procs_per_node"] == 4
        rows = (out / "jobs.csv").read_text().splitlines()
        assert rows[3].split(",")[:5] == ["3", "rigid", str(4 if unit == "processors" else 1),
                                          "0", str(third_start)]


def test_overload_and_a_wrong_machine_are_loud(tmp_path) -> None:
    trace = tmp_path / "wrong.swf"
    # MaxProcs says 4; 10 jobs of 300 s on 4 processors arrive 10 s apart, from 10 to 100:
    # 10 * 300 * 4 / (4 * 90) = 3333%. And 2 jobs of 12 need 64 processors.
    rows = [(i, i * 10, 300, 4, 300) for i in range(1, 11)]
    rows += [(11, 5, 10, 64, 10), (12, 6, 10, 64, 10)]
    _swf(trace, "; MaxNodes: 4\n; MaxProcs: 4\n", rows)
    result = runner.invoke(app, ["simulate", "--trace", str(trace), "--out", str(tmp_path),
                                 "--no-plots"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "Offered load: 3333% of the machine" in text
    assert "the queue grows without bound" in text
    assert "the machine size is probably wrong" in text and "MaxNodes" in text
    assert "Trace: dropped 2 jobs larger than the machine (4 nodes)." in text
    doc = json.loads((tmp_path / "summary.json").read_text())
    warnings = doc["trace"]["warnings"]
    assert len(warnings) == 2 and "waits measure the overload" in warnings[0]
    assert abs(doc["trace"]["offered_load"] - 12000 / 360) < 1e-9


def test_a_trace_with_nothing_left_fails_with_the_reasons(tmp_path) -> None:
    trace = tmp_path / "none.swf"
    _swf(trace, "; MaxProcs: 8\n", [(1, 0, 100, 4, -1), (2, 10, 100, 4, -1)])
    result = runner.invoke(app, ["simulate", "--trace", str(trace), "--out", str(tmp_path / "o"),
                                 "--missing-walltime", "drop"])
    assert result.exit_code == 1
    assert "no job of none.swf is left to simulate: dropped 2 jobs with no requested " \
           "walltime" in " ".join(result.output.split())
    ok = runner.invoke(app, ["simulate", "--trace", str(trace), "--out", str(tmp_path / "p"),
                             "--no-plots"])
    assert ok.exit_code == 0, ok.output
    doc = json.loads((tmp_path / "p" / "summary.json").read_text())
    assert doc["run"]["jobs"] == 2
    assert doc["trace"]["walltime_estimate"] == \
        "a job with no requested walltime gets its queue's limit"


def test_no_cache_leaves_no_entry(tmp_path, monkeypatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("METAQ_CACHE_DIR", str(cache))
    trace = tmp_path / "t.swf"
    _swf(trace, "; MaxProcs: 8\n", [(1, 0, 100, 4, 200), (2, 10, 100, 4, 200)])
    args = ["simulate", "--trace", str(trace), "--out", str(tmp_path / "o"), "--no-plots"]
    assert runner.invoke(app, [*args, "--no-cache"]).exit_code == 0
    assert not cache.exists()
    assert runner.invoke(app, args).exit_code == 0
    assert len(list(cache.iterdir())) == 1


def test_load_scales_the_arrivals_and_the_offered_load(tmp_path) -> None:
    trace = tmp_path / "gaps.swf"
    # 4 jobs of 100 s on 1 of 4 nodes, 100 s apart: offered load 4*100 / (4*300) = 33%.
    _swf(trace, "; MaxNodes: 4\n; MaxProcs: 4\n", [(i, i * 100, 100, 1, 100) for i in range(4)])
    loads = {}
    for factor in ("1", "2"):
        out = tmp_path / factor
        result = runner.invoke(app, ["simulate", "--trace", str(trace), "--load", factor,
                                     "--out", str(out), "--no-plots"])
        assert result.exit_code == 0, result.output
        doc = json.loads((out / "summary.json").read_text())
        loads[factor] = doc["trace"]["offered_load"]
        rows = [r.split(",") for r in (out / "jobs.csv").read_text().splitlines()[1:]]
        assert [float(r[3]) for r in rows] == [i * 100 / float(factor) for i in range(4)]
    assert loads["2"] == pytest.approx(2 * loads["1"])
    result = runner.invoke(app, ["simulate", "--trace", str(trace), "--load", "0",
                                 "--out", str(tmp_path / "bad"), "--no-plots"])
    assert result.exit_code == 1
    assert "a load factor is a positive number" in result.output


DEPENDENT_SWF = """\
; MaxProcs: 4
1   0 -1 100 4 -1 -1 4 100 -1 1 1 1 -1 1 -1 -1 -1
2  10 -1  50 2 -1 -1 2  50 -1 1 1 1 -1 1 -1  1 20
3  20 -1  30 2 -1 -1 2  30 -1 1 1 1 -1 1 -1  7 -1
"""


def test_dependencies_delay_a_dependent_job_and_are_reported(tmp_path) -> None:
    # J2 waits for J1 (ends 100) plus 20 s of think time, so it arrives at 120 instead of
    # 10; J3's preceding job 7 is not in the trace, so it keeps its submit time (20) and starts
    # with J1's end at 100. Without the flag J2 starts at 100 beside J3.
    trace = tmp_path / "deps.swf"
    trace.write_text(DEPENDENT_SWF)

    def run(*flags: str) -> tuple[dict[int, tuple[float, float]], dict, str]:
        out = tmp_path / ("on" if flags else "off")
        result = runner.invoke(app, ["simulate", "--trace", str(trace), "--out", str(out),
                                     "--no-plots", *flags])
        assert result.exit_code == 0, result.output
        rows = (out / "jobs.csv").read_text().splitlines()[1:]
        times = {int(r.split(",")[0]): (float(r.split(",")[3]), float(r.split(",")[4]))
                 for r in rows}
        return times, json.loads((out / "summary.json").read_text()), result.output

    off, off_doc, off_text = run()
    on, on_doc, on_text = run("--dependencies")
    assert off == {1: (0, 0), 2: (10, 100), 3: (20, 100)}
    assert on == {1: (0, 0), 2: (120, 120), 3: (20, 100)}
    assert "preceding job" not in off_text
    said = " ".join(on_text.split())
    assert "kept the preceding job of 1 jobs" in said
    assert "whose preceding job is not in the trace" in said
    assert any(line.startswith("kept the preceding job of 1 jobs")
               for line in on_doc["cleaning"])
    assert not any("preceding job" in line for line in off_doc["cleaning"])


def test_dependencies_refuse_a_hybrid_workload(tmp_path) -> None:
    result = runner.invoke(app, ["simulate", "--jobs", "50", "--workload", "W1",
                                 "--dependencies", "--out", str(tmp_path), "--no-plots"])
    assert result.exit_code == 1
    assert "--dependencies applies to a plain trace" in result.output
