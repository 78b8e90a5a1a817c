"""Wake-up latency of :class:`~metaq_py.queue.watcher.QueueWatcher` with file-system events: a task
arriving right after another one was claimed (renamed out of the watched folder) must wake the
runner at once, not after watchdog's half-second hold of unpaired renames."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from metaq_py.queue.watcher import QueueWatcher


def test_an_arrival_right_after_a_claim_wakes_at_once(tmp_path: Path) -> None:
    todo, working = tmp_path / "todo", tmp_path / "working"
    todo.mkdir()
    working.mkdir()
    (todo / "claimed.sh").write_text("#!/bin/sh\n")
    # Polling alone would take 30 s: only a file-system event can wake it in time.
    with QueueWatcher([todo], interval=30) as w:
        if not w.live:
            pytest.skip("watchdog is not available here")
        took = []
        for i in range(3):
            (todo / f"claimed{i}.sh").write_text("#!/bin/sh\n")
            assert w.wait(timeout=5)
            t0 = time.monotonic()
            (todo / f"claimed{i}.sh").rename(working / f"claimed{i}.sh")  # a claim
            (todo / f"new{i}.sh").write_text("#!/bin/sh\n")  # an arrival just after it
            assert w.wait(timeout=5)
            took.append(time.monotonic() - t0)
            while w.wait(timeout=0.3):  # let the rest of this round's events go by
                pass
        assert max(took) < 0.25, took
