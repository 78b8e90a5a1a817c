"""Accounting from event logs: per-project node- and GPU-hours, outcomes, the on-demand record,
``--since``, and logs damaged by a killed runner (read by :mod:`metaq_py.report.joblog`)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from datetime import time as dt_time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from metaq_py.durations import DurationError
from metaq_py.report.accounting import build_report, parse_since
from metaq_py.report.joblog import read_job_log, read_job_logs
from tests.job_logs import end, runner_start, start, write_log

T0 = 1_750_000_000.0


def _two_jobs(root: Path) -> None:
    write_log(root, "100", [
        runner_start(T0, ["a", "b", "c", "d"], end=T0 + 7200, gpus_per_node=2),
        start(T0 + 1, "todo/x.sh", ["a", "b"], project="lattice", gpus=4),
        start(T0 + 2, "todo/y.sh", ["c"], project="astro"),
        end(T0 + 3601, "todo/x.sh", ["a", "b"], seconds=3600, project="lattice", gpus=4),
        end(T0 + 1802, "todo/y.sh", ["c"], seconds=1800, project="astro", outcome="retry"),
        start(T0 + 1900, "todo/od.sh", ["c", "d"], kind="ondemand", instant=True),
        {"time": T0 + 1899, "event": "arrival", "task": "todo/od.sh", "notice": "n1"},
        {"time": T0 + 1900, "event": "preempt", "task": "todo/z.sh", "for_task": "todo/od.sh",
         "lost_node_seconds": 7200.0},
        end(T0 + 1900, "todo/z.sh", ["d"], seconds=900, outcome="preempted"),
        end(T0 + 2500, "todo/od.sh", ["c", "d"], seconds=600, kind="ondemand"),
        {"time": T0 + 2600, "event": "runner-stop", "reason": "nothing left"},
    ])
    write_log(root, "200", [
        runner_start(T0 + 10_000, ["e", "f"], end=None),
        start(T0 + 10_001, "todo/od2.sh", ["e"], kind="ondemand", instant=False),
        {"time": T0 + 10_002, "event": "shrink", "task": "todo/m.sh", "hosts": ["f"],
         "for_task": "todo/od2.sh", "mode": "in-place"},
        end(T0 + 10_601, "todo/od2.sh", ["e"], seconds=600, kind="ondemand",
            outcome="failed", project="lattice"),
        end(T0 + 10_700, "todo/q.sh", ["f"], seconds=100, outcome="requeued",
            project="astro"),
        {"time": T0 + 10_800, "event": "reclaim", "task": "todo/r.sh", "jobid": "99",
         "reason": "job 99 is dead"},
    ])


def test_node_and_gpu_hours_per_project(tmp_path: Path) -> None:
    _two_jobs(tmp_path)
    rep = build_report(read_job_logs(tmp_path))
    by = {p.name: p for p in rep.projects}
    assert sorted(by) == ["-", "astro", "lattice"]
    assert by["lattice"].node_hours == pytest.approx(2.0 + 600 / 3600)
    assert by["lattice"].gpu_hours == pytest.approx(4.0)
    assert by["astro"].node_hours == pytest.approx(0.5 + 100 / 3600)
    assert by["-"].node_hours == pytest.approx((900 + 1200) / 3600)
    assert rep.node_hours == pytest.approx(sum(p.node_hours for p in rep.projects))
    assert rep.jobs == 2


def test_outcomes_are_counted_per_run(tmp_path: Path) -> None:
    _two_jobs(tmp_path)
    rep = build_report(read_job_logs(tmp_path))
    assert rep.outcomes == {"finished": 2, "failed": 1, "retry": 1, "requeued": 1,
                            "preempted": 1}
    assert {p.name: p.outcomes for p in rep.projects}["lattice"] == {"finished": 1,
                                                                        "failed": 1}
    assert rep.reclaims == 1


def test_the_on_demand_record(tmp_path: Path) -> None:
    _two_jobs(tmp_path)
    od = build_report(read_job_logs(tmp_path)).ondemand
    assert (od.starts, od.known, od.instant, od.rate) == (2, 2, 1, 0.5)
    assert (od.arrivals, od.preemptions, od.shrinks) == (1, 1, 1)
    assert od.lost_node_hours == pytest.approx(2.0)


def test_since_keeps_only_later_events(tmp_path: Path) -> None:
    _two_jobs(tmp_path)
    rep = build_report(read_job_logs(tmp_path), since=T0 + 5000)
    assert rep.jobs == 1
    assert rep.outcomes == {"failed": 1, "requeued": 1}
    assert rep.ondemand.preemptions == 0 and rep.ondemand.shrinks == 1


def test_an_empty_queue_reports_nothing(tmp_path: Path) -> None:
    rep = build_report(read_job_logs(tmp_path))
    assert rep.projects == () and rep.jobs == 0 and rep.ondemand.rate is None
    assert rep.to_json()["node_hours"] == 0


def test_a_line_cut_short_is_skipped_and_reported(tmp_path: Path) -> None:
    path = write_log(tmp_path, "7", [
        runner_start(T0, ["a"], end=None),
        end(T0 + 3600, "todo/x.sh", ["a"], seconds=3600, project="p"),
    ], tail=b'{"time": 1750003700, "event": "end", "task": "todo/y.sh", "node_sec')
    log = read_job_log(path)
    assert log.jobid == "7" and len(log.events) == 2
    assert log.problems == (f"{path}, line 3: the last line is cut short (the runner was "
                            f"probably stopped while writing it); it is skipped.",)
    rep = build_report([log])
    assert rep.projects[0].node_hours == pytest.approx(1.0)
    assert rep.problems == log.problems


def test_bad_lines_in_the_middle_are_named_by_line(tmp_path: Path) -> None:
    path = tmp_path / "jobs" / "8" / "events.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"time": 1, "event": "runner-start"}\n[1]\nnot json\n'
                     b'{"event": "end"}\n{"time": "x", "event": "end"}\n{"time": 2}\n'
                     b'{"time": 3, "event": "runner-stop"}\n')
    log = read_job_log(path)
    assert [e["event"] for e in log.events] == ["runner-start", "runner-stop"]
    assert [p.split(": ", 1)[0] for p in log.problems] == [
        f"{path}, line {n}" for n in (2, 3, 4, 5, 6)]
    assert "not a JSON object" in log.problems[0]
    assert "no numeric 'time'" in log.problems[2]
    assert "no 'event' name" in log.problems[4]


@given(cut=st.integers(0, 2500))
def test_a_log_cut_anywhere_never_breaks_the_reader(tmp_path_factory: pytest.TempPathFactory,
                                                    cut: int) -> None:
    root = tmp_path_factory.mktemp("cut")
    _two_jobs(root)
    path = root / "jobs" / "100" / "events.jsonl"
    data = path.read_bytes()
    path.write_bytes(data[:cut])
    log = read_job_log(path)
    kept = data[:cut]
    tail = kept.rsplit(b"\n", 1)[-1]
    try:
        tail_whole = bool(tail) and isinstance(json.loads(tail), dict)
    except ValueError:
        tail_whole = False
    assert len(log.events) == kept.count(b"\n") + tail_whole
    assert len(log.problems) == (1 if tail.strip() and not tail_whole else 0)
    build_report([log])  # never raises


@given(days=st.integers(0, 3650))
def test_since_as_a_duration_ago(days: int) -> None:
    assert parse_since(f"{days}d", now=T0) == T0 - days * 86400


@given(y=st.integers(2000, 2100), m=st.integers(1, 12), d=st.integers(1, 28))
def test_since_as_a_date_is_local_midnight(y: int, m: int, d: int) -> None:
    assert parse_since(f"{y:04d}-{m:02d}-{d:02d}", now=T0) == datetime(y, m, d).timestamp()


@pytest.mark.parametrize("text", ["tomorrow", "2025-02-30", "2025-13-01", "-3d", ""])
def test_bad_since_is_one_sentence(text: str) -> None:
    with pytest.raises(DurationError, match="is not a date; use YYYY-MM-DD, YYYY-MM-DDTHH:MM, "
                                            "today, yesterday or a duration ago"):
        parse_since(text, now=T0)


@pytest.fixture(params=["UTC", "Europe/Berlin", "America/Sao_Paulo", "Pacific/Chatham"])
def zone(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Local time in ``request.param`` (with its summer time changes) for one test."""
    monkeypatch.setenv("TZ", request.param)
    time.tzset()
    yield request.param
    monkeypatch.undo()
    time.tzset()


# Around Berlin's spring change (2025-03-30, a day of 23 hours) and autumn one (25 hours).
_NOWS = st.one_of(st.floats(1_743_200_000.0, 1_743_500_000.0),
                  st.floats(1_761_400_000.0, 1_761_700_000.0), st.floats(0.0, 4e9))


@given(now=_NOWS)
@example(now=499_748_400.0)  # 1985-11-02, a day Sao Paulo began at 01:00
@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_today_and_yesterday_are_local_midnights(zone: str, now: float) -> None:
    """Each is its day's first second: its local midnight, or where summer time skips
    midnight (Sao Paulo until 2019), the moment after the skip, 01:00."""
    today, yesterday = parse_since("today", now=now), parse_since("Yesterday", now=now)
    moments = [datetime.fromtimestamp(t) for t in (today, yesterday)]
    assert all(m.time() in (dt_time(0, 0), dt_time(1, 0)) for m in moments)
    assert all(datetime.fromtimestamp(t - 1).date() == m.date() - timedelta(days=1)
               for t, m in zip((today, yesterday), moments, strict=True))  # the first second
    assert moments[0].date() == datetime.fromtimestamp(now).date()
    assert moments[0].date() - moments[1].date() == timedelta(days=1)
    assert yesterday < today <= now


def test_use_is_counted_per_user_as_well_as_per_project(tmp_path: Path) -> None:
    write_log(tmp_path, "400", [
        runner_start(T0, ["a", "b"], end=None),
        end(T0 + 3600, "todo/p.sh", ["a", "b"], seconds=3600, project="lat", user="ana"),
        end(T0 + 1800, "todo/q.sh", ["a"], seconds=1800, project="lat", user="bo",
            outcome="failed"),
        end(T0 + 900, "todo/r.sh", ["b"], seconds=900, project="astro", user="ana", gpus=2),
        end(T0 + 600, "todo/old.sh", ["b"], seconds=600, project="astro"),  # an older runner's
    ])
    rep = build_report(read_job_logs(tmp_path))
    by = {u.name: u for u in rep.users}
    assert sorted(by) == ["-", "ana", "bo"]
    assert by["ana"].node_hours == pytest.approx(2.25) and by["ana"].gpu_hours == 0.5
    assert (by["ana"].runs, by["bo"].outcomes, by["-"].runs) == (2, {"failed": 1}, 1)
    assert sum(u.node_hours for u in rep.users) == pytest.approx(rep.node_hours)
    doc = rep.to_json()
    assert [u["user"] for u in doc["users"]] == ["-", "ana", "bo"]
    assert doc["users"][2]["outcomes"] == {"failed": 1}


# --- CPU efficiency, as seff prints it ------------------------------------------------------

def _measured(e: dict, user: float, system: float, cores: float) -> dict:
    return {**e, "cpu_user_seconds": user, "cpu_system_seconds": system,
            "max_rss_bytes": 1 << 20, "usage_from": "wait4", "core_seconds": cores}


def test_cpu_efficiency_is_cpu_time_over_cores_times_wall_time(tmp_path: Path) -> None:
    write_log(tmp_path, "300", [
        runner_start(T0, ["a", "b"], end=None),
        _measured(end(T0 + 100, "todo/a.sh", ["a"], seconds=100, project="lat"),
                  user=300.0, system=20.0, cores=800.0),
        _measured(end(T0 + 200, "todo/b.sh", ["b"], seconds=200, project="lat"),
                  user=90.0, system=10.0, cores=400.0),
        end(T0 + 300, "todo/c.sh", ["a"], seconds=100, project="lat"),  # usage not known
        _measured(end(T0 + 400, "todo/d.sh", ["b"], seconds=10, project="ana"),
                  user=0.0, system=0.0, cores=0.0),  # held no cores: left out
    ])
    by = {p.name: p for p in build_report(read_job_logs(tmp_path)).projects}
    lat = by["lat"]
    assert (lat.runs, lat.measured) == (3, 2)
    assert lat.cpu_hours == pytest.approx(420 / 3600)
    assert lat.core_hours == pytest.approx(1200 / 3600)
    assert lat.cpu_efficiency == pytest.approx(0.35)
    assert by["ana"].cpu_efficiency is None and by["ana"].measured == 0
    doc = build_report(read_job_logs(tmp_path)).to_json()
    row = next(p for p in doc["projects"] if p["project"] == "lat")
    assert row["cpu_efficiency"] == pytest.approx(0.35) and row["measured_runs"] == 2


@given(st.lists(st.tuples(st.floats(0, 1e5), st.floats(0, 1e5), st.floats(1, 1e6)),
                max_size=8))
def test_efficiency_is_the_ratio_of_the_sums(tmp_path_factory: pytest.TempPathFactory,
                                             runs: list[tuple[float, float, float]]) -> None:
    root = tmp_path_factory.mktemp("eff")
    write_log(root, "1", [runner_start(T0, ["a"], end=None)] + [
        _measured(end(T0 + i, f"todo/{i}.sh", ["a"], seconds=1, project="p"),
                  user=u, system=s, cores=c) for i, (u, s, c) in enumerate(runs)])
    rep = build_report(read_job_logs(root))
    if not runs:
        assert rep.projects == ()
        return
    p, = rep.projects
    assert p.cpu_efficiency == pytest.approx(sum(u + s for u, s, _ in runs)
                                             / sum(c for *_, c in runs))


# A real run: one task burns CPU on one core, one sleeps; usage reaches the end events, the
# logbooks, `metaq show` and `metaq report`.
BURN = """#!/bin/sh
#METAQ CPUS 1
#METAQ PROJECT {project}
#METAQ MIN_WC_TIME 1:00
{python} -c '
import time
end = time.process_time() + {burn}
while time.process_time() < end:
    pass
time.sleep({sleep})
'
"""


def test_a_real_runs_usage_reaches_events_logbook_show_and_report(tmp_path: Path) -> None:
    import sys

    from tests.cli.test_queue import metaq

    q = tmp_path / "q"
    assert metaq("init", str(q)).returncode == 0
    for name, project, burn, sleep in (("busy", "lattice", 0.8, 0.0),
                                       ("idle", "analysis", 0.0, 0.8)):
        script = tmp_path / f"{name}.sh"
        script.write_text(BURN.format(project=project, python=sys.executable, burn=burn,
                                      sleep=sleep))
        script.chmod(0o755)
        assert metaq("submit", str(script), "--queue", str(q)).returncode == 0
    ran = metaq("run", "--queue", str(q), "--batch", "local", "--nodes", "1",
                "--cores-per-node", "2", "--launch-pause", "0")
    assert ran.returncode == 0, ran.stderr
    ends = {Path(e["task"]).stem: e for log in (q / "jobs").rglob("events.jsonl")
            for e in map(json.loads, log.read_text().splitlines()) if e["event"] == "end"}
    busy, idle = ends["busy"], ends["idle"]
    assert busy["usage_from"] == "wait4" and busy["max_rss_bytes"] > 1 << 20
    assert busy["cpu_user_seconds"] + busy["cpu_system_seconds"] >= 0.7
    assert idle["cpu_user_seconds"] + idle["cpu_system_seconds"] < 0.5
    assert busy["core_seconds"] == pytest.approx(busy["seconds"])  # one core held
    shown = metaq("show", "busy.sh", "--queue", str(q))
    assert shown.returncode == 0, shown.stderr
    assert "; used CPU" in shown.stdout and "peak memory" in shown.stdout, shown.stdout
    as_json = json.loads(metaq("show", "busy.sh", "--queue", str(q), "--json").stdout)
    assert as_json["history"][-1]["cpu_user_seconds"] == busy["cpu_user_seconds"]
    report = json.loads(metaq("report", "--queue", str(q), "--json").stdout)
    eff = {p["project"]: p["cpu_efficiency"] for p in report["projects"]}
    cpu = busy["cpu_user_seconds"] + busy["cpu_system_seconds"]
    assert eff["lattice"] == pytest.approx(cpu / busy["core_seconds"])
    # a loaded machine stretches the wall time; the busy task still uses its core far more
    assert eff["lattice"] > 3 * eff["analysis"], eff
    table = metaq("report", "--queue", str(q)).stdout
    assert "CPU efficiency" in table and "%" in table
