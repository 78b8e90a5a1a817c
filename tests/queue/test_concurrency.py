"""Eight real processes claim from one queue of 2,000 tasks at once: every task is claimed
exactly once and none is lost."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from metaq_py.queue.store import Queue

WORKER = """
import json, os, sys, time
from pathlib import Path
from metaq_py.queue.store import Queue

root, job, go = sys.argv[1], sys.argv[2], Path(sys.argv[3])
q = Queue(root)
q.scan()  # warm the index before the start signal, so all start racing together
(go.parent / f"ready-{job}").touch()
while not go.exists():
    time.sleep(0.001)
claimed = []
while True:
    tasks = q.pending()
    if not tasks:
        break
    for task in tasks:
        claim = q.claim(task, machine="m", jobid=job)
        if claim is not None:
            claimed.append(claim.id)
print(json.dumps(claimed))
"""

TASKS = 2000
WORKERS = 8


def test_eight_processes_claim_each_task_exactly_once(tmp_path: Path) -> None:
    q = Queue.init(tmp_path / "q")
    for i in range(TASKS):
        path = q.root / "todo" / f"d{i % 20}" / f"t{i}.sh"
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"#!/bin/sh\n#METAQ NODES {1 + i % 4}\necho {i}\n")
        path.chmod(0o755)
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(q.root), f"job{n}", str(go)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for n in range(WORKERS)]
    deadline = time.monotonic() + 120  # every worker ready, so that all race from the start
    while len(list(tmp_path.glob("ready-*"))) < WORKERS and time.monotonic() < deadline:
        time.sleep(0.01)
    go.touch()
    results = []
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err
        results.append(json.loads(out))
    everything = [task for claimed in results for task in claimed]
    assert len(everything) == TASKS
    assert len(set(everything)) == TASKS  # no task claimed twice
    assert sum(1 for claimed in results if claimed) >= 2  # they really raced
    # Each claimed file sits under the job that claimed it, with its lease; none left behind.
    leases = q.leases()
    assert len(leases) == TASKS
    by_job = {n: set(claimed) for n, claimed in enumerate(results)}
    for lease in leases:
        n = int(lease.jobid[3:])
        assert lease.id in by_job[n]
        assert lease.lease.exists()
    assert q.scan().tasks == ()
    assert not list((q.root / "todo").rglob("*.sh"))
