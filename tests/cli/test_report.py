"""``metaq notice``, ``report``, ``explain``, ``gantt`` and the live part of ``status``, run as
real ``metaq`` processes on a queue with real leases and event logs."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from metaq_py.queue.store import Queue
from tests.job_logs import add_task, claim, end, metaq, new_queue, runner_start, start, write_log


@pytest.fixture
def q(tmp_path: Path) -> Queue:
    return new_queue(tmp_path / "queue")


def _fails(result, *words: str) -> None:
    """The command failed with exit 1 and one line on stderr containing ``words``."""
    assert result.returncode == 1, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("metaq: "), result.stderr
    for w in words:
        assert w in lines[0], lines[0]


def test_notice_write_list_duplicate_and_cancel(q: Queue) -> None:
    made = metaq("notice", "--nodes", "2", "--at", "+20m", "--walltime", "1h", "--name", "beam",
                 "-q", str(q.root))
    assert made.returncode == 0, made.stderr
    assert "notice beam: 2 nodes" in made.stdout and "#METAQ NOTICE beam" in made.stdout
    assert "could not be checked" in made.stderr  # no runner, no caps.nodes
    data = json.loads((q.root / "notices" / "beam.json").read_text())
    assert data["nodes"] == 2 and data["walltime"] == 3600
    assert 1190 < data["arrival"] - time.time() <= 1200

    listed = json.loads(metaq("notice", "--list", "--json", "-q", str(q.root)).stdout)
    assert [n["name"] for n in listed["notices"]] == ["beam"] and listed["problems"] == []

    _fails(metaq("notice", "--nodes", "1", "--at", "+5m", "--walltime", "5m", "--name", "beam",
                 "-q", str(q.root)), "already exists", "--cancel beam")
    assert json.loads((q.root / "notices" / "beam.json").read_text()) == data

    gone = metaq("notice", "--cancel", "beam", "-q", str(q.root))
    assert gone.returncode == 0 and "withdrawn" in gone.stdout
    assert (q.root / "notices" / "cancelled" / "beam.json").exists()
    _fails(metaq("notice", "--cancel", "beam", "-q", str(q.root)), "no live notice named")


@pytest.mark.parametrize(("args", "words"), [
    (["--nodes", "1", "--at", "2001-01-01T00:00", "--walltime", "1h"], ("already past",)),
    (["--nodes", "1", "--at", "soon", "--walltime", "1h"], ("--at:", "'soon' is not a time")),
    (["--nodes", "1", "--at", "+5m", "--walltime", "forever"], ("--walltime:",)),
    (["--nodes", "1", "--at", "+5m"], ("needs --walltime",)),
    (["--nodes", "0", "--at", "+5m", "--walltime", "1h"], ("at least 1 node",)),
    (["--nodes", "1", "--at", "+5m", "--walltime", "1h", "--name", "a b"],
     ("cannot name a notice",)),
    (["--list", "--cancel", "x"], ("give either",)),
    ([], ("give either",)),
])
def test_notice_bad_input(q: Queue, args: list[str], words: tuple[str, ...]) -> None:
    _fails(metaq("notice", *args, "-q", str(q.root)), *words)
    assert list((q.root / "notices").iterdir()) == []


def test_notice_larger_than_caps_or_the_largest_live_allocation(tmp_path: Path) -> None:
    capped = new_queue(tmp_path / "capped", "caps:\n  nodes: 4\n")
    _fails(metaq("notice", "--nodes", "5", "--at", "+5m", "--walltime", "1h",
                 "-q", str(capped.root)), "5 nodes can never be served", "caps.nodes")
    live = new_queue(tmp_path / "live")
    now = time.time()
    write_log(live.root, "11", [runner_start(now - 5, ["a", "b", "c"], end=now + 3600)])
    _fails(metaq("notice", "--nodes", "4", "--at", "+5m", "--walltime", "1h",
                 "-q", str(live.root)), "largest live allocation (job 11) has only 3")
    ok = metaq("notice", "--nodes", "3", "--at", "+5m", "--walltime", "1h", "-q", str(live.root))
    assert ok.returncode == 0 and ok.stderr == ""


def _history(q: Queue) -> None:
    t0 = time.time() - 86400
    write_log(q.root, "100", [
        runner_start(t0, ["a", "b"], end=t0 + 7200, gpus_per_node=1),
        start(t0 + 1, "todo/x.sh", ["a", "b"], project="lattice", gpus=2),
        end(t0 + 3601, "todo/x.sh", ["a", "b"], seconds=3600, project="lattice", gpus=2),
        start(t0 + 3700, "todo/od.sh", ["a"], kind="ondemand", instant=True),
        {"time": t0 + 3700, "event": "preempt", "task": "todo/y.sh", "for_task": "todo/od.sh",
         "lost_node_seconds": 1800},
        {"time": t0 + 3800, "event": "runner-stop", "reason": "done"},
    ], tail=b'{"time": 1, "event": "en')


def test_report_json_text_and_since(q: Queue) -> None:
    _history(q)
    got = metaq("report", "--json", "-q", str(q.root))
    assert got.returncode == 0, got.stderr
    rep = json.loads(got.stdout)
    assert rep["projects"] == [{"project": "lattice", "node_hours": 2.0, "gpu_hours": 2.0,
                                "runs": 1, "outcomes": {"finished": 1},
                                "cpu_hours": 0.0, "core_hours": 0.0, "measured_runs": 0,
                                "cpu_efficiency": None}]
    assert rep["ondemand"]["instant_rate"] == 1.0 and rep["ondemand"]["preemptions"] == 1
    assert rep["ondemand"]["lost_node_hours"] == 0.5
    assert "line 7: the last line is cut short" in got.stderr  # reported, not fatal
    text = metaq("report", "-q", str(q.root))
    assert "lattice" in text.stdout and "2.00" in text.stdout
    assert "instant-start rate      100% (1 of 1)" in text.stdout
    later = json.loads(metaq("report", "--since", "1h", "--json", "-q", str(q.root)).stdout)
    assert later["projects"] == [] and later["jobs"] == 0
    _fails(metaq("report", "--since", "last week", "-q", str(q.root)), "--since:")


def test_explain_prints_the_reasons(q: Queue) -> None:
    add_task(q, "big.sh", "#METAQ NODES 9\n")
    now = time.time()
    write_log(q.root, "3", [runner_start(now - 5, ["a", "b"], end=now + 3600)])
    got = metaq("explain", "todo/big.sh", "-q", str(q.root))
    assert got.returncode == 0, got.stderr
    assert got.stdout.startswith("todo/big.sh: pending\n")
    assert "too big for every live allocation (nodes or GPUs): job 3" in got.stdout
    as_json = json.loads(metaq("explain", "todo/big.sh", "--json", "-q", str(q.root)).stdout)
    assert as_json["state"] == "pending" and len(as_json["reasons"]) == 2
    _fails(metaq("explain", "todo/none.sh", "-q", str(q.root)), "no task todo/none.sh")


def test_gantt_writes_a_png_and_refuses_bad_input(q: Queue, tmp_path: Path) -> None:
    _history(q)
    out = tmp_path / "job100.png"
    got = metaq("gantt", "100", "--out", str(out), "-q", str(q.root))
    assert got.returncode == 0, got.stderr
    assert "2 hosts, 2 tasks" in got.stdout and "cut short" in got.stderr
    assert out.read_bytes()[:4] == b"\x89PNG"
    _fails(metaq("gantt", "999", "--out", str(out), "-q", str(q.root)), "job 999 has no event")
    _fails(metaq("gantt", "100", "--out", str(tmp_path / "g.pdf"), "-q", str(q.root)),
           "must end in .png")
    write_log(q.root, "5", [{"time": 1, "event": "start", "task": "x"}])
    _fails(metaq("gantt", "5", "--out", str(out), "-q", str(q.root)), "no runner-start")


def test_status_shows_running_tasks_reservations_lent_nodes_and_notices(q: Queue) -> None:
    add_task(q, "r.sh", "#METAQ MIN_WC_TIME 1h\n")
    add_task(q, "m.sh", "#METAQ TYPE malleable\n#METAQ NODES 2\n")
    r = claim(q, "todo/r.sh", jobid="7")
    m = claim(q, "todo/m.sh", jobid="7")
    now = time.time()
    write_log(q.root, "7", [
        runner_start(now - 600, ["a", "b", "c", "d", "e"], end=now + 1800),
        start(now - 300, r.id, ["a"]),
        start(now - 300, m.id, ["b", "c"], kind="malleable"),
        {"time": now - 100, "event": "reserve", "notice": "beam", "hosts": ["d"]},
        {"time": now - 50, "event": "shrink", "task": m.id, "hosts": ["b"],
         "for_task": "todo/od.sh", "mode": "in-place"},
    ])
    metaq("notice", "--nodes", "2", "--at", "+1h", "--walltime", "10m", "--name", "beam",
          "-q", str(q.root))
    got = metaq("status", "--json", "-q", str(q.root))
    assert got.returncode == 0, got.stderr
    st = json.loads(got.stdout)
    running = {x["task"]: x for x in st["running"]}
    assert running["todo/r.sh"]["hosts"] == ["a"] and running["todo/m.sh"]["hosts"] == ["b"]
    # r.sh needs an hour but the allocation ends in 30 minutes: that is its time left
    assert 1790 < running["todo/r.sh"]["time_left"] <= 1800
    (alloc,) = st["allocations"]
    assert alloc["reserved"] == {"beam": ["d"]} and alloc["idle"] == 2  # c (lent) and e
    assert alloc["lent"] == [{"task": "todo/m.sh", "to": "todo/od.sh", "hosts": ["c"]}]
    assert [n["name"] for n in st["notices"]] == ["beam"]
    assert st["totals"]["working"] == 2
    text = metaq("status", "-q", str(q.root)).stdout
    assert "beam: d" in text and "todo/m.sh -> todo/od.sh: c" in text and "in 1:00:00" not in \
        text
