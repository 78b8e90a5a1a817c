"""Starting task processes through the launch agent (:mod:`metaq_py.runner.tasks.launching`):
no exit is heard before its start, a stop asked while a task is starting reaches its process,
every short task is still claimed, recorded and moved exactly once, and when the agent dies
its tasks are requeued and the runner starts the next ones itself."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

from metaq_py.launch import LaunchSpec, launch
from metaq_py.policy.model import Job, Kind
from metaq_py.queue.logbook import read_logbook
from metaq_py.queue.store import Queue
from metaq_py.runner.tasks.live_task import LiveTask, Why
from tests.launch.test_launch import alive
from tests.runner.test_faults import METAQ
from tests.runner_helpers import events, make_queue, of, runner, task, wait_until


def _run_counting_hand_overs(q: Queue) -> list[str]:
    """Run a runner over ``q``; the tasks whose starts the launch agent answered, in
    order."""
    r = runner(q)
    hand_on = r.launcher.on_started
    assert hand_on is not None  # the real launch goes through the agent
    handed: list[str] = []
    r.launcher.on_started = lambda done: (handed.append(done.live.id), hand_on(done))
    assert r.run() == 0
    assert r.launcher.handed_over == len(handed)
    return handed


def test_many_short_tasks_each_start_and_end_once_in_that_order(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    for i in range(120):
        task(q, f"t{i:03d}.sh", "exit 0" if i % 7 else "exit 4", RETRIES=0)
    handed = _run_counting_hand_overs(q)
    assert len(handed) == 120
    evs = events(q)
    starts = Counter(e["task"] for e in of(evs, "start"))
    ends = Counter(e["task"] for e in of(evs, "end"))
    assert len(starts) == 120 and set(starts.values()) == {1} and starts == ends
    order = {(e["event"], e.get("task")): n for n, e in enumerate(evs)}
    assert all(order[("start", t)] < order[("end", t)] for t in starts)
    assert all(isinstance(e["pid"], int) and e["pid"] > 1 for e in of(evs, "start"))
    finished = sorted(p.name for p in (q.root / "finished/todo").iterdir() if p.suffix == ".sh")
    failed = sorted(p.name for p in (q.root / "failed/todo").iterdir() if p.suffix == ".sh")
    assert len(finished) == 102 and len(failed) == 18
    assert not any((q.root / "todo").glob("*.sh"))
    failed_one = q.root / "failed/todo/t007.sh"
    book = read_logbook(failed_one, failed_one.stat().st_ino)
    assert book is not None and book.attempts == 1


def test_a_stop_asked_while_starting_reaches_the_process(tmp_path: Path) -> None:
    script = tmp_path / "wait.sh"
    trapped = tmp_path / "trapped"  # written once the trap is set
    script.write_text(f"#!/bin/sh\ntrap 'exit 7' TERM\ntouch {trapped}\nsleep 30 & wait\n")
    script.chmod(0o755)
    spec = LaunchSpec(script=script, task="todo/wait.sh", nodes=("n0",),
                      log=tmp_path / "wait.log", rundir=tmp_path / "run")
    job = Job("todo/wait.sh", Kind.RIGID, 1, 60.0, 0.0)
    live = LiveTask(claim=None, job=job,  # type: ignore[arg-type]  # no queue here
                    node_ids=(0,), hosts=("n0",), gpu_ids=None, attempt=1, resume=False,
                    grace=5.0, stop_signal=signal.SIGTERM, starting=True)
    live.stop(Why.CANCEL, now=time.time())  # no process yet: nothing can be signalled
    assert live.kill_at is not None and live.why is Why.CANCEL
    process = launch(spec)
    assert wait_until(trapped.exists, 20)
    live.launched(process, time.time())
    status = process.wait(10)
    assert status is not None and status.returncode == 7, status
    assert process.sent_signals == [signal.SIGTERM]


def test_when_the_agent_dies_its_tasks_are_requeued_and_the_runner_starts_them(
        tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    runs = tmp_path / "runs"
    for name in ("a.sh", "b.sh"):
        task(q, name, f"""
            echo "$METAQ_ATTEMPT $$" >> {runs}.{name}
            if [ ! -e {runs}.{name}.once ]; then touch {runs}.{name}.once; sleep 60; fi
        """)
    said: list[str] = []
    r = runner(q, nodes=2, say=said.append)
    killed: list[int] = []

    def kill_the_agent() -> None:
        both = [tmp_path / "runs.a.sh.once", tmp_path / "runs.b.sh.once"]
        assert wait_until(lambda: all(p.exists() for p in both), 20)
        agent = r.launcher.agent
        assert agent is not None
        killed.append(agent.pid)
        os.kill(agent.pid, signal.SIGKILL)

    killer = threading.Thread(target=kill_the_agent)
    killer.start()
    assert r.run() == 0
    killer.join()
    assert killed, "the agent was never seen"
    ends = of(events(q), "end")
    first = [e for e in ends if e["outcome"] == "requeued"]
    assert sorted(e["task"] for e in first) == ["todo/a.sh", "todo/b.sh"]
    assert all(e["signal"] == "SIGKILL" for e in first)
    assert sorted(e["task"] for e in ends if e["outcome"] == "finished") == \
        ["todo/a.sh", "todo/b.sh"]
    for name in ("a.sh", "b.sh"):
        lines = (tmp_path / f"runs.{name}").read_text().split()
        assert lines[0] == "1" and lines[2] == "2"  # the second run resumes
        first_pid = int(lines[1])
        assert not alive(first_pid), "the first run outlived its agent"
        path = q.root / "finished/todo" / name
        book = read_logbook(path, path.stat().st_ino)
        assert book is not None and book.attempts == 0
        assert any(f"its launch agent (pid {killed[0]}) ended (killed by SIGKILL)"
                   in (h.get("reason") or "") for h in book.history)
    assert "the launch agent ended (killed by SIGKILL); tasks start in the runner from now " \
           "on" in said
    assert r.launcher.handed_over == 2  # the second runs were started by the runner


def test_a_runner_killed_outright_takes_its_tasks_along(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    pid_file = tmp_path / "pid"
    task(q, "long.sh", f"echo $$ > {pid_file}.tmp && mv {pid_file}.tmp {pid_file}; sleep 300")
    proc = subprocess.Popen([*METAQ, "run", "--queue", str(q.root), "--nodes", "1"],
                            stderr=subprocess.DEVNULL)
    try:
        assert wait_until(pid_file.exists, 20)
        pid = int(pid_file.read_text())
        assert alive(pid)
    finally:
        proc.kill()
        proc.wait()
    # Its agent kills it: it does not run on unseen while the next runner reclaims its claim.
    assert wait_until(lambda: not alive(pid), 10), \
        "the task outlived its killed runner"
    assert [lease.id for lease in q.leases()] == ["todo/long.sh"]  # for the next runner
