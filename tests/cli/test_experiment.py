"""``metaq experiment`` from the command line: a tiny study, the emit / run-one / collect
round trip, and one clear sentence for each bad argument."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from metaq_py.cli import app

runner = CliRunner()
QUICK = ["--synthetic", "--jobs", "60", "--seeds", "1", "--workloads", "W1",
         "--policies", "easy,N&PAA", "--workers", "1"]


def invoke(*args: str):
    return runner.invoke(app, ["experiment", *args])


def test_a_tiny_study_writes_everything(tmp_path: Path) -> None:
    result = invoke(*QUICK, "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert "synthetic Theta-like workload (--synthetic)" in result.output
    assert "2 runs" in result.output
    for name in ("results.csv", "results.json", "report.md", "fig6_default.png"):
        assert (tmp_path / name).is_file()
    assert len(list((tmp_path / "runs").glob("*.json"))) == 2


def test_emit_run_one_collect_round_trip(tmp_path: Path) -> None:
    grid, direct = tmp_path / "grid", tmp_path / "direct"
    assert invoke(*QUICK, "--out", str(direct)).exit_code == 0
    result = invoke(*QUICK, "--emit-tasks", str(grid))
    assert result.exit_code == 0, result.output
    assert "Wrote 2 task scripts" in result.output
    for spec in sorted((grid / "specs").glob("*.json")):
        one = invoke("--run-one", str(spec), "--out", str(grid / "runs"))
        assert one.exit_code == 0, one.output
    collected = invoke("--collect", str(grid))
    assert collected.exit_code == 0, collected.output
    assert json.loads((grid / "results.json").read_text()) == \
        json.loads((direct / "results.json").read_text())


@pytest.mark.parametrize(("args", "words"), [
    (["--study", "nope"], "unknown study 'nope'"),
    (["--seeds", "0"], "--seeds must be at least 1"),
    (["--workloads", "W1,W8"], "unknown workload 'W8'"),
    (["--policies", "fifo"], "unknown policy 'fifo'"),
    (["--sweep", "checkpoint_scale"], "KEY=V1,V2"),
    (["--sweep", "wibble=1,2"], "unknown parameter 'wibble'"),
    (["--trace", "/nonexistent/trace.swf"], "is not a file"),
    (["--jobs", "0"], "--jobs must be at least 1"),
    (["--workers", "0"], "--workers must be at least 1"),
    (["--collect", "/nonexistent-grid"], "grid.json"),
    (["--run-one", "missing-spec.json"], "does not exist"),
    (["--collect", "a", "--run-one", "b"], "cannot be used together"),
    (["--reading", "kills-as-preemptions"], "use it with --study all or --calibrate paper"),
    (["--study", "all", "--reading", "nope"], "--reading knows kills-as-preemptions"),
    (["--study", "all", "--observation", "18"], "--observation is a number from 1 to 17"),
    (["--study", "all", "--max-seeds", "50"], "--max-seeds must be between"),
    (["--study", "all", "--escalation-runs", "-1"], "--escalation-runs must be 0 or more"),
])
def test_bad_arguments_are_one_sentence(args: list[str], words: str, tmp_path: Path) -> None:
    base = ["--synthetic", "--jobs", "20", "--seeds", "1", "--workloads", "W1",
            "--out", str(tmp_path)]
    if "--trace" in args:
        base.remove("--synthetic")
    result = invoke(*base, *args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("metaq experiment: ")
    assert words in lines[0]


def test_run_one_needs_an_output_directory() -> None:
    result = invoke("--run-one", "spec.json")
    assert result.exit_code == 2
    assert result.output.strip() == ("metaq experiment: --run-one needs --out, the directory "
                                     "its record goes to")


def test_study_all_writes_one_report_with_every_observation(tmp_path: Path) -> None:
    result = invoke("--study", "all", "--synthetic", "--jobs", "80", "--seeds", "2",
                    "--max-seeds", "2", "--workers", "2", "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert "Trace synthetic Theta-like workload (80 jobs, seed 0): the synthetic " \
           "Theta-like workload (--synthetic)." in result.output
    report = (tmp_path / "report.md").read_text()
    rows = [line for line in report.splitlines() if line.startswith("| ")
            and line.split("|")[1].strip().isdigit()]
    numbers = {int(line.split("|")[1]) for line in rows}
    assert set(range(1, 18)) <= numbers
    assert "- Command: `metaq " in report and "Seeds: 0, 1" in report
    assert "(--synthetic)" in report
    page = (tmp_path / "report.html").read_text()  # the same, as a page (test_observations)
    assert "Trace synthetic Theta-like workload (80 jobs, seed 0): the synthetic" in page
    # 80 jobs are too few for a steady state at either load: said, and utilisation unjudged
    said = " ".join(result.output.split())
    assert "a saturating load x" in said and "this trace is too small for this load" in said
    assert "this trace is too small for this load" in report
    [observed] = json.loads((tmp_path / "observations.json").read_text())
    assert observed["why"] == "the synthetic Theta-like workload (--synthetic)"
    assert "### Study `checkpoint` at x" in report
    # each row can be rerun alone, with the same choices
    rerun = (f"metaq experiment --study all --out {tmp_path} --synthetic --jobs 80 "
             f"--seeds 2 --observation 13")
    assert rerun in report


def test_study_all_finds_the_traces_or_says_where_it_looked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import metaq_py.cli.experiment_args as args

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(args, "BESIDE_SOURCE", tmp_path / "site" / "shared" / "traces")
    monkeypatch.delenv("METAQ_TRACES", raising=False)
    result = invoke("--study", "all", "--jobs", "20")
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "no trace given and none found (theta_2022.swf.gz in " \
        f"{tmp_path / 'shared' / 'traces'}, {tmp_path.parent / 'shared' / 'traces'}, " \
        f"{tmp_path / 'site' / 'shared' / 'traces'})" in lines[0]
    assert "pass --trace PATH, set METAQ_TRACES, or ask for --synthetic" in lines[0]
    result = invoke("--study", "paper", "--jobs", "20", "--out", str(tmp_path / "p"))
    assert result.exit_code == 2 and "none found" in result.output


def test_an_installed_package_finds_the_traces_or_says_where_it_looked(
        tmp_path: Path) -> None:
    """``pip install .`` (not editable), run outside the checkout: no trace beside the
    installed code, so the default lookup fails in one sentence naming where it looked, and
    finds the traces through ``METAQ_TRACES``."""
    import os
    import subprocess
    import sys

    from tests.sim_traces import real_trace

    root = Path(__file__).resolve().parents[2]
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index",
                    "--no-build-isolation", "-q", "--target", str(site), str(root)],
                   env={**os.environ, "METAQ_PURE": "1"}, check=True, capture_output=True,
                   timeout=600)
    cwd = tmp_path / "elsewhere" / "work"
    cwd.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k != "METAQ_TRACES"}
    env["PYTHONPATH"] = str(site)  # the installed copy only, never the checkout

    def metaq(*args: str, **more: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "metaq_py", "experiment", *args],
                              cwd=cwd, env={**env, **more}, capture_output=True, text=True,
                              timeout=600)

    done = metaq("--study", "all", "--jobs", "20")
    assert done.returncode == 2, done.stdout + done.stderr
    said = (done.stdout + done.stderr).strip()
    assert len(said.splitlines()) == 1, said
    assert f"no trace given and none found (theta_2022.swf.gz in {cwd / 'shared' / 'traces'}, " \
        f"{cwd.parent / 'shared' / 'traces'}, {site.parent / 'shared' / 'traces'})" in said
    theta = real_trace("theta_2022.swf.gz")
    done = metaq("--jobs", "30", "--seeds", "1", "--workloads", "W1", "--policies", "easy",
                 "--workers", "1", "--out", str(tmp_path / "o"), METAQ_TRACES=str(theta.parent))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"(the default, found in {theta.parent})" in " ".join(done.stdout.split())
    assert (site / "metaq_py" / "__init__.py").is_file()


def test_the_default_trace_is_found_in_metaq_traces(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.sim_traces import real_trace

    theta = real_trace("theta_2022.swf.gz")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("METAQ_TRACES", str(theta.parent))
    result = invoke("--jobs", "30", "--seeds", "1", "--workloads", "W1", "--policies",
                    "easy", "--workers", "1", "--out", str(tmp_path / "o"))
    assert result.exit_code == 0, result.output
    assert f"Using trace {theta} (the default, found in {theta.parent})." in result.output
    assert f"(the default, found in {theta.parent})" in (tmp_path / "o" / "report.md").read_text()


def test_load_and_calibrate_are_checked(tmp_path: Path) -> None:
    result = invoke(*QUICK, "--load", "0", "--out", str(tmp_path))
    assert result.exit_code == 2 and "--load must be a positive number" in result.output
    result = invoke(*QUICK, "--calibrate", "cori", "--out", str(tmp_path))
    assert result.exit_code == 2 and "--calibrate knows only 'paper'" in result.output
    result = invoke(*QUICK, "--load", "2", "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert "arrivals x2 as fast" in result.output
    assert "load x2" in (tmp_path / "report.md").read_text()


def test_calibrate_paper_runs_the_study_at_both_loads_side_by_side(tmp_path: Path) -> None:
    result = invoke(*QUICK, "--calibrate", "paper", "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert "Calibrated: load x" in result.output and "Table III" in result.output
    factor = json.loads((tmp_path / "observations.json").read_text())[0]["factors"]["paper"]
    assert factor != 1.0
    # the grid ran twice: at the trace's own load and at the paper's, each stored
    runs = list((tmp_path / "runs").glob("*.json"))
    loads = sorted({json.loads(p.read_text())["spec"]["trace"].get("load", 1.0)
                    for p in (tmp_path / "runs").glob("*_W1_*.json")})
    assert loads == [1.0, factor]
    report = (tmp_path / "report.md").read_text()
    assert "## At the trace's own load and at the paper's, side by side" in report
    assert f"Verdict at x{factor:g} | Verdict at x1 |" in report
    assert f"### Headline at the paper's load (x{factor:g})" in report
    assert "### Headline at the trace's own load (x1)" in report
    # the own-load table holds the own-load runs' figures, not the calibrated ones
    own = (tmp_path / "results_own.csv").read_text()
    paper = (tmp_path / "results.csv").read_text()
    assert own != paper and "N&PAA" in own
    # the same runs judged under a reading: nothing runs again, the report says which
    again = invoke(*QUICK, "--calibrate", "paper", "--reading", "shrinks-as-preemptions",
                   "--out", str(tmp_path))
    assert again.exit_code == 0, again.output
    assert len(list((tmp_path / "runs").glob("*.json"))) == len(runs)
    assert "reading `shrinks-as-preemptions`" in (tmp_path / "report.md").read_text()
    assert json.loads((tmp_path / "observations.json").read_text())[0]["reading"] == \
        "shrinks-as-preemptions"


def test_set_changes_a_modelling_choice_for_every_run(tmp_path: Path) -> None:
    result = invoke(*QUICK, "--set", "oracle=1", "--set", "release_after=20m",
                    "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    specs = [json.loads(p.read_text())["spec"] for p in (tmp_path / "runs").glob("*.json")]
    assert len(specs) == 2
    rules = {"checkpoint_time": "charged", "setup_speedup": "none"}
    assert all(s["overrides"] == {"oracle": 1.0, "release_after": 1200.0, **rules,
                                  **({"malleable_start": "full", "planning": "cqsim"}
                                     if s["policy"] == "easy" else
                                     {"victim_order": "seconds"})} for s in specs)
    for args, words in ((["--set", "oracle=2"], "oracle is 0"),
                        (["--set", "mtbf=6h", "--set", "mtbf=3h"], "--set mtbf is given twice"),
                        (["--set", "mtbf=6h,3h"], "--set takes one value"),
                        (["--study", "checkpoint", "--set", "checkpoint_scale=3"],
                         "clashes with a variant"),
                        (["--set", "victim_order=bytes"],
                         "parameter victim_order is node-seconds or seconds, got 'bytes'"),
                        (["--set", "wibble=1"], "unknown parameter 'wibble'; choose from "),
                        (["--observation", "3"], "--observation reruns a row of --study all")):
        bad = invoke(*QUICK, *args, "--out", str(tmp_path / "bad"))
        assert bad.exit_code == 2 and words in bad.output, bad.output
