"""Starting task processes off the loop's thread (:mod:`metaq_py.runner.tasks.launching`): no
exit is heard before its start, a stop asked while a task is starting reaches its process,
every short task is still claimed, recorded and moved exactly once, and a node with a free
CPU starts them on the loop's thread."""

from __future__ import annotations

import math
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from metaq_py.launch import LaunchSpec, launch
from metaq_py.policy.model import Job, Kind
from metaq_py.queue.logbook import read_logbook
from metaq_py.queue.store import Queue
from metaq_py.runner.tasks.live_task import LiveTask, Why
from metaq_py.runner.tasks.start_waits import CLIP, PROBES, StartWaits
from tests.runner_helpers import events, make_queue, of, runner, task


def _run_counting_hand_overs(q: Queue, busy_wait: float) -> list[str]:
    """Run a runner over ``q`` whose starts are handed over from ``busy_wait`` seconds of
    wait; the tasks whose starts were handed to the starter threads, in order."""
    r = runner(q)
    hand_on = r.launcher.on_started
    assert hand_on is not None  # the real launch may start off the loop's thread
    r.launcher.waits.busy_wait = busy_wait
    handed: list[str] = []
    r.launcher.on_started = lambda done: (handed.append(done.live.id), hand_on(done))
    assert r.run() == 0
    return handed


def test_many_short_tasks_each_start_and_end_once_in_that_order(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    for i in range(120):
        task(q, f"t{i:03d}.sh", "exit 0" if i % 7 else "exit 4", RETRIES=0)
    # as on a node whose CPUs are all busy: every start is handed over
    handed = _run_counting_hand_overs(q, busy_wait=0.0)
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
    script.write_text("#!/bin/sh\ntrap 'exit 7' TERM\nsleep 30 & wait\n")
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
    time.sleep(0.2)  # the trap is set
    live.launched(process, time.time())
    status = process.wait(10)
    assert status is not None and status.returncode == 7, status
    assert process.sent_signals == [signal.SIGTERM]


def test_a_node_with_a_free_cpu_starts_on_the_loop_thread(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    for i in range(10):
        task(q, f"t{i}.sh", "exit 0")
    handed = _run_counting_hand_overs(q, busy_wait=float("inf"))  # never busy enough
    assert handed == [] and len(of(events(q), "end", outcome="finished")) == 10


def test_starts_that_wait_go_to_the_starters_and_a_look_brings_them_back() -> None:
    """The rule of StartWaits, on waits given by hand: a running average of the loop's waits
    above ``busy_wait`` hands starts over; once a second, with none handed over, the next
    starts are a look made on the loop's thread, whose mean wait replaces the average."""
    waits = StartWaits(busy_wait=0.001)
    assert not waits.busy(0.0)  # nothing has waited yet
    for _ in range(40):
        waits.measured(0.005)  # each start waits 5 ms: a busy node
    assert waits.busy(0.1)  # busy from now on: the first look comes a second later
    assert waits.busy(0.5)
    waits.handed()
    waits.handed()
    assert waits.busy(1.5)  # no look while starts are with the starters
    waits.taken_back()
    waits.taken_back()
    assert waits.with_starters == 0 and waits.handed_over == 2
    assert not waits.busy(1.5)  # a look begins: the next starts are made on the loop
    for i in range(PROBES - 1):
        assert not waits.busy(1.5 + i / 100)
        waits.measured(0.0002)
    assert not waits.busy(1.6)  # still the look: its last start
    waits.measured(0.0002)
    assert waits.waited == pytest.approx(0.0002)  # the look's mean, not a blend
    assert not waits.busy(1.7)  # the wait is over: starts stay on the loop's thread
    for _ in range(40):
        waits.measured(0.005)
    assert waits.busy(5.0) and waits.busy(5.9)  # busy again: a look a second later
    assert not waits.busy(6.1)


def test_a_lone_long_wait_is_clipped_and_steady_ones_are_not_outweighed() -> None:
    waits = StartWaits(busy_wait=0.0025)
    for _ in range(20):
        waits.measured(0.0003)
    waits.measured(0.030)  # one whole time slice of another process
    assert waits.waited < waits.busy_wait and not waits.busy(0.0)
    assert waits.waited == pytest.approx(0.9 * 0.0003 + 0.1 * CLIP * 0.0025, rel=0.1)
    for _ in range(40):
        waits.measured(0.013)  # every start waits: both CPUs taken
    assert waits.busy(1.0)


def test_a_zero_threshold_hands_every_start_over_and_an_infinite_one_none() -> None:
    always, never = StartWaits(busy_wait=0.0), StartWaits(busy_wait=math.inf)
    for t in range(20):
        never.measured(1.0)  # a second's wait each: still never busy enough
        assert always.busy(float(t)) and not never.busy(float(t))


def test_a_runner_whose_starts_wait_hands_them_over(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    for i in range(30):
        task(q, f"t{i:02d}.sh", "exit 0")
    handed = _run_counting_hand_overs(q, busy_wait=1e-9)  # any wait at all is too long
    # the first start, on the loop's thread, waited; then the starters took over (a look, at
    # most one a second, makes a few more on the loop)
    assert "todo/t00.sh" not in handed and len(handed) >= 30 - 1 - 8
    assert len(of(events(q), "end", outcome="finished")) == 30
