"""A study's ``report.html`` beside its ``report.md``: the headline table and findings, a
chart per metric with each policy's value on hover, and the figures inside the file, opened
in Debian's headless Chromium with no error and no request."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sim.run.spec import TraceSource
from sim.study.execution import run_grid
from sim.study.grid import STUDIES, build_grid
from sim.study.outputs import write_study
from sim.study.report import StudyContext
from tests.browser import need_chromium, open_page


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    specs = build_grid(STUDIES["paper"], trace=TraceSource(jobs=120, seed=3), seeds=2,
                       workloads=["W4"], policies=["easy", "CUA&SPAA"])
    records = run_grid(specs, workers=1)
    out = tmp_path_factory.mktemp("study")
    context = StudyContext(name="paper", title="Small study", question="Does it run?",
                           trace="a synthetic trace", seeds=(0, 1), runs=len(records))
    write_study(records, out, context)
    return out


def test_the_page_holds_the_table_findings_and_figures(study: Path) -> None:
    text = (study / "report.html").read_text()
    assert "Content-Security-Policy" in text and "default-src &#x27;none&#x27;" in text
    assert "<script src" not in text and "<link" not in text and "http" not in text.lower() \
        .replace("http-equiv", "")
    assert text.count("data:image/png;base64,") == 1  # fig6, inside the file
    markdown = (study / "report.md").read_text()
    for claim in re.findall(r"^\| (.+?) \| .+ \| (?:holds|\*\*does not hold\*\*|cannot judge) "
                            r"\|", markdown, re.M):
        assert claim.replace("&", "&amp;").replace("'", "&#x27;") in text


def test_the_page_renders_in_chromium(study: Path) -> None:
    need_chromium()
    page = open_page(study / "report.html")
    try:
        assert page.requests[0] == (study / "report.html").resolve().as_uri()
        assert page.outside_requests == []
        assert page.errors == []
        charts = page.evaluate("Array.from(document.querySelectorAll('svg.bars')).map("
                               "s => s.querySelectorAll('rect[data-tip]').length)")
        assert charts and all(n == 2 for n in charts)  # one bar per policy
        tips = page.evaluate("Array.from(document.querySelectorAll('svg.bars rect')).map("
                             "r => r.getAttribute('data-tip'))")
        assert any(t.startswith("CUA&SPAA: ") and "seeds" in t for t in tips)
        size = page.evaluate("(() => { const i = document.querySelector('figure img'); "
                             "return [i.naturalWidth, i.naturalHeight]; })()")
        assert size[0] > 100 and size[1] > 100  # the embedded figure decoded
        headline = page.evaluate("document.querySelectorAll('#table0 tbody tr').length")
        assert headline == 2
    finally:
        page.close()
