"""What wakes the runner (:mod:`metaq_py.runner.wakeups`): a runner kept busy by its tasks'
exits sets its queue watches aside, and still hears a task that arrives once it waits."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from metaq_py.runner.wakeups import QUICK
from tests.runner_helpers import SETTINGS, events, make_queue, of, runner, task

QUIET = (SETTINGS.replace("poll_interval: 1s", "poll_interval: 30s")
         .replace("heartbeat: 1s", "heartbeat: 30s").replace("stale_after: 3s", "stale_after: 90s"))
"""No poll and no heartbeat in the test's few seconds: only the watches can wake the loop."""


def test_a_runner_busy_with_exits_rests_its_watches_and_still_hears_an_arrival(
        tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q", QUIET)
    for i in range(200):
        task(q, f"t{i:03d}.sh", "exit 0", MIN_WC_TIME="1s")
    # It lingers, with nothing running once the short tasks are done, until its end (the
    # allocation's 5 s less the grace and the margin): nothing else would wake it.
    r = runner(q, walltime=5.0, linger=True)
    dropped: list[float] = []

    def drop_late() -> None:
        done = q.root / "finished" / "todo"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(list(done.glob("t*.sh"))) < 200:
            time.sleep(0.02)
        time.sleep(0.5)  # the loop now waits, with nothing running
        dropped.append(time.time())
        task(q, "late.sh", "exit 0", MIN_WC_TIME="1s")

    dropper = threading.Thread(target=drop_late)
    dropper.start()
    assert r.run() == 0
    dropper.join()
    watcher = r.wakeups.queue_watcher
    # the short tasks' exits set the watches aside (only live watches can rest)
    assert watcher is not None and watcher.rests >= 1
    evs = events(q)
    late = of(evs, "start", task="todo/late.sh")
    assert len(late) == 1, "the watches were not set up again after their rest"
    assert late[0]["time"] - dropped[0] < 20 * QUICK  # at once, not at the runner's end
    ends = of(evs, "end", outcome="finished")
    assert len(ends) == 201 and len({e["task"] for e in ends}) == 201  # each once
