"""Starting task processes (:mod:`metaq_py.runner.tasks.launching`): no exit is heard before
its start, a stop asked before a task's launch reaches its process, and every short task is
claimed, recorded and moved exactly once."""

from __future__ import annotations

import signal
import time
from collections import Counter
from pathlib import Path

from metaq_py.launch import LaunchSpec, launch
from metaq_py.policy.model import Job, Kind
from metaq_py.queue.logbook import find_logbook
from metaq_py.runner.tasks.live_task import LiveTask, Why
from tests.runner_helpers import events, make_queue, of, runner, task, wait_until


def test_many_short_tasks_each_start_and_end_once_in_that_order(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    for i in range(120):
        task(q, f"t{i:03d}.sh", "exit 0" if i % 7 else "exit 4", RETRIES=0)
    assert runner(q).run() == 0
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
    book = find_logbook(failed_one, failed_one.stat().st_ino, q.packed)
    assert book is not None and book.attempts == 1


def test_a_stop_asked_before_the_launch_reaches_the_process(tmp_path: Path) -> None:
    script = tmp_path / "wait.sh"
    trapped = tmp_path / "trapped"  # written once the trap is set
    script.write_text(f"#!/bin/sh\ntrap 'exit 7' TERM\ntouch {trapped}\nsleep 30 & wait\n")
    script.chmod(0o755)
    spec = LaunchSpec(script=script, task="todo/wait.sh", nodes=("n0",),
                      log=tmp_path / "wait.log", rundir=tmp_path / "run")
    job = Job("todo/wait.sh", Kind.RIGID, 1, 60.0, 0.0)
    live = LiveTask(claim=None, job=job,  # type: ignore[arg-type]  # no queue here
                    node_ids=(0,), hosts=("n0",), gpu_ids=None, attempt=1, resume=False,
                    grace=5.0, stop_signal=signal.SIGTERM)
    live.stop(Why.CANCEL, now=time.time())  # no process yet: nothing can be signalled
    assert live.kill_at is not None and live.why is Why.CANCEL
    process = launch(spec)
    assert wait_until(trapped.exists, 20)
    live.launched(process, time.time())
    status = process.wait(10)
    assert status is not None and status.returncode == 7, status
    assert process.sent_signals == [signal.SIGTERM]
