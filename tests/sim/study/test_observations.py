"""The 17 observations: every one has a row, verdicts follow hand-made tables, the full study
runs end to end on a small synthetic trace, and the load is calibrated for real."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim.run.spec import TraceSource
from sim.study.aggregate import ResultsTable
from sim.study.calibrate import TOLERANCE, calibrate
from sim.study.execution import RunStore, run_grid
from sim.study.full import run_all
from sim.study.full_report import FullContext, kendall_tau, ranking, render_full, write_full
from sim.study.grid import MECHANISM_NAMES, PAPER_POLICIES
from sim.study.observations import OBSERVATIONS, Evidence, judge_all

SMALL = TraceSource(jobs=300, seed=2)


def test_the_observations_are_numbered_1_to_17() -> None:
    assert [o.number for o in OBSERVATIONS] == list(range(1, 18))


def _table(**by_policy: dict[str, float]) -> ResultsTable:
    return ResultsTable.from_means({(p.replace("_", "&"), "W1"): v
                                    for p, v in by_policy.items()})


def test_npaa_worst_holds_only_when_it_is_worst_on_all_three() -> None:
    base = {"turnaround_all": 10.0, "utilisation": 0.8, "preempt_malleable": 0.1}
    rows = {m.replace("&", "_"): dict(base) for m in MECHANISM_NAMES}
    rows["N_PAA"] = {"turnaround_all": 12.0, "utilisation": 0.7, "preempt_malleable": 0.3}
    verdict = judge_all(Evidence(_table(**rows)))[1]
    assert verdict.number == 2 and verdict.holds is True
    rows["CUA_SPAA"] = {"turnaround_all": 13.0, "utilisation": 0.8, "preempt_malleable": 0.1}
    verdict = judge_all(Evidence(_table(**rows)))[1]
    assert verdict.holds is False and "longest turnaround: CUA&SPAA" in verdict.broken


def test_missing_evidence_cannot_be_judged() -> None:
    verdicts = judge_all(Evidence(None))
    assert len(verdicts) == 17 and all(v.holds is None for v in verdicts)


def test_kendall_tau_and_ranking() -> None:
    assert kendall_tau(["a", "b", "c"], ["a", "b", "c"]) == 1
    assert kendall_tau(["a", "b", "c"], ["c", "b", "a"]) == -1
    rows = {m.replace("&", "_"): {"turnaround_all": float(i)}
            for i, m in enumerate(reversed(MECHANISM_NAMES))}
    assert ranking(_table(**rows)) == list(reversed(MECHANISM_NAMES))


def test_calibration_reaches_its_target_on_a_real_run(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    found = calibrate(SMALL, lambda s: run_grid(s, workers=1, store=store), target=0.6)
    assert abs(found.reached - 0.6) <= TOLERANCE or len(found.steps) >= 12
    assert found.steps[0][0] == 1.0
    assert found.calibrated["utilisation_paper"] == pytest.approx(found.reached)
    # the stored run at the factor found is a baseline run at that load
    again = [r for r in store.records() if r.spec.trace.load == found.factor]
    assert again and again[0].spec.policy == "easy"


def test_the_full_study_writes_a_row_per_observation(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    results = run_all([SMALL], seeds=(0,), run=lambda s: run_grid(s, workers=2, store=store),
                      workloads=("W2", "W4", "W5"))
    (r,) = results
    assert set(r.tables) == {"own", "paper", "checkpoint", "failures", "malleable-min",
                             "setup", "load-0.8", "load-1.2"}
    assert r.tables["paper"].policies == PAPER_POLICIES
    assert len(r.verdicts.paper) == len(r.verdicts.own) == 17
    # 13-17 come from the variant studies (one workload each) and are judged, not skipped
    assert all(v.holds is not None for v in r.verdicts.paper[12:]), r.verdicts.paper[12:]
    files = write_full(results, tmp_path, FullContext("metaq experiment --study all",
                                                      (0,), 1))
    report = (tmp_path / "report.md").read_text()
    for o in OBSERVATIONS:
        assert f"| {o.number} | {o.claim} |" in report
    assert "metaq experiment --study all" in report and "Seeds: 0" in report
    assert "Table III" in report and "Sensitivity of the ranking" in report
    data = json.loads((tmp_path / "observations.json").read_text())
    assert [o["number"] for o in data[0]["observations"]] == list(range(1, 18))
    assert report == render_full(results, FullContext("metaq experiment --study all", (0,), 1))
    assert tmp_path / "report.md" in files


def test_a_reading_judges_the_widened_preemption_ratios() -> None:
    # observation 14 with failures that kill jobs but preempt none: it fails as read by
    # default, and holds when a kill counts as a preemption
    def table(failures: bool) -> ResultsTable:
        rows = {m.replace("&", "_"): {
            "utilisation": 0.7 if failures else 0.8, "instant_start": 0.9 if failures else 0.95,
            "preempt_rigid": 0.03, "preempt_malleable": 0.1 if not failures else 0.2,
            "turnaround_rigid": 30.0 if failures else 20.0,
            "preempt_or_kill_rigid": 0.09 if failures else 0.03,
            "preempt_or_kill_malleable": 0.25 if failures else 0.1} for m in MECHANISM_NAMES}
        return ResultsTable.from_means({(p.replace("_", "&"), "W5"): v for p, v in rows.items()},
                                       variant="failure_mtbf=18000" if failures else "default")

    merged = ResultsTable(variants=("default", "failure_mtbf=18000"), policies=MECHANISM_NAMES,
                          workloads=("W5",), metrics=table(False).metrics,
                          cells={**table(False).cells, **table(True).cells})
    plain = judge_all(Evidence(None, {"failures": merged}))[13]
    assert plain.holds is False and "preempt_rigid 3.0% → 3.0%" in plain.broken
    read = judge_all(Evidence(None, {"failures": merged}, "kills-as-preemptions"))[13]
    assert read.holds is True and "preempt_rigid 3.0% → 9.0%" in read.ours
    # a table without the widened figures cannot be judged under the reading
    bare = ResultsTable.from_means({("N&PAA", "W1"): {"preempt_rigid": 0.1}})
    assert judge_all(Evidence(bare, {}, "shrinks-as-preemptions"))[2].holds is None
    with pytest.raises(ValueError, match="unknown reading"):
        judge_all(Evidence(bare, {}, "nope"))


def test_kills_and_shrinks_are_counted_for_the_readings() -> None:
    from sim.run.spec import RunSpec
    from sim.study.execution import run_one

    spec = RunSpec(policy="CUA&SPAA", workload="W5", seed=0, trace=SMALL,
                   overrides=(("failure_mtbf", 3600.0),))
    m = run_one(spec).metrics
    assert m["failure_kills"] > 0
    assert m["preempt_or_kill_rigid"] > m["preempt_rigid"]
    assert m["preempt_or_kill_malleable"] >= m["preempt_malleable"]
    assert max(m["preempt_malleable"], m["shrink_malleable"]) <= \
        m["preempt_or_shrink_malleable"] <= m["preempt_malleable"] + m["shrink_malleable"]
    calm = run_one(RunSpec(policy="CUA&SPAA", workload="W5", seed=0, trace=SMALL)).metrics
    assert calm["preempt_or_kill_rigid"] == calm["preempt_rigid"]
