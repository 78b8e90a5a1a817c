"""What wakes the runner (:mod:`metaq_py.runner.wakeups`): a runner kept busy by its tasks'
exits sets its queue watches aside, and still hears a task that arrives once it waits."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest

from metaq_py.runner import wakeups
from metaq_py.runner.wakeups import Wakeup, What
from tests.runner_helpers import SETTINGS, events, make_queue, of, runner, task, wait_until

QUIET = (SETTINGS.replace("poll_interval: 1s", "poll_interval: 30s")
         .replace("heartbeat: 1s", "heartbeat: 30s").replace("stale_after: 3s", "stale_after: 90s"))
"""No poll and no heartbeat in the test's few seconds: only the watches can wake the loop."""


def test_a_runner_busy_with_exits_rests_its_watches_and_still_hears_an_arrival(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # An exit counts as quick when it comes within QUICK of the wait before it: 50 ms, which a
    # loaded machine misses between two of these exits, and then the watches never rest. A
    # second keeps the flood of exits a flood on any machine (and a resting wait that long).
    monkeypatch.setattr(wakeups, "QUICK", 1.0)
    q = make_queue(tmp_path / "q", QUIET)
    for i in range(200):
        task(q, f"t{i:03d}.sh", "exit 0", MIN_WC_TIME="1s")
    # It lingers, with nothing running once the short tasks are done: nothing but its watches
    # can wake it until the test stops it (its end, 10 minutes away, is never reached).
    r = runner(q, walltime=600.0, linger=True)
    waits: list[float] = []
    real_wait = r.wakeups.wait

    def wait(timeout: float) -> Wakeup | None:
        waits.append(time.monotonic())  # the loop is about to wait
        return real_wait(timeout)

    r.wakeups.wait = wait  # type: ignore[method-assign]
    dropped: list[float] = []
    said: list[str] = []

    def waiting_again(since: int) -> bool:
        """The loop began a wait after ``since`` waits, and its watches are armed again."""
        watcher = r.wakeups.queue_watcher
        return len(waits) > since and watcher is not None and not watcher.resting

    def drop_late() -> None:
        try:
            done = q.root / "finished" / "todo"
            if not wait_until(lambda: len(list(done.glob("t*.sh"))) == 200, 300):
                said.append("the 200 short tasks did not finish")
                return
            # The loop waits, with nothing running, its watches set up again after their rest.
            since = len(waits)
            if not wait_until(lambda: waiting_again(since), 60):
                said.append("the loop never waited with its watches armed again")
                return
            dropped.append(time.monotonic())
            task(q, "late.sh", "exit 0", MIN_WC_TIME="1s")
            if not wait_until(lambda: (done / "late.sh").exists(), 60):
                said.append("late.sh never ran: the watches did not hear it")
            dropped.append(time.monotonic())
        finally:  # the end of the allocation, as the batch system's signal says it
            r.wakeups.inbox.put(Wakeup(What.SIGNAL, signum=signal.SIGTERM))

    dropper = threading.Thread(target=drop_late)
    dropper.start()
    assert r.run() == 0
    dropper.join()
    assert not said, said
    watcher = r.wakeups.queue_watcher
    # the short tasks' exits set the watches aside (only live watches can rest)
    assert watcher is not None and watcher.rests >= 1
    evs = events(q)
    assert len(of(evs, "start", task="todo/late.sh")) == 1
    # Only the watches could wake the loop for it: the queue's poll comes every 30 s. Seen in
    # under 10 s is the watches' doing, with room for a loaded machine.
    assert dropped[1] - dropped[0] < 10
    ends = of(evs, "end", outcome="finished")
    assert len(ends) == 201 and len({e["task"] for e in ends}) == 201  # each once
