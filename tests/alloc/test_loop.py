"""``metaq alloc`` passes against a stateful fake SLURM and PBS on ``PATH``, run as the real
``metaq`` process where the command line matters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from metaq_py.alloc.journal import Journal
from metaq_py.alloc.loop import Allocator
from metaq_py.alloc.policy import Refuse, Submit
from metaq_py.batch.submit import alloc_name
from metaq_py.queue.store import Queue
from tests.alloc.fake_batch import FakeBatch
from tests.conftest import FakeBin

SETTINGS = """\
alloc:
  system: {system}
  jobscript: job.sh
  min_walltime: 10m
  max_nodes: 4
  backoff: 1h
"""


def make_queue(root: Path, system: str, tasks: dict[str, str]) -> Queue:
    Queue.init(root)
    (root / "metaq.yaml").write_text(SETTINGS.format(system=system))
    (root / "job.sh").write_text("#!/bin/bash\nexec metaq run\n")
    for name, directives in tasks.items():
        path = root / "todo" / name
        path.write_text(f"#!/bin/sh\n{directives}echo hi\n")
        path.chmod(0o755)
    return Queue(root)


def metaq(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "metaq_py", *args], capture_output=True,
                          text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "200", **(env or {})})


def events(root: Path) -> list[dict]:
    return Journal(root).history()


@pytest.mark.parametrize("system", ["slurm", "pbs"])
def test_work_brings_one_allocation_then_alloc_waits_and_stops_when_drained(
    fake_bin: FakeBin, tmp_path: Path, system: str
) -> None:
    batch = FakeBatch(fake_bin, system)
    root = tmp_path / "q"
    q = make_queue(root, system, {"a.sh": "#METAQ NODES 2\n#METAQ MIN_WC_TIME 20m\n",
                                  "b.sh": "#METAQ MIN_WC_TIME 5m\n"})
    allocator = Allocator(q)
    first = allocator.once()
    assert isinstance(first.decision, Submit) and first.jobid is not None
    # 2 nodes for a.sh; 20 min of 2 nodes and 5 min of 1 spread over 25 min fit in 2 nodes.
    assert (first.decision.nodes, first.decision.walltime) == (2, 1500.0)
    [call] = batch.submissions()
    assert call["argv"][-1] == str(root.absolute() / "job.sh")
    if system == "slurm":  # sbatch passes its environment on to the job
        assert call["queue"] == str(root.absolute())
    else:  # qsub passes only what -v names
        assert call["argv"][call["argv"].index("-v") + 1] == f"METAQ_QUEUE={root.absolute()}"
    assert [j["name"] for j in batch.jobs()] == [alloc_name(root)]

    # Queued: the batch system says so, and nothing more is submitted, pass after pass.
    for _ in range(3):
        again = allocator.once()
        assert isinstance(again.decision, Refuse) and again.decision.code == "queued"
    batch.set_state(0, "R")
    running = allocator.once()
    assert isinstance(running.decision, Refuse) and running.decision.code == "limit"
    assert len(batch.submissions()) == 1

    # The allocation ran the tasks and ended: nothing waits, nothing is submitted.
    for name in ("a.sh", "b.sh"):
        (root / "todo" / name).unlink()
    batch.set_state(0, "F")
    for _ in range(3):
        idle = allocator.once()
        assert isinstance(idle.decision, Refuse) and idle.decision.code == "empty"
    assert len(batch.submissions()) == 1

    log = events(root)
    assert [(e["event"], e.get("code")) for e in log] == [
        ("submit", None), ("refuse", "queued"), ("refuse", "limit"), ("refuse", "empty")]
    assert log[0]["job"] == first.jobid and log[0]["nodes"] == 2
    submitter = "sbatch" if system == "slurm" else "qsub"
    assert log[0]["command"].split()[int(system == "slurm")] == submitter


def test_a_failed_submission_backs_off(fake_bin: FakeBin, tmp_path: Path) -> None:
    batch = FakeBatch(fake_bin, "pbs")
    q = make_queue(tmp_path / "q", "pbs", {"a.sh": "#METAQ MIN_WC_TIME 5m\n"})
    batch.refuse("qsub: Unauthorized Request\n")
    failed = Allocator(q).once()
    assert failed.error is not None and "Unauthorized Request" in failed.error
    assert "\n" not in failed.error
    batch.refuse(None)
    later = Allocator(q).once()
    assert isinstance(later.decision, Refuse) and later.decision.code == "backoff"
    assert len(batch.submissions()) == 1
    assert [e["event"] for e in events(q.root)] == ["submit-failed", "refuse"]


def test_a_task_no_allocation_could_run_brings_none(fake_bin: FakeBin, tmp_path: Path) -> None:
    batch = FakeBatch(fake_bin, "slurm")
    q = make_queue(tmp_path / "q", "slurm", {"big.sh": "#METAQ NODES 64\n"})
    done = Allocator(q).once()
    assert isinstance(done.decision, Refuse) and done.decision.code == "no-fit"
    assert "todo/big.sh" in done.decision.reason and "alloc.max_nodes is 4" in done.decision.reason
    assert batch.submissions() == []


def test_the_dry_run_prints_the_command_and_why_and_writes_nothing(
    fake_bin: FakeBin, tmp_path: Path
) -> None:
    batch = FakeBatch(fake_bin, "slurm")
    root = tmp_path / "q"
    make_queue(root, "slurm", {"a.sh": "#METAQ NODES 3\n#METAQ MIN_WC_TIME 1h\n"})
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    done = metaq("alloc", "--dry-run", "--queue", str(root))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == (f"would run: METAQ_QUEUE={root.absolute()} sbatch --parsable "
                        f"--job-name={alloc_name(root)} --nodes=3 --time=01:05:00 "
                        f"--output={root.absolute()}/alloc/slurm-%j.out {root.absolute()}/job.sh")
    assert lines[1].startswith("because: 1 task waits, 1 of which fits: 3 nodes")
    assert batch.submissions() == []
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before


def test_two_alloc_processes_never_double_submit(fake_bin: FakeBin, tmp_path: Path) -> None:
    batch = FakeBatch(fake_bin, "slurm")
    root = tmp_path / "q"
    make_queue(root, "slurm", {f"t{i}.sh": "#METAQ MIN_WC_TIME 5m\n" for i in range(5)})
    (root / "metaq.yaml").write_text(SETTINGS.format(system="slurm")
                                     + "  max_allocations: 4\n  max_queued: 1\n")
    env = {**os.environ, "COLUMNS": "200", "FAKE_SUBMIT_DELAY": "1.5"}
    procs = [subprocess.Popen([sys.executable, "-m", "metaq_py", "alloc", "--once", "--queue",
                               str(root)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    # One submitted; the other, after the lock, counted it queued (max_queued 1).
    assert len(batch.submissions()) == 1
    said = sorted(out for out, _ in outs)
    assert said[0].startswith("submitted job 100") and "waits to start" in said[1]


def test_status_shows_the_allocations_alloc_made(fake_bin: FakeBin, tmp_path: Path) -> None:
    batch = FakeBatch(fake_bin, "slurm")
    root = tmp_path / "q"
    make_queue(root, "slurm", {"a.sh": "#METAQ MIN_WC_TIME 5m\n"})
    assert metaq("alloc", "--once", "--queue", str(root)).returncode == 0
    batch.set_state(0, "R")
    assert metaq("alloc", "--once", "--queue", str(root)).returncode == 0
    status = json.loads(metaq("status", "--json", "--queue", str(root)).stdout)
    [made] = status["alloc"]
    assert (made["job"], made["state"], made["nodes"], made["walltime"]) == (
        "100", "RUNNING", 1, 600.0)
    text = metaq("status", "--queue", str(root)).stdout
    assert "allocations metaq alloc made" in text
    assert "100" in text and "RUNNING" in text


def test_a_task_waiting_on_a_running_dependency_brings_no_allocation(
    fake_bin: FakeBin, tmp_path: Path
) -> None:
    """HyperQueue's #248: the only waiting task waits for prop.sh, which runs in another
    allocation; an allocation now could run nothing. Once prop.sh has finished, one comes."""
    batch = FakeBatch(fake_bin, "slurm")
    root = tmp_path / "q"
    q = make_queue(root, "slurm", {"prop.sh": "#METAQ MIN_WC_TIME 5m\n",
                                   "contract.sh": "#METAQ AFTER todo/prop.sh\n"
                                                  "#METAQ MIN_WC_TIME 20m\n"})
    [prop] = [t for t in q.scan().tasks if t.id == "todo/prop.sh"]
    claim = q.claim(prop, machine="m", jobid="77")
    assert claim is not None
    allocator = Allocator(q)
    for _ in range(2):
        blocked = allocator.once()
        assert isinstance(blocked.decision, Refuse) and blocked.decision.code == "blocked"
        assert blocked.decision.reason.startswith("1 task waits, each for a dependency")
    dry = Allocator(q).once(dry_run=True)
    assert isinstance(dry.decision, Refuse) and dry.decision.code == "blocked"
    assert batch.submissions() == []

    q.finish(claim, exit_code=0)
    ready = Allocator(Queue(root)).once()
    assert isinstance(ready.decision, Submit) and ready.jobid is not None
    # Sized for contract.sh alone: 20 min plus the 5 min margin.
    assert (ready.decision.nodes, ready.decision.walltime, ready.decision.fits) == (1, 1500.0, 1)
    assert len(batch.submissions()) == 1
    assert [(e["event"], e.get("code")) for e in events(root)] == [
        ("refuse", "blocked"), ("submit", None)]


def test_a_task_whose_dependency_failed_brings_none_and_moves_to_failed(
    fake_bin: FakeBin, tmp_path: Path
) -> None:
    batch = FakeBatch(fake_bin, "slurm")
    root = tmp_path / "q"
    q = make_queue(root, "slurm", {"prop.sh": "", "contract.sh": "#METAQ AFTER todo/prop.sh\n"})
    [prop] = [t for t in q.scan().tasks if t.id == "todo/prop.sh"]
    claim = q.claim(prop, machine="m", jobid="77")
    assert claim is not None
    q.finish(claim, exit_code=3)
    assert (root / "failed" / "todo" / "prop.sh").is_file()
    dry = Allocator(q).once(dry_run=True)
    assert isinstance(dry.decision, Refuse) and dry.decision.code == "empty"
    assert (root / "todo" / "contract.sh").is_file()  # a dry run moves nothing
    done = Allocator(Queue(root)).once()
    assert isinstance(done.decision, Refuse) and done.decision.code == "empty"
    assert (root / "failed" / "todo" / "contract.sh").is_file()
    assert not (root / "todo" / "contract.sh").exists()
    assert batch.submissions() == []
    moved = [e for e in events(root) if e["event"] == "dependency-failed"]
    assert [(e["task"], e["reason"]) for e in moved] == [
        ("todo/contract.sh", "dependency todo/prop.sh failed")]
