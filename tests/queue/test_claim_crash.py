"""A claim interrupted at every step: a real process claiming a task is killed with SIGKILL
before each change it makes on disk in turn (the folder, the lease's file, its rename, the
task's rename, the logbook's), and after each death:

- the task is in exactly one place, waiting or claimed (never lost, never in two);
- a claimed task has its lease, naming the task and the dead process (``lease.py``: "the lease
  is written before the claim's rename, so a claimed task always has one");
- the next runner takes the dead job's claim back and runs the task exactly once.

The kill comes from an audit hook (``sys.addaudithook``), which Python calls before each file
system call: no seam in the code, and the order of the steps is the code's own, so a claim that
renamed the task before writing its lease would be caught between the two.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from metaq_py.queue.lease import read_lease
from metaq_py.queue.logbook import read_logbook
from metaq_py.queue.store import Queue
from tests.runner_helpers import events, make_queue, of, runner, task, where

CLAIMER = """
import os, signal, socket, sys
from metaq_py.queue.store import Queue

root, kill_at = sys.argv[1], int(sys.argv[2])
q = Queue(root)
[waiting] = q.pending()
jobid = f"{socket.gethostname().split('.')[0]}-{os.getpid()}"  # a local job: this process
WRITES = ("os.rename", "os.remove", "os.mkdir", "os.rmdir", "os.utime", "os.truncate",
          "os.chmod", "os.symlink", "os.link")
seen = 0

def hook(event, args):
    global seen
    writing = event in WRITES or (event == "open" and isinstance(args[2], int)
                                  and args[2] & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
    if writing:
        seen += 1
        if seen == kill_at:  # killed before its kill_at-th change on disk
            os.kill(os.getpid(), signal.SIGKILL)

sys.addaudithook(hook)
claim = q.claim(waiting, machine=socket.gethostname().split('.')[0], jobid=jobid)
print(jobid, claim is not None)
"""


def _claim_killed_at(q: Queue, step: int) -> int:
    """Run a claimer killed before its ``step``-th change on disk; its exit code."""
    done = subprocess.run([sys.executable, "-c", CLAIMER, str(q.root), str(step)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode in (0, -9), done.stderr
    return done.returncode


def _places(q: Queue) -> list[Path]:
    """Every file of the task ``sub/work.sh`` in the queue, whatever its state."""
    return [p for p in q.root.rglob("work.sh") if p.is_file()]


def test_a_claim_killed_at_any_step_leaves_its_task_leased_or_waiting(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    steps_killed = 0
    for step in range(1, 40):
        q = make_queue(tmp_path / f"q{step}")
        task(q, "sub/work.sh", f"echo \"$METAQ_ATTEMPT\" >> {out}.{step}")
        # The task was claimed once and given back: it has a logbook, which travels with it.
        claim = q.claim(q.pending()[0], machine="elsewhere", jobid="1")
        assert claim is not None
        q.requeue(claim, reason="given back unstarted", started=False)
        q.tidy_job(machine="elsewhere", jobid="1")
        back = q.root / "todo/sub/work.sh"
        logbook = read_logbook(back, back.stat().st_ino)
        assert logbook is not None and logbook.attempts == 0

        code = _claim_killed_at(q, step)
        [place] = _places(q)  # never lost, never in two places
        if place.is_relative_to(q.root / "working"):
            found = read_lease(place)
            assert found is not None, f"killed at step {step}: a claimed task without a lease"
            lease, _ = found
            assert (lease["folder"], lease["relpath"]) == ("todo", "sub/work.sh")
            dead = place.parent.name
            assert dead == f"{socket.gethostname().split('.')[0]}-{lease['pid']}"
        else:
            assert place == q.root / "todo/sub/work.sh"
        if code == 0:
            break  # the claim ran to its end: every step before it has been tried
        steps_killed += 1

        runner(q, nodes=1).run()  # the next runner: the dead job's claim comes back
        assert out.with_suffix(f".{step}").read_text().splitlines() == [
            "2" if place.is_relative_to(q.root / "working") else "1"], step
        assert where(q, "sub/work.sh") == "finished"
        assert not q.leases()
        reclaimed = of(events(q), "reclaim", task="todo/sub/work.sh")
        assert len(reclaimed) == (1 if place.is_relative_to(q.root / "working") else 0)
        assert all("is gone" in e["reason"] for e in reclaimed)
    else:
        raise AssertionError("the claim never ran to its end")
    # The folder, the lease's file and its rename, the task's rename, the logbook's rename.
    assert steps_killed >= 4
