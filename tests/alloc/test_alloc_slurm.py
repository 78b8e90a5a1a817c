"""``metaq alloc --watch`` against the real local SLURM (tests/slurm/start.sh): a queue of tasks
brings up allocations by itself, running share/jobscripts/slurm.sh; they drain it; alloc then stops
submitting. Skips, with the reason, when the cluster is not up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from metaq_py.alloc.journal import Journal
from metaq_py.batch.submit import alloc_name
from metaq_py.queue.store import Queue
from tests.conftest import REPO, SlurmCluster

pytestmark = pytest.mark.slurm

TASK = """#!/bin/bash
#METAQ NODES {nodes}
#METAQ MIN_WC_TIME 30s
echo "$SLURM_JOB_ID" >> "{marks}/{name}"
sleep 2
"""

# min_walltime 5m: share/jobscripts/slurm.sh asks for SIGUSR1 120 s before the end, so a shorter
# allocation would be told to stop as soon as it starts.
SETTINGS = """\
alloc:
  system: slurm
  max_nodes: 2
  min_walltime: 5m
  margin: 1m
  max_allocations: 1
"""


def wait_for(what: str, check: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.5)
    raise AssertionError(f"{what} did not happen within {timeout:g} s")


def wait_passes(root: Path, n: int) -> None:
    """Wait until ``metaq alloc --watch`` has made ``n`` more passes over the queue at ``root``
    (each pass writes what it saw, stamped, to ``alloc/seen.json``)."""
    stamps: set[float] = set()

    def more() -> bool:
        seen = Journal(root).seen()
        if seen is not None:
            stamps.add(seen.time)
        return len(stamps) > n  # the first stamp seen may be of a pass before

    wait_for(f"{n} more passes of metaq alloc", more, timeout=60)


def squeue_names(name: str) -> list[str]:
    done = subprocess.run(["squeue", "-h", f"--name={name}", "-o", "%i"], capture_output=True,
                          text=True, timeout=30, check=True)
    return done.stdout.split()


def test_a_queue_brings_its_own_allocations_and_alloc_stops_once_it_is_drained(
    slurm: SlurmCluster, tmp_path: Path
) -> None:
    root = tmp_path / "q"
    Queue.init(root)
    (root / "metaq.yaml").write_text(SETTINGS)
    marks = tmp_path / "marks"
    marks.mkdir()
    names = [f"t{i}.sh" for i in range(6)]
    for i, name in enumerate(names):
        path = root / "todo" / name
        path.write_text(TASK.format(nodes=1 + i % 2, marks=marks, name=name))
        path.chmod(0o755)
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    watcher = subprocess.Popen(
        [sys.executable, "-m", "metaq_py", "alloc", "--watch", "--interval", "1s",
         "--queue", str(root)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, cwd=tmp_path)
    try:
        finished = root / "finished" / "todo"
        wait_for("every task finishing",
                 lambda: finished.is_dir() and len(list(finished.glob("*.sh"))) == len(names),
                 timeout=240)
        drained = time.time()
        wait_for("the allocations ending", lambda: not squeue_names(alloc_name(root)),
                 timeout=120)
        wait_passes(root, 3)  # a few more passes on the empty queue
    finally:
        watcher.send_signal(signal.SIGINT)
        out, err = watcher.communicate(timeout=60)
    assert watcher.returncode == 0, err
    assert out.splitlines()[-1] == "metaq alloc: stopped"

    history = Journal(root).history()
    submits = [e for e in history if e["event"] == "submit"]
    assert submits, history
    assert all(e["command"].split()[1] == "sbatch" for e in submits)
    shipped = REPO / "metaq_py" / "share" / "jobscripts" / "slurm.sh"
    assert all(e["command"].endswith(str(shipped)) for e in submits)
    # Nothing was submitted once the queue was drained, and the passes after said why.
    assert all(e["time"] < drained for e in submits)
    assert history[-1]["event"] == "refuse" and history[-1]["code"] == "empty"
    assert not any(e["event"] == "submit-failed" for e in history)
    # Each allocation ran metaq and completed; every task ran exactly once, in one of them.
    jobs = {e["job"] for e in submits}
    for job in jobs:
        assert slurm.wait(job, timeout=60).state == "COMPLETED"
        assert (root / "jobs" / job / "events.jsonl").is_file()
    for name in names:
        ran_in = (marks / name).read_text().split()
        assert len(ran_in) == 1 and ran_in[0] in jobs, (name, ran_in)
    assert not list((root / "todo").glob("*.sh"))
