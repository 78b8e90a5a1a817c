"""Every observation has a cause, each cause says where it comes from (a rule of the paper,
or that no cause is established and what would decide), and a row that does not hold shows
its cause once, after the parts that failed, while a row that holds shows none."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

from sim.study.causes import CAUSES
from sim.study.full_report import row_cause
from sim.study.judging import Verdict, Word
from sim.study.observations import OBSERVATIONS


def test_every_observation_has_a_cause() -> None:
    assert sorted(CAUSES) == [o.number for o in OBSERVATIONS]
    for number, text in CAUSES.items():
        assert text.strip() and text.endswith("."), number
        # a rule of the paper named by its number, or the admission that none is shown
        assert re.search(r"\bR(?:[1-9]|1\d|20)\b", text) or "No cause established" in text \
            or text.startswith(("Not a rule", "Load, not a rule", "Holds")), number


def test_a_cause_not_established_names_what_would_decide() -> None:
    for number, text in CAUSES.items():
        if "No cause established" in text:
            assert re.search(r"would (decide|say)|gives it ten seeds", text), number


def _results(**words: Word) -> Any:
    """One trace's verdicts at two loads: observation 13 with the given word at each load,
    every other observation holding."""
    at = {load: [Verdict(o.number, "ours", words[load] if o.number == 13 else Word.HOLDS,
                         broken="rigid 25.47 h → 29.33 h" if o.number == 13 and
                         words[load] is Word.CONTRADICTED else "", seeds=3)
                 for o in OBSERVATIONS] for load in words}
    return SimpleNamespace(verdicts=SimpleNamespace(at=at, trace="t"),
                           plan=SimpleNamespace(factors={"paper": 1.1, "saturated": 1.5}))


def test_a_row_that_does_not_hold_gives_its_parts_then_its_cause_once() -> None:
    r = _results(paper=Word.CONTRADICTED, saturated=Word.CONTRADICTED)
    note = row_cause(r, 12)
    assert note.startswith("at x1.1: contradicted: rigid 25.47 h → 29.33 h; "
                           "at x1.5: contradicted: rigid 25.47 h → 29.33 h; ")
    assert note.endswith(f"cause (the Theta runs of issue 30): {CAUSES[13]}")
    assert note.count(CAUSES[13]) == 1


def test_a_row_that_holds_everywhere_names_no_cause() -> None:
    r = _results(paper=Word.HOLDS, saturated=Word.HOLDS)
    assert row_cause(r, 12) == ""
    assert all(row_cause(r, i) == "" for i in range(len(OBSERVATIONS)))


def test_a_row_that_fails_at_one_load_still_names_its_cause() -> None:
    r = _results(paper=Word.HOLDS, saturated=Word.CONTRADICTED)
    note = row_cause(r, 12)
    assert "at x1.1" not in note and note.startswith("at x1.5: contradicted")
    assert note.endswith(f"cause (the Theta runs of issue 30): {CAUSES[13]}")
