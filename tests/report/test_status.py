"""``metaq status`` as a value (:mod:`metaq_py.report.status`): the counts by state, folder
and project, the running tasks, the notices; and ``status --json`` prints that value."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from typer.testing import CliRunner

from metaq_py.cli import app
from metaq_py.report.status import notice_state, read_status
from tests.runner_helpers import make_queue, runner, task, wait_until


def test_the_value_counts_by_state_folder_and_project_and_json_prints_it(
        tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    task(q, "a.sh", "true", PROJECT="lattice")
    task(q, "b.sh", "true", PROJECT="lattice")
    task(q, "c.sh", "true")
    task(q, "h.sh", "true", folder="hold")
    now = read_status(q, now=time.time())
    assert now.counts.states["pending"]["todo"] == 3
    assert now.counts.states["hold"]
    assert now.counts.projects["lattice"]["pending"] == 2
    assert now.running == () and now.allocations == () and now.notices == ()
    printed = CliRunner().invoke(app, ["status", "--json", "-q", str(q.root)])
    assert printed.exit_code == 0, printed.output
    assert json.loads(printed.output) == now.json()


def test_a_running_task_is_in_the_value_with_its_hosts_and_its_job(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    seen = tmp_path / "started"
    go = tmp_path / "go"
    task(q, "wait.sh", f"touch {seen}; while [ ! -e {go} ]; do sleep 0.05; done",
         PROJECT="lattice")
    r = runner(q, nodes=2)
    thread = threading.Thread(target=r.run)
    thread.start()
    try:
        assert wait_until(seen.exists, 20)
        assert wait_until(lambda: read_status(q, now=time.time()).running[0].hosts, 20)
        now = read_status(q, now=time.time())
        [running] = now.running
        assert (running.task, running.job, running.live) == ("todo/wait.sh", r.jobid, True)
        assert now.counts.states["working"]["todo"] == 1
        assert now.counts.projects["lattice"]["working"] == 1
        [alloc] = now.allocations
        assert (alloc.job, alloc.nodes, alloc.idle) == (r.jobid, 2, 1)
    finally:
        go.touch()
        thread.join(30)
    assert read_status(q, now=time.time()).running == ()


def test_a_notice_is_in_time_then_due_then_released() -> None:
    assert notice_state(100.0, 200.0, 40.0) == "in 00:01:00"
    assert notice_state(100.0, 200.0, 150.0) == "due"
    assert notice_state(100.0, 200.0, 250.0) == "released"
    assert notice_state(100.0, 200.0, 40.0, released=True) == "released"
