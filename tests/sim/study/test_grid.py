"""The named studies and their grids."""

from __future__ import annotations

import pytest

from sim.run.spec import SpecError, TraceSource, paper_rules
from sim.study.grid import (
    HOUR,
    MECHANISM_NAMES,
    PAPER_POLICIES,
    STUDIES,
    build_grid,
    parse_setting,
    parse_sweep,
    variants_of,
)

SRC = TraceSource(jobs=50)


def test_the_paper_grid_is_350_runs() -> None:
    grid = build_grid(STUDIES["paper"], trace=SRC)
    assert len(grid) == 7 * 5 * 10 == 350
    assert len(set(grid)) == 350
    assert {s.policy for s in grid} == set(PAPER_POLICIES)
    assert len(MECHANISM_NAMES) == 6 and "easy" not in MECHANISM_NAMES
    assert {s.variant for s in grid} == {"default"}


def test_sweep_studies_have_their_variants() -> None:
    checkpoint = {s.variant for s in build_grid(STUDIES["checkpoint"], trace=SRC, seeds=1)}
    assert checkpoint == {"checkpoint_scale=0.5", "checkpoint_scale=1", "checkpoint_scale=2"}
    mins = variants_of(STUDIES["malleable-min"])
    assert [dict(v)["malleable_min_fraction"] for v in mins] == [0.2, 0.4, 0.6]
    failures = variants_of(STUDIES["failures"])
    assert failures[0] == ()
    assert {dict(v).get("failure_mtbf") for v in failures[1:]} == {5 * HOUR, 50 * HOUR}
    assert all(dict(v)["failure_repair"] == 6 * HOUR for v in failures[1:])
    plus = STUDIES["spaa-plus"].policies
    assert {"N&SPAA+", "CUA&SPAA+", "CUP&SPAA+", "CUA&SPAA"} <= set(plus)


def test_sweeps_multiply_and_replace_study_values() -> None:
    key, values = parse_sweep("checkpoint_scale=0.5,2")
    assert (key, values) == ("checkpoint_scale", (0.5, 2.0))
    variants = variants_of(STUDIES["checkpoint"], [(key, values)])
    assert [dict(v)["checkpoint_scale"] for v in variants] == [0.5, 2.0]
    both = variants_of(STUDIES["paper"], [("checkpoint_scale", (0.5, 1.0)),
                                          ("malleable_min_fraction", (0.2, 0.4))])
    assert len(both) == 4


def test_sweep_values_may_be_durations() -> None:
    assert parse_sweep("failure_mtbf=5h,50h") == ("failure_mtbf", (5 * HOUR, 50 * HOUR))


def test_word_choices_are_set_by_their_words() -> None:
    assert parse_setting("victim_order=seconds") == ("victim_order", "seconds")
    assert parse_sweep("requeue=original,at-preemption") == \
        ("requeue", ("original", "at-preemption"))
    grid = build_grid(STUDIES["paper"], trace=SRC, seeds=1, workloads=["W5"],
                      overrides=(("requeue", "at-preemption"),))
    assert {s.choice("requeue") for s in grid} == {"at-preemption"}
    with pytest.raises(SpecError, match="parameter requeue is original or at-preemption, "
                                        "got 'last'"):
        parse_setting("requeue=last")


@pytest.mark.parametrize(("text", "words"), [
    ("checkpoint_scale", "KEY=V1,V2"),
    ("checkpoint_scale=", "KEY=V1,V2"),
    ("nope=1,2", "unknown parameter"),
    ("checkpoint_scale=a", "not a number"),
    ("checkpoint_scale=1,1", "repeats"),
])
def test_bad_sweeps(text: str, words: str) -> None:
    with pytest.raises(SpecError, match=words):
        parse_sweep(text)


def test_grid_options() -> None:
    grid = build_grid(STUDIES["paper"], trace=SRC, seeds=2, first_seed=7, workloads=["W2"],
                      policies=["easy", "CUP&PAA"])
    assert [(s.policy, s.workload, s.seed) for s in grid] == [
        ("easy", "W2", 7), ("easy", "W2", 8), ("CUP&PAA", "W2", 7), ("CUP&PAA", "W2", 8)]
    with pytest.raises(SpecError):
        build_grid(STUDIES["paper"], trace=SRC, seeds=0)
    with pytest.raises(SpecError, match="unknown workload"):
        build_grid(STUDIES["paper"], trace=SRC, workloads=["W7"])


def test_set_failure_repair_changes_only_the_runs_with_failures() -> None:
    """``--set failure_repair=1h`` on the failures study: the failure-free reference keeps no
    repair time (it has no failures to repair), the two failure variants swap their 6 h for
    1 h; without ``--set`` they keep 6 h; with ``failure_mtbf`` also set, every run gets both."""
    study = STUDIES["failures"]
    one_hour = (parse_setting("failure_repair=1h"),)
    assert one_hour == (("failure_repair", HOUR),)

    def repairs(overrides: tuple[tuple[str, float], ...]) -> set[tuple[object, object]]:
        return {(s.params.get("failure_mtbf"), s.params.get("failure_repair"))
                for s in build_grid(study, trace=SRC, seeds=1, workloads=["W5"],
                                    overrides=overrides)}

    assert repairs(one_hour) == {(None, None), (5 * HOUR, HOUR), (50 * HOUR, HOUR)}
    assert repairs(()) == {(None, None), (5 * HOUR, 6 * HOUR), (50 * HOUR, 6 * HOUR)}
    paper = build_grid(STUDIES["paper"], trace=SRC, seeds=1, overrides=one_hour)
    assert {s.variant for s in paper} == {"default"}
    both = build_grid(STUDIES["paper"], trace=SRC, seeds=1,
                      overrides=(("failure_mtbf", 5 * HOUR), *one_hour))
    assert {s.variant for s in both} == {"failure_mtbf=18000,failure_repair=3600"}
    with pytest.raises(SpecError, match="failure_mtbf clashes"):
        build_grid(study, trace=SRC, seeds=1, overrides=(("failure_mtbf", HOUR),))
    with pytest.raises(SpecError, match="failure_repair must be positive"):
        build_grid(study, trace=SRC, seeds=1, overrides=(("failure_repair", 0.0),))


def test_calibration_runs_leave_out_a_failure_repair_without_failures() -> None:
    """Calibration's baseline runs have no failures, so ``--set failure_repair`` leaves
    them as they are (it used to fail them: a repair time needs a time between failures)."""
    from sim.study.calibrate import _spec

    assert _spec(SRC, 1.5, (("failure_repair", HOUR),)).overrides == paper_rules("easy")
    assert _spec(SRC, 1.5, (("failure_mtbf", 5 * HOUR), ("failure_repair", HOUR))).overrides \
        == tuple(sorted((("failure_mtbf", 5 * HOUR), ("failure_repair", HOUR),
                         *paper_rules("easy"))))


def test_every_run_of_a_study_follows_the_paper_rules_unless_set_otherwise() -> None:
    grid = build_grid(STUDIES["paper"], trace=SRC, seeds=1, workloads=["W5"])
    by = {s.policy: dict(s.overrides) for s in grid}
    assert by["easy"] == {"checkpoint_time": "charged", "setup_speedup": "none",
                          "malleable_start": "full", "planning": "cqsim"}
    assert by["CUA&SPAA"] == {"checkpoint_time": "charged", "setup_speedup": "none",
                              "victim_order": "seconds"}
    # the rules do not show in the variant label: every policy's runs are "default"
    assert {s.variant for s in grid} == {"default"}
    # --set with a rule's other word brings back the choice before it, and says so
    old = build_grid(STUDIES["paper"], trace=SRC, seeds=1, workloads=["W5"],
                     overrides=(("victim_order", "node-seconds"),))
    assert {dict(s.overrides).get("victim_order") for s in old if s.policy != "easy"} == \
        {"node-seconds"}
    assert {s.variant for s in old if s.policy != "easy"} == {"victim_order=node-seconds"}
