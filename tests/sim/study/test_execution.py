"""A small study end to end: runs (serial and parallel), the stored runs, and every output."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from sim.run.spec import RunSpec, TraceSource
from sim.study.execution import RunStore, load_source, run_grid, run_one
from sim.study.grid import STUDIES, build_grid
from sim.study.metrics import PAPER_METRICS
from sim.study.outputs import write_study
from sim.study.report import StudyContext

SRC = TraceSource(jobs=150, seed=3)


@pytest.fixture(scope="module")
def grid() -> tuple[RunSpec, ...]:
    return build_grid(STUDIES["paper"], trace=SRC, seeds=2, workloads=["W1", "W4"])


@pytest.fixture(scope="module")
def records(grid):
    return run_grid(grid, workers=1)


def test_same_spec_gives_identical_figures() -> None:
    spec = RunSpec(policy="CUA&SPAA", workload="W5", seed=1, trace=SRC)
    a, b = run_one(spec), run_one(spec)
    assert a.metrics == b.metrics
    other = run_one(RunSpec(policy="CUA&SPAA", workload="W5", seed=2, trace=SRC))
    assert other.metrics != a.metrics


def test_scheduler_overrides_build_the_scheduler_and_change_the_run() -> None:
    plain = RunSpec(policy="CUA&SPAA", workload="W5", seed=1, trace=SRC)
    changed = RunSpec(policy="CUA&SPAA", workload="W5", seed=1, trace=SRC,
                      overrides=(("oracle", 1), ("release_after", 60), ("warning", 30)))
    built = changed.scheduler()
    assert (built.oracle, built.release_after, built.warning) == (True, 60.0, 30.0)
    default = plain.scheduler()
    assert (default.oracle, default.release_after, default.warning) == (False, 600.0, 120.0)
    # scheduler parameters are not workload-model fields: the model is the same
    assert changed.model() == plain.model()
    oracle = RunSpec(policy="easy", workload="W5", seed=1, trace=SRC, overrides=(("oracle", 1),))
    walltime = RunSpec(policy="easy", workload="W5", seed=1, trace=SRC)
    assert run_one(oracle).metrics["wait_all"] != run_one(walltime).metrics["wait_all"]


def test_the_word_choices_reach_the_scheduler_and_the_engine() -> None:
    """``victim_order`` and ``requeue`` change which jobs PAA preempts and where they wait
    again: the runs differ from the default's (preemptions do happen on this workload)."""
    def run(*overrides: tuple[str, str]) -> dict[str, float | None]:
        return dict(run_one(RunSpec(policy="N&PAA", workload="W5", seed=3, trace=SRC,
                                    overrides=overrides)).metrics)

    default = run()
    assert (default["preempt_rigid"] or 0) + (default["preempt_malleable"] or 0) > 0
    assert run(("victim_order", "seconds")) != default
    assert run(("requeue", "at-preemption")) != default
    assert run(("requeue", "original"), ("victim_order", "node-seconds")) == default


def test_parallel_runs_equal_serial_runs(grid, records) -> None:
    subset = grid[:6]
    parallel = run_grid(subset, workers=2)
    assert [r.spec for r in parallel] == list(subset)
    assert [r.metrics for r in parallel] == [r.metrics for r in records[:6]]


def test_every_run_has_the_paper_metrics(records) -> None:
    assert len(records) == 7 * 2 * 2
    for r in records:
        assert r.metrics["turnaround_all"] is not None and r.metrics["turnaround_all"] > 0
        assert 0 < r.metrics["utilisation"] <= 1
        assert set(m.key for m in PAPER_METRICS) <= set(r.metrics)
    easy = [r for r in records if r.spec.policy == "easy"]
    assert all(r.metrics["preempt_rigid"] == 0 for r in easy)
    mechanisms = [r for r in records if r.spec.policy != "easy"]
    assert all(r.metrics["instant_start"] >= 0.9 for r in mechanisms)


def test_the_store_reuses_runs_and_fresh_reruns(tmp_path: Path, grid) -> None:
    store = RunStore(tmp_path / "runs")
    specs = grid[:2]
    seen: list[str] = []
    first = run_grid(specs, workers=1, store=store, on_done=lambda r: seen.append(r.spec.key))
    assert sorted(p.stem for p in (tmp_path / "runs").glob("*.json")) == \
        sorted(s.key for s in specs)
    # a stored record is returned as stored: same wall time proves it was not run again
    again = run_grid(specs, workers=1, store=store)
    assert [r.wall_seconds for r in again] == [r.wall_seconds for r in first]
    rerun = run_grid(specs, workers=1, store=store, fresh=True)
    assert [r.metrics for r in rerun] == [r.metrics for r in first]
    assert len(seen) == 2


def test_fresh_runs_again_what_the_store_holds(tmp_path: Path, grid) -> None:
    """A stored record is tampered with: without ``fresh`` the study reads it back as it is;
    with ``fresh`` it runs the spec again, returns the true figures and stores them."""
    store = RunStore(tmp_path / "runs")
    spec = grid[0]
    (true,) = run_grid([spec], workers=1, store=store)
    path = store.path(spec)
    data = json.loads(path.read_text())
    data["metrics"]["turnaround_all"] = -1.0
    path.write_text(json.dumps(data))
    (stored,) = run_grid([spec], workers=1, store=store)
    assert stored.metrics["turnaround_all"] == -1.0, "the stored record is reused as it is"
    (fresh,) = run_grid([spec], workers=1, store=store, fresh=True)
    assert fresh.metrics == true.metrics and fresh.metrics["turnaround_all"] != -1.0
    assert store.get(spec) is not None and store.get(spec).metrics == true.metrics


def test_truncated_trace_keeps_the_first_jobs() -> None:
    whole = load_source(TraceSource(jobs=300, seed=3))
    src = TraceSource(path=None, jobs=150, seed=3)
    assert len(load_source(src)) == 150
    assert len(whole) == 300


def test_outputs_end_to_end(tmp_path: Path, records) -> None:
    context = StudyContext(name="paper", title="Small study", question="Does it run?",
                           trace=records[0].trace, seeds=(0, 1), runs=len(records))
    out = write_study(records, tmp_path, context)
    names = {p.name for p in out.files}
    assert names == {"results.csv", "results.json", "runs.csv", "findings.json",
                     "fig6_default.png", "report.md", "report.html"}
    for p in out.files:
        assert p.stat().st_size > 0
    assert (tmp_path / "fig6_default.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = list(csv.DictReader((tmp_path / "results.csv").open()))
    assert len(rows) == 7 * 3  # W1, W4 and the all-workloads row per policy
    assert [r["policy"] for r in rows[::3]] == ["easy", "N&PAA", "N&SPAA", "CUA&PAA",
                                                "CUA&SPAA", "CUP&PAA", "CUP&SPAA"]
    findings = json.loads((tmp_path / "findings.json").read_text())
    assert len(findings) == 6 and all("holds" in f for f in findings)
    report = (tmp_path / "report.md").read_text()
    assert "## The paper's findings beside ours" in report
    for f in out.findings:
        assert f.claim in report
    assert "![" in report and "fig6_default.png" in report
    runs = list(csv.DictReader((tmp_path / "runs.csv").open()))
    assert len(runs) == len(records)


def test_outputs_are_identical_for_identical_records(tmp_path: Path, records) -> None:
    context = StudyContext(name="paper", title="T", question="Q", trace="t", seeds=(0, 1),
                           runs=len(records))
    write_study(records, tmp_path / "a", context)
    write_study(list(reversed(records)), tmp_path / "b", context)
    for name in ("results.csv", "results.json", "findings.json", "report.md"):
        assert (tmp_path / "a" / name).read_text() == (tmp_path / "b" / name).read_text()


def test_a_sweep_gets_a_variant_figure(tmp_path: Path) -> None:
    specs = build_grid(STUDIES["checkpoint"], trace=TraceSource(jobs=60, seed=1), seeds=1,
                       workloads=["W5"], policies=["easy", "CUA&PAA"])
    recs = run_grid(specs, workers=1)
    context = StudyContext(name="checkpoint", title="T", question="Q", trace="t", seeds=(0,),
                           runs=len(recs))
    out = write_study(recs, tmp_path, context)
    assert out.table.variants == ("checkpoint_scale=1", "checkpoint_scale=0.5",
                                  "checkpoint_scale=2")
    assert (tmp_path / "variants.png").is_file()
    assert "## Variants side by side" in (tmp_path / "report.md").read_text()


def test_a_failure_run_records_the_failures() -> None:
    spec = RunSpec(policy="CUA&SPAA", workload="W5", seed=0, trace=SRC,
                   overrides=(("failure_mtbf", 2 * 3600.0), ("failure_repair", 6 * 3600.0)))
    record = run_one(spec)
    assert record.metrics["failures"] is not None and record.metrics["failures"] > 0
    assert record.metrics["failure_kills"] is not None
    assert run_one(spec).metrics == record.metrics
    plain = run_one(RunSpec(policy="CUA&SPAA", workload="W5", seed=0, trace=SRC))
    assert plain.metrics["failures"] is None


def test_a_load_factor_scales_the_source_and_names_a_new_run() -> None:
    import numpy as np

    from sim.run.spec import SpecError

    plain, doubled = TraceSource(jobs=50), TraceSource(jobs=50, load=2)
    a, b = load_source(plain), load_source(doubled)
    assert np.allclose(np.diff(b.jobs.submit), np.diff(a.jobs.submit) / 2)
    one = RunSpec(policy="easy", workload="W1", seed=0, trace=plain)
    two = RunSpec(policy="easy", workload="W1", seed=0, trace=doubled)
    assert '"load"' not in one.to_json()  # keys of load-1 specs are what they always were
    assert one.key != two.key and RunSpec.from_json(two.to_json()) == two
    assert "load x2" in doubled.describe()
    with pytest.raises(SpecError, match="load factor"):
        TraceSource(load=0)
