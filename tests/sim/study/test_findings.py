"""Each headline finding judged on hand-made results tables: one where it holds, one where it
does not (with the reason naming the numbers), and one it cannot judge."""

from __future__ import annotations

import pytest

from sim.study.aggregate import ResultsTable
from sim.study.findings import (
    Finding,
    cua_beats_cup,
    instant_start,
    judge,
    malleable_faster,
    npaa_worst,
    spaa_beats_paa,
    utilisation_gain,
)
from sim.study.grid import MECHANISM_NAMES, PAPER_POLICIES


def table(values: dict[str, dict[str, float]], workloads: tuple[str, ...] = ("W1", "W5")) \
        -> ResultsTable:
    """The same values on every workload."""
    return ResultsTable.from_means({(p, w): row for p, row in values.items()
                                    for w in workloads})


def paper_like() -> dict[str, dict[str, float]]:
    """A table in which every claim of the paper holds."""
    util = {"easy": 0.70, "N&PAA": 0.74, "N&SPAA": 0.76, "CUA&PAA": 0.75, "CUA&SPAA": 0.78,
            "CUP&PAA": 0.745, "CUP&SPAA": 0.77}
    turn = {"easy": 10.0, "N&PAA": 9.5, "N&SPAA": 9.0, "CUA&PAA": 8.0, "CUA&SPAA": 7.5,
            "CUP&PAA": 8.5, "CUP&SPAA": 8.2}
    return {p: {"instant_start": 0.22 if p == "easy" else 0.98, "utilisation": util[p],
                "turnaround_all": turn[p], "turnaround_rigid": turn[p] + 1,
                "turnaround_malleable": turn[p] - 1} for p in PAPER_POLICIES}


def test_every_finding_holds_on_a_paper_like_table() -> None:
    found = judge(table(paper_like()))
    assert [f.holds for f in found] == [True] * 6
    assert all(isinstance(f, Finding) and f.paper and f.ours for f in found)


def test_instant_start_fails_when_the_baseline_starts_too_many() -> None:
    values = paper_like()
    values["easy"]["instant_start"] = 0.60
    f = instant_start(table(values))
    assert f.holds is False
    assert "60.0%" in f.reason and "baseline" in f.reason


def test_instant_start_fails_when_the_mechanisms_fall_short() -> None:
    values = paper_like()
    for m in MECHANISM_NAMES:
        values[m]["instant_start"] = 0.80
    f = instant_start(table(values))
    assert f.holds is False and "80.0%" in f.reason


def test_instant_start_tolerance_is_a_parameter() -> None:
    values = paper_like()
    values["easy"]["instant_start"] = 0.30
    assert instant_start(table(values)).holds is True
    assert instant_start(table(values), tolerance=0.05).holds is False


def test_utilisation_gain_needs_more_than_five_percent() -> None:
    values = paper_like()
    assert utilisation_gain(table(values)).holds is True
    for m in MECHANISM_NAMES:
        values[m]["utilisation"] = 0.72  # +2.9% relative to 0.70
    f = utilisation_gain(table(values))
    assert f.holds is False
    assert "+2.9%" in f.reason


def test_utilisation_pinned_by_the_load_is_explained() -> None:
    values = paper_like()
    for p in PAPER_POLICIES:
        values[p]["utilisation"] = 0.753
    f = utilisation_gain(table(values))
    assert f.holds is False and "pinned by the offered load" in f.reason
    assert "pinned" in spaa_beats_paa(table(values)).reason
    assert "pinned" not in spaa_beats_paa(table(paper_like())).reason


def test_npaa_worst_names_the_real_worst() -> None:
    values = paper_like()
    assert npaa_worst(table(values)).holds is True
    values["CUP&SPAA"]["turnaround_all"] = 12.0
    f = npaa_worst(table(values))
    assert f.holds is False
    assert "CUP&SPAA" in f.reason and "12.00 h" in f.reason


def test_spaa_beats_paa_lists_the_pairs_that_break_it() -> None:
    values = paper_like()
    values["CUA&PAA"]["utilisation"] = 0.80
    f = spaa_beats_paa(table(values))
    assert f.holds is False
    assert "CUA&SPAA is not above CUA&PAA" in f.reason
    assert "N&SPAA is not above" not in f.reason


def test_cua_beats_cup_on_turnaround() -> None:
    values = paper_like()
    assert cua_beats_cup(table(values)).holds is True
    values["CUP&SPAA"]["turnaround_all"] = 7.0
    f = cua_beats_cup(table(values))
    assert f.holds is False and "CUA&SPAA is not below CUP&SPAA" in f.reason


def test_malleable_faster_blames_the_workload_when_the_baseline_is_slow_too() -> None:
    values = paper_like()
    for p in PAPER_POLICIES:
        values[p]["turnaround_malleable"] = values[p]["turnaround_rigid"] + 2
    f = malleable_faster(table(values))
    assert f.holds is False
    assert "slower already under the baseline" in f.reason
    assert "0 of 6" in f.ours


def test_findings_cannot_judge_without_their_policies() -> None:
    values = {p: row for p, row in paper_like().items() if p in ("easy", "CUA&SPAA")}
    found = {f.key: f for f in judge(table(values))}
    assert found["npaa_worst"].holds is None
    assert "N&PAA" in found["npaa_worst"].reason
    assert found["instant_start"].holds is True  # judged on the mechanisms present


def test_noise_is_reported_when_intervals_overlap() -> None:
    from sim.study.aggregate import Cell, ResultsTable

    base = table(paper_like())
    cells = dict(base.cells)
    for p in ("N&PAA", "CUA&SPAA"):
        row = dict(cells[("default", p, "all")])
        row["turnaround_all"] = Cell.of([8.0, 12.0] if p == "N&PAA" else [7.8, 11.0])
        cells[("default", p, "all")] = row
    noisy = ResultsTable(base.variants, base.policies, base.workloads, base.metrics, cells)
    f = npaa_worst(noisy)
    assert f.holds is True
    assert "noise" in f.reason


@pytest.mark.parametrize("finder", [instant_start, utilisation_gain, npaa_worst, spaa_beats_paa,
                                    cua_beats_cup, malleable_faster])
def test_every_finding_has_a_claim_and_the_papers_figure(finder) -> None:
    f = finder(table(paper_like()))
    assert f.claim and f.paper and f.key
