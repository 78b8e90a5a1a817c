"""The campaign page's values, gathered from event logs written in the runner's vocabulary:
progress per project and array, retries, exit codes, notices held, preemptions, utilisation,
and the Gantt of a large allocation drawn within its bounds."""

from __future__ import annotations

import re
from pathlib import Path

from metaq_py.report.html.campaign import POINTS, gather
from metaq_py.report.html.campaign_page import MARKS, campaign_html
from metaq_py.report.joblog import read_job_logs
from tests.job_logs import end, runner_start, start, write_log

T = 1_700_000_000.0


def failed(t: float, task: str, hosts: list[str], *, seconds: float, code: int | None,
           outcome: str = "failed", signal: str | None = None, project: str = "p"):
    e = end(t, task, hosts, outcome=outcome, seconds=seconds, project=project)
    e["exit_code"], e["signal"] = code, signal
    return e


def campaign_logs(root: Path) -> None:
    hosts = ["n1", "n2"]
    write_log(root, "100", [
        runner_start(T, hosts, end=T + 3600, jobid="100"),
        start(T + 10, "todo/a.sh/0", ["n1"], project="lattice"),
        start(T + 10, "todo/a.sh/1", ["n2"], project="lattice"),
        end(T + 110, "todo/a.sh/0", ["n1"], seconds=100, project="lattice"),
        failed(T + 60, "todo/a.sh/1", ["n2"], seconds=50, code=3, outcome="retry",
               project="lattice"),
        start(T + 120, "todo/a.sh/1", ["n2"], project="lattice", attempt=2),
        end(T + 220, "todo/a.sh/1", ["n2"], seconds=100, project="lattice", attempt=2),
        {"time": T + 230, "event": "reserve", "notice": "beam", "hosts": ["n1", "n2"]},
        {"time": T + 300, "event": "arrival", "task": "todo/od.sh", "notice": "beam"},
        start(T + 300, "todo/od.sh", ["n1", "n2"], kind="ondemand", notice="beam",
              instant=True, project="hadron"),
        failed(T + 400, "todo/od.sh", ["n1", "n2"], seconds=100, code=None,
               signal="SIGKILL", project="hadron"),
        {"time": T + 500, "event": "runner-stop", "reason": "nothing left to run"},
    ])
    write_log(root, "101", [{"time": T, "event": "end", "task": "x", "outcome": "finished"}])


def test_values_come_from_the_event_logs(tmp_path: Path) -> None:
    campaign_logs(tmp_path)
    c = gather(read_job_logs(tmp_path))
    assert c.tasks() == {"todo/a.sh/0": "finished", "todo/a.sh/1": "finished",
                         "todo/od.sh": "failed", "x": "finished"}
    (array,) = c.progress("array")
    assert array.name == "todo/a.sh" and array.tasks == 2 and len(array.points) == POINTS + 1
    assert array.points[-1][1:] == (2, 0) and array.points[0][1:] == (0, 0)
    projects = {p.name: p.points[-1][1:] for p in c.progress("project")}
    assert projects == {"lattice": (2, 0), "hadron": (0, 1), "-": (1, 0)}
    (retried,) = c.retried()
    assert retried[0] == "todo/a.sh/1" and [r.outcome for r in retried[1]] == \
        ["retry", "finished"]
    assert c.exit_codes() == {"exit 3": 1, "SIGKILL": 1}
    assert [r.task for r in c.slowest()][:1] in (["todo/a.sh/0"], ["todo/a.sh/1"])
    (hold,) = c.notices
    assert (hold.notice, hold.hosts, hold.released, hold.reason) == ("beam", 2, T + 300,
                                                                     "redeemed")
    assert any("no runner-start event" in p and "101" in p for p in c.problems)
    busy = [v for _, v in c.utilisation() if v == v]
    assert busy and max(busy) <= 1.0 and min(busy) >= 0.0


def test_the_page_names_what_it_shows(tmp_path: Path) -> None:
    campaign_logs(tmp_path)
    text = campaign_html(gather(read_job_logs(tmp_path)), queue="q", generated=T + 600)
    for words in ("Job 100", "exit 3", "SIGKILL", "retry → finished", "beam", "redeemed",
                  "lattice", "hadron", "no runner-start event"):
        assert words in text, words
    assert "<script src" not in text and "<link" not in text


def test_a_large_allocation_is_drawn_within_its_bounds(tmp_path: Path) -> None:
    hosts = [f"n{i}" for i in range(60)]
    events = [runner_start(T, hosts, end=None, jobid="7")]
    at = dict.fromkeys(hosts, T)
    for k in range(6000):
        h = hosts[k % len(hosts)]
        task = f"todo/s.sh/{k}"
        events.append(start(at[h], task, [h]))
        events.append(end(at[h] + 10, task, [h], seconds=10) if k % 97 else
                      failed(at[h] + 10, task, [h], seconds=10, code=1))
        at[h] += 10.5
    events.sort(key=lambda e: e["time"])
    write_log(tmp_path, "7", events)
    text = campaign_html(gather(read_job_logs(tmp_path)), queue="q", generated=T)
    gantt = text[text.index('class="gantt"'):]
    gantt = gantt[:gantt.index("</svg>")]
    rects = re.findall(r"<rect [^>]*data-tip", gantt)
    assert len(rects) < MARKS  # 6,000 runs on 48 hosts drawn as merged spans
    assert re.search(r"\d+ tasks on n0", gantt)
    failures = re.findall(r'fill="#b5443c" data-tip="todo/s.sh/(\d+) on n\d+', gantt)
    assert failures and all(int(k) % 97 == 0 for k in failures)  # failed runs stay apart
    assert "12 more hosts not drawn" in text
    assert len(text.encode()) < 400_000
