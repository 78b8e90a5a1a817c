"""The Gantt chart of one allocation: the timeline rebuilt from events (bars, holds, marks) and
the PNG drawn from it, checked pixel by pixel where it matters."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgb

from metaq_py.durations import format_duration
from metaq_py.report.gantt import IDLE, KIND_COLOURS, draw_gantt, gantt_figure, view
from metaq_py.report.joblog import read_job_log
from metaq_py.report.timeline import Bar, Hold, build_timeline
from tests.cli.test_queue import metaq as cli
from tests.job_logs import end, runner_start, start

T0 = 1_750_000_000.0
HOSTS = ["n1", "n2", "n3", "n4"]


def _events() -> list[dict]:
    """Four nodes for an hour: a rigid task preempted for an on-demand one that redeems a
    notice, a malleable task shrunk for it and expanded afterwards, and an idle stretch."""
    return [
        runner_start(T0, HOSTS, end=T0 + 3600),
        start(T0 + 60, "todo/rigid.sh", ["n1", "n2"]),
        start(T0 + 60, "todo/mall.sh", ["n3", "n4"], kind="malleable"),
        {"time": T0 + 600, "event": "reserve", "notice": "beam", "hosts": []},
        {"time": T0 + 1200, "event": "preempt", "task": "todo/rigid.sh",
         "for_task": "todo/od.sh", "lost_node_seconds": 600.0},
        end(T0 + 1200, "todo/rigid.sh", ["n1", "n2"], seconds=1140, outcome="preempted"),
        {"time": T0 + 1200, "event": "shrink", "task": "todo/mall.sh", "hosts": ["n3"],
         "for_task": "todo/od.sh", "mode": "in-place"},
        start(T0 + 1210, "todo/od.sh", ["n1", "n2", "n4"], kind="ondemand", notice="beam",
              instant=True),
        end(T0 + 1800, "todo/od.sh", ["n1", "n2", "n4"], seconds=590, kind="ondemand"),
        {"time": T0 + 1800, "event": "expand", "task": "todo/mall.sh", "hosts": ["n3", "n4"],
         "for_task": None, "mode": "in-place"},
        end(T0 + 2400, "todo/mall.sh", ["n3", "n4"], seconds=2340, kind="malleable"),
        {"time": T0 + 3000, "event": "runner-stop", "reason": "nothing left"},
    ]


def test_the_timeline_follows_every_move() -> None:
    tl = build_timeline(_events(), jobid="42")
    assert tl.hosts == tuple(HOSTS) and tl.start == T0 and tl.end == T0 + 3600
    assert tl.stop == T0 + 3000 and tl.stopped and tl.mechanism == "CUA&SPAA"
    assert set(tl.bars) == {
        Bar("n1", "todo/rigid.sh", T0 + 60, T0 + 1200, "rigid", "preempted"),
        Bar("n2", "todo/rigid.sh", T0 + 60, T0 + 1200, "rigid", "preempted"),
        Bar("n3", "todo/mall.sh", T0 + 60, T0 + 2400, "malleable", "finished"),
        Bar("n4", "todo/mall.sh", T0 + 60, T0 + 1200, "malleable", "shrunk"),
        Bar("n4", "todo/mall.sh", T0 + 1800, T0 + 2400, "malleable", "finished"),
        *(Bar(h, "todo/od.sh", T0 + 1210, T0 + 1800, "ondemand", "finished")
          for h in ("n1", "n2", "n4")),
    }
    assert {(m.what, m.host) for m in tl.marks} == {
        ("preempt", "n1"), ("preempt", "n2"), ("shrink", "n4"), ("expand", "n4")}
    # busy: n1 and n2 run rigid.sh (1140 s) then od.sh (590 s); n3 runs mall.sh throughout
    # (2340 s); n4 runs mall.sh (1140 s), od.sh (590 s) and mall.sh again (600 s)
    assert tl.busy_seconds("n1") == pytest.approx(1140 + 590)
    assert tl.busy_seconds("n4") == pytest.approx(1140 + 590 + 600)
    assert tl.idle_seconds() == pytest.approx(4 * 3000 - (2 * 1730 + 2340 + 2330))


def test_a_reservation_is_a_hold_until_its_task_starts() -> None:
    events = [runner_start(T0, ["a", "b"], end=None),
              {"time": T0 + 10, "event": "reserve", "notice": "n", "hosts": ["a"]},
              {"time": T0 + 20, "event": "reserve", "notice": "n", "hosts": ["b"]},
              start(T0 + 30, "todo/od.sh", ["a", "b"], kind="ondemand", notice="n"),
              {"time": T0 + 40, "event": "reserve", "notice": "m", "hosts": ["a"]},
              {"time": T0 + 50, "event": "release", "notice": "m", "reason": "expired"}]
    tl = build_timeline(events, jobid="1")
    assert set(tl.holds) == {Hold("a", "n", T0 + 10, T0 + 30), Hold("b", "n", T0 + 20, T0 + 30),
                             Hold("a", "m", T0 + 40, T0 + 50)}
    # the on-demand task is still running when the log ends: its bars end at the last event
    assert {(b.host, b.end, b.outcome) for b in tl.bars} == {("a", T0 + 50, None),
                                                             ("b", T0 + 50, None)}
    assert not tl.stopped and tl.end is None


def test_a_log_without_a_runner_start_is_refused() -> None:
    with pytest.raises(ValueError, match="no runner-start"):
        build_timeline([{"time": 1, "event": "start", "task": "t"}], jobid="9")


def _pixel(fig, x: float, y: float) -> tuple[float, float, float]:
    """The colour drawn at data point (x, y) of the figure's first axes."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    img = np.asarray(canvas.buffer_rgba())
    px, py = fig.axes[0].transData.transform((x, y))
    return tuple(img[img.shape[0] - round(py), round(px), :3] / 255.0)


def _close(a: tuple[float, ...], b: str) -> bool:
    return all(abs(x - y) < 0.02 for x, y in zip(a, to_rgb(b), strict=True))


def test_bars_idle_gaps_and_the_allocation_end_are_drawn() -> None:
    tl = build_timeline(_events(), jobid="42")
    fig = gantt_figure(tl, full=True)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == HOSTS[::-1] or labels == HOSTS  # one row per host
    row = {t.get_text(): t.get_position()[1] for t in ax.get_yticklabels()}
    minute = 60.0
    # n1 at 10 min: the rigid task; at 25 min: the on-demand task; at 42 min: idle
    assert _close(_pixel(fig, 10, row["n1"]), KIND_COLOURS["rigid"])
    assert _close(_pixel(fig, 25, row["n1"]), KIND_COLOURS["ondemand"])
    assert _close(_pixel(fig, 42, row["n1"]), IDLE)
    # n4 was lent to the on-demand task, then given back to the malleable one
    assert _close(_pixel(fig, 10, row["n4"]), KIND_COLOURS["malleable"])
    assert _close(_pixel(fig, 25, row["n4"]), KIND_COLOURS["ondemand"])
    assert _close(_pixel(fig, 35, row["n4"]), KIND_COLOURS["malleable"])
    # the allocation end is a dashed vertical line at 60 minutes
    ends = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
    assert [ln.get_xdata()[0] for ln in ends] == [pytest.approx(3600 / minute)]
    assert "idle" in ax.get_title() and "job 42" in ax.get_title()
    texts = {t.get_text() for t in ax.texts}
    assert {"rigid.sh", "mall.sh", "od.sh"} <= texts


def test_draw_writes_a_png(tmp_path: Path) -> None:
    out = draw_gantt(build_timeline(_events(), jobid="42"), tmp_path / "g.png")
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def _day_long(hours_of_work: float = 1.0) -> list[dict]:
    """A 24-hour allocation whose two tasks take the first ``hours_of_work`` hours."""
    work = hours_of_work * 3600
    return [runner_start(T0, ["n1", "n2"], end=T0 + 86400),
            start(T0 + 30, "todo/a.sh", ["n1"]),
            start(T0 + 30, "todo/b.sh", ["n2"]),
            end(T0 + work / 2, "todo/a.sh", ["n1"], seconds=work / 2 - 30),
            end(T0 + work, "todo/b.sh", ["n2"], seconds=work - 30),
            {"time": T0 + work + 5, "event": "runner-stop", "reason": "nothing left"}]


def test_the_chart_zooms_to_the_tasks_and_notes_the_allocations_end() -> None:
    tl = build_timeline(_day_long(), jobid="7")
    lo, hi = view(tl)
    # The tasks ran from 30 s to 1 h: that, with 2% of it each side, not the 24 hours.
    assert lo == T0 and hi == pytest.approx(T0 + 3600 + 0.02 * 3570)
    fig = gantt_figure(tl)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "minutes since the runner started"
    assert ax.get_xlim() == pytest.approx((0.0, (hi - T0) / 60))
    row = {t.get_text(): t.get_position()[1] for t in ax.get_yticklabels()}
    # b.sh fills most of the picture's width, not a sliver of it.
    assert _close(_pixel(fig, 45, row["n2"]), KIND_COLOURS["rigid"])
    assert _close(_pixel(fig, 45, row["n1"]), IDLE)
    notes = [t.get_text() for t in ax.texts if "allocation ends" in t.get_text()]
    later = 86400 - (hi - T0)
    assert notes == [f"allocation ends {format_duration(round(later))} later \u2192"]


def test_full_shows_the_whole_allocation_and_its_end_line() -> None:
    tl = build_timeline(_day_long(), jobid="7")
    assert view(tl, full=True) == (T0, T0 + 86400)
    ax = gantt_figure(tl, full=True).axes[0]
    assert ax.get_xlabel() == "hours since the runner started"
    left, right = ax.get_xlim()
    assert left == 0 and right >= 24
    assert not [t for t in ax.texts if "allocation ends" in t.get_text()]
    ends = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
    assert [ln.get_xdata()[0] for ln in ends] == [pytest.approx(24.0)]


def test_work_up_to_the_end_shows_the_end_line_itself() -> None:
    tl = build_timeline(_day_long(hours_of_work=23.9), jobid="7")
    assert view(tl)[1] == T0 + 86400  # cut at the allocation, not padded past it
    ax = gantt_figure(tl).axes[0]
    assert not [t for t in ax.texts if "allocation ends" in t.get_text()]
    assert ax.get_xlim()[1] == pytest.approx(24.0)


def test_failed_and_cancelled_runs_are_drawn_and_named_in_the_legend() -> None:
    events = [
        runner_start(T0, HOSTS[:2], end=T0 + 3600),
        start(T0 + 60, "todo/bad.sh", ["n1"]),
        start(T0 + 60, "todo/stop.sh", ["n2"]),
        end(T0 + 1200, "todo/bad.sh", ["n1"], seconds=1140, outcome="failed"),
        end(T0 + 1800, "todo/stop.sh", ["n2"], seconds=1740, outcome="cancelled"),
        {"time": T0 + 1900, "event": "runner-stop", "reason": "nothing left"},
    ]
    tl = build_timeline(events, jobid="7")
    ax = gantt_figure(tl, full=True).axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "failed (red edge)" in legend and "cancelled (hatched)" in legend
    bars = {c.get_hatch(): to_rgb(c.get_edgecolor()[0]) for c in ax.collections
            if len(c.get_paths()) == 1 and c.get_zorder() == 2}
    assert bars[None] == to_rgb("#c0392b") and bars["xx"] == to_rgb("#222222")
    # A campaign where every run finished names neither.
    calm = build_timeline(_events(), jobid="42")
    texts = [t.get_text() for t in gantt_figure(calm).axes[0].get_legend().get_texts()]
    assert not any(t.startswith(("failed", "cancelled")) for t in texts)


def test_a_share_takes_its_part_of_the_node_in_the_timeline() -> None:
    """A share's bar takes its cores' part of its host: one part per run of neighbouring
    cores, and its time counts for that part of the node (two halves side by side fill it)."""
    events = [
        {**runner_start(T0, HOSTS[:2], end=T0 + 3600), "cores_per_node": 8},
        {**start(T0, "todo/a.sh", ["n1"]), "cores": [0, 1, 2, 3]},
        {**start(T0, "todo/b.sh", ["n1"]), "cores": [4, 6, 7]},
        start(T0, "todo/whole.sh", ["n2"]),
        end(T0 + 600, "todo/a.sh", ["n1"], seconds=600),
        end(T0 + 600, "todo/b.sh", ["n1"], seconds=600),
        end(T0 + 600, "todo/whole.sh", ["n2"], seconds=600),
        {"time": T0 + 600, "event": "runner-stop", "reason": "nothing left"},
    ]
    tl = build_timeline(events, jobid="9")
    parts = {b.task: tl.parts(b) for b in tl.bars}
    assert parts == {"todo/a.sh": [(0.0, 0.5)], "todo/b.sh": [(0.5, 0.125), (0.75, 0.25)],
                     "todo/whole.sh": [(0.0, 1.0)]}
    assert tl.busy_seconds("n1") == pytest.approx(600 * 7 / 8)
    assert tl.busy_seconds("n2") == pytest.approx(600)
    assert tl.idle_seconds() == pytest.approx(600 / 8)
    # A log whose runner-start does not give the node's cores: the highest core held says.
    older = build_timeline([{k: v for k, v in e.items() if k != "cores_per_node"}
                            for e in events], jobid="9")
    assert older.cores_per_node == 8
    assert {b.task: older.parts(b) for b in older.bars} == parts


def _bar_spans(fig, y: float) -> list[tuple[float, float]]:
    """The vertical extents (data units) of the task bars drawn in the row at ``y``."""
    ax = fig.axes[0]
    spans = []
    for c in ax.collections:
        if c.get_zorder() != 2:
            continue
        for path in c.get_paths():
            lo, hi = path.vertices[:, 1].min(), path.vertices[:, 1].max()
            if y - 0.5 < lo < y + 0.5:
                spans.append((round(lo - y, 6), round(hi - y, 6)))
    return sorted(spans)


def test_shares_run_by_the_runner_are_drawn_as_shares(tmp_path: Path) -> None:
    """Two tasks of 2 CPUs each run at once on one node of 4 cores (each waits until both
    have started): the chart draws each on its half of the node's row, not both on all of
    it; a whole-node task fills its row."""
    q = tmp_path / "q"
    assert cli("init", str(q)).returncode == 0
    for name in ("a", "b"):
        other = "b" if name == "a" else "a"
        task = tmp_path / f"{name}.sh"
        task.write_text(f"#!/bin/sh\n#METAQ CPUS 2\n#METAQ MIN_WC_TIME 5:00\n"
                        f"touch {tmp_path}/{name}.on\n"
                        f"while [ ! -e {tmp_path}/{other}.on ]; do sleep 0.05; done\n")
        task.chmod(0o755)
        assert cli("submit", str(task), "--queue", str(q)).returncode == 0
    ran = cli("run", "--queue", str(q), "--batch", "local", "--nodes", "1",
              "--cores-per-node", "4", "--jobid", "S1")
    assert ran.returncode == 0, ran.stderr
    log = read_job_log(q / "jobs" / "S1" / "events.jsonl", jobid="S1")
    tl = build_timeline(log.events, jobid="S1")
    assert tl.cores_per_node == 4
    assert sorted(p for b in tl.bars for p in tl.parts(b)) == [(0.0, 0.5), (0.5, 0.5)]
    fig = gantt_figure(tl, full=True)
    [y] = [t.get_position()[1] for t in fig.axes[0].get_yticklabels()]
    half = 0.8 / 2
    assert _bar_spans(fig, y) == [(-half, 0.0), (0.0, half)]
    whole = build_timeline([runner_start(T0, ["n1"], end=None),
                            start(T0, "todo/w.sh", ["n1"]),
                            end(T0 + 60, "todo/w.sh", ["n1"], seconds=60)], jobid="W")
    wfig = gantt_figure(whole, full=True)
    [wy] = [t.get_position()[1] for t in wfig.axes[0].get_yticklabels()]
    assert _bar_spans(wfig, wy) == [(-half, half)]
