"""``metaq report --html`` on a queue a real ``metaq run`` worked through (an array, a task
that fails, one retried, tasks of two projects), opened in Debian's headless Chromium: the
charts render, hover values and sorting work, nothing is logged as an error, and the page
makes no request but for its own file. A planted request proves the watch would see one.

Skips, saying why, when Chromium is not installed (``.ci/run`` installs it).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.browser import need_chromium, open_page
from tests.job_logs import metaq


@pytest.fixture(autouse=True)
def _chromium() -> None:
    need_chromium()

SCRIPTS = {
    "sweep.sh": "#METAQ NODES 1\n#METAQ MIN_WC_TIME 1m\n#METAQ PROJECT lattice\nsleep 0.2\n",
    "solve.sh": "#METAQ NODES 2\n#METAQ MIN_WC_TIME 1m\n#METAQ PROJECT hadron\nsleep 0.5\n",
    "flaky.sh": "#METAQ NODES 1\n#METAQ MIN_WC_TIME 1m\n#METAQ PROJECT hadron\n"
                "#METAQ RETRIES 1\nexit 3\n",
    "broken.sh": "#METAQ NODES 1\n#METAQ MIN_WC_TIME 1m\n#METAQ PROJECT lattice\nkill -9 $$\n",
}


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A queue worked through by a real local runner, and its HTML report."""
    root = tmp_path_factory.mktemp("campaign")
    queue = root / "queue"
    assert metaq("init", str(queue)).returncode == 0
    for name, body in SCRIPTS.items():
        (root / name).write_text("#!/bin/bash\n" + body)
        (root / name).chmod(0o755)
    made = metaq("submit", "-q", str(queue), "--array", "0-11", str(root / "sweep.sh"))
    assert made.returncode == 0, made.stderr
    made = metaq("submit", "-q", str(queue), *(str(root / n) for n in SCRIPTS if n != "sweep.sh"))
    assert made.returncode == 0, made.stderr
    ran = metaq("run", "--batch", "local", "--nodes", "4", "-q", str(queue))
    assert ran.returncode == 0, ran.stderr
    target = root / "report.html"
    wrote = metaq("report", "--html", str(target), "-q", str(queue))
    assert wrote.returncode == 0, wrote.stderr
    assert re.search(r"wrote .*report\.html: 16 runs of 15 tasks in 1 batch jobs", wrote.stdout)
    return target


def test_the_page_renders_its_charts_with_no_error_and_no_request(report: Path,
                                                                   tmp_path: Path) -> None:
    page = open_page(report)
    try:
        assert page.requests == [report.resolve().as_uri()] and page.outside_requests == []
        assert page.errors == []
        charts = page.evaluate("""Array.from(document.querySelectorAll('svg')).map(s => {
            const r = s.getBoundingClientRect();
            return [s.getAttribute('class'), r.width, r.height,
                    s.querySelectorAll('[data-tip]').length]; })""")
        kinds = [c[0] for c in charts]
        assert kinds.count("lines") == 3 and kinds.count("gantt") == 1 and "bars" in kinds
        assert all(w > 100 and h > 20 and marks > 0 for _, w, h, marks in charts)
        # every run is a bar on each of its hosts in the Gantt (16 runs, one of 2 nodes)
        bars = page.evaluate("document.querySelectorAll('svg.gantt rect[data-tip]:not("
                             "[fill^=\"url\"])').length")
        assert bars == 17
        sections = page.evaluate("Array.from(document.querySelectorAll('section h2'))"
                                 ".map(h => h.textContent)")
        assert sections == ["Overview", "Progress", "Allocations", "Utilisation", "Failures",
                            "Slowest tasks", "Retries", "On-demand", "Resources per project"]
        shot = page.screenshot(tmp_path / "page.png", full=True)
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    finally:
        page.close()


def test_hover_shows_values_and_headers_sort(report: Path) -> None:
    page = open_page(report)
    try:
        x, y = page.evaluate("""(() => {
            const bar = document.querySelector('svg.gantt rect[data-tip]:not([fill^="url"])');
            bar.scrollIntoView({block: 'center'});
            const r = bar.getBoundingClientRect();
            return [r.x + r.width / 2, r.y + r.height / 2]; })()""")
        page.hover(x, y)
        tip = page.evaluate("[getComputedStyle(document.getElementById('tip')).display, "
                            "document.getElementById('tip').textContent]")
        assert tip[0] == "block" and re.search(r"todo/\S+ on local\d", tip[1])
        page.hover(1, 1)
        assert page.evaluate("getComputedStyle(document.getElementById('tip')).display") \
            == "none"
        order = """(() => {
            const table = document.querySelector('#slowest table');
            const col = Array.from(table.tHead.rows[0].cells).findIndex(
                c => c.textContent === 'ran');
            table.tHead.rows[0].cells[col].click();
            return Array.from(table.tBodies[0].rows).map(
                r => parseFloat(r.cells[col].getAttribute('data-v'))); })()"""
        ascending = page.evaluate(order)
        assert ascending == sorted(ascending) and ascending[0] < ascending[-1]
        descending = page.evaluate(order)
        assert descending == sorted(ascending, reverse=True)
        assert page.errors == []
    finally:
        page.close()


def test_a_planted_request_is_seen(report: Path, tmp_path: Path) -> None:
    """The watch is real: the same page with one remote picture added is caught."""
    planted = tmp_path / "planted.html"
    planted.write_text(report.read_text().replace(
        "<main>", '<main><img src="http://127.0.0.1:9/pixel.png" alt="">', 1))
    page = open_page(planted)
    try:
        refused = [e for e in page.errors if "Content Security Policy" in e]
        assert refused and "127.0.0.1:9" in refused[0]  # seen, and blocked by the policy
    finally:
        page.close()
