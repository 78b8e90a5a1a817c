"""The on-demand layer in real jobs on the local four-node SLURM (nodes ``n1``..``n4``).

Each test submits the project's own ``share/jobscripts/slurm.sh`` with an on-demand ``--mechanism``
and plays a collaborator from outside the job: it writes notices with ``metaq notice``, drops
on-demand task files into the queue while the job runs, and reads what happened from the
job's event log and from the files the tasks themselves wrote. Every test ends by checking that
each task ended exactly once, in ``finished/`` or ``failed/``, and that nothing is left
waiting, held or claimed. The tests skip, with the reason, when the cluster is not up.

An on-demand task's *arrival* is the moment its file appeared in the queue (its modification
time: the file is written under a hidden name and renamed into place, as ``metaq submit``
does); its start is the runner's ``start`` event.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from metaq_py.queue.admin import QueueAdmin
from metaq_py.queue.store import Queue
from tests.conftest import REPO, SlurmCluster
from tests.runner_helpers import make_queue, task

pytestmark = pytest.mark.slurm

JOBSCRIPT = REPO / "metaq_py" / "share" / "jobscripts" / "slurm.sh"
INSTANT = 2.0
"""Seconds within which an on-demand task must start once its file is in the queue."""


# --------------------------------------------------------------------------- helpers


def _submit(slurm: SlurmCluster, q: Queue, tmp_path: Path, nodes: int, *run_args: str) -> str:
    """Submit ``share/jobscripts/slurm.sh`` on ``nodes`` nodes; ``run_args`` go to ``metaq run``."""
    return slurm.sbatch("-N", str(nodes), "-t", "5", "-o", tmp_path / "job.out", JOBSCRIPT,
                        "--launch-pause", "0", "--grace", "2", "--margin", "2", *run_args,
                        cwd=tmp_path, env={"PYTHONPATH": str(REPO), "METAQ_QUEUE": str(q.root)})


def _events(q: Queue, jobid: str) -> list[dict]:
    path = q.root / "jobs" / jobid / "events.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _of(evs: list[dict], kind: str, **match: object) -> list[dict]:
    return [e for e in evs if e["event"] == kind and all(e.get(k) == v for k, v in match.items())]


def _until(what: str, predicate: Callable[[], bool], *, timeout: float = 60.0,
           job_out: Path | None = None) -> None:
    """Wait until ``predicate()`` holds; fail naming ``what`` (and showing the job's output)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    shown = job_out.read_text() if job_out is not None and job_out.exists() else ""
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}\n{shown}")


def _metaq(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "metaq_py", *args], capture_output=True,
                          text=True, timeout=60, check=False, cwd=REPO)
    assert done.returncode == 0, done.stderr
    return done


def _arrive(q: Queue, name: str, body: str, **directives: object) -> float:
    """Drop an on-demand task into ``todo/`` now; its arrival time (the file's mtime, or
    the moment before it was written if the runner has claimed it already)."""
    before = time.time()
    path = task(q, name, body, TYPE="ondemand", MIN_WC_TIME="30s", **directives)
    try:
        return path.stat().st_mtime
    except FileNotFoundError:  # the runner was quicker than this look: it is in working/
        return before


def _latency(q: Queue, jobid: str, name: str, arrived: float) -> float:
    """Seconds from the task file's appearance to its first start, checked against the
    runner's own ``arrival`` event too."""
    evs = _events(q, jobid)
    start = _of(evs, "start", task=f"todo/{name}")[0]
    seen = _of(evs, "arrival", task=f"todo/{name}")[0]
    assert arrived - 0.05 <= seen["time"] <= start["time"]
    return start["time"] - arrived


def _assert_each_ended_once(q: Queue, jobid: str, *, finished: set[str],
                            failed: frozenset[str] = frozenset()) -> None:
    """Every task ended exactly once, where its exit sent it, and nothing is lost: no task is
    waiting, held or claimed, and the event log has one final ``end`` per task."""
    admin = QueueAdmin(q)
    in_finished = Counter(e.id for e in admin.entries("finished", specs=False))
    in_failed = Counter(e.id for e in admin.entries("failed", specs=False))
    assert in_finished == Counter(f"todo/{n}" for n in finished)
    assert in_failed == Counter(f"todo/{n}" for n in failed)
    for state in ("pending", "hold", "working", "rejected", "cancelled"):
        assert not list(admin.entries(state, specs=False)), f"a task is left in {state}"
    assert not q.leases()
    final = Counter(e["task"] for e in _of(_events(q, jobid), "end")
                    if e["outcome"] in ("finished", "failed"))
    assert final == in_finished + in_failed


def _wait_job(slurm: SlurmCluster, jobid: str, tmp_path: Path, timeout: float = 120) -> str:
    end = slurm.wait(jobid, timeout=timeout)
    out = (tmp_path / "job.out").read_text()
    assert end.state == "COMPLETED", out
    return out


# --------------------------------------------------------------------------- the tests


def test_cua_collects_nodes_as_tasks_end_and_the_task_starts_at_once(
        slurm: SlurmCluster, tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    stop = tmp_path / "stop"
    task(q, "f1.sh", "sleep 1; exit 3", MIN_WC_TIME="20s")  # ends first, and fails
    task(q, "f2.sh", "sleep 3", MIN_WC_TIME="20s")
    for name in ("f3.sh", "f4.sh"):
        task(q, name, f"while [ ! -e {stop} ]; do sleep 0.05; done", MIN_WC_TIME="2m")
    ran = tmp_path / "ran"
    jobid = _submit(slurm, q, tmp_path, 4, "--mechanism", "CUA&PAA")
    out = tmp_path / "job.out"
    _until("four tasks running",
           lambda: len(_of(_events(q, jobid), "start")) == 4, job_out=out)
    # Announced now, due in 5 s: no node is idle, so CUA takes each one as its task ends.
    _metaq("notice", "-q", str(q.root), "--nodes", "2", "--at", "+5s", "--walltime", "1m",
           "--name", "beam")
    _until("two hosts reserved", lambda: len(_of(_events(q, jobid), "reserve")) == 2,
           job_out=out)
    arrived = _arrive(q, "od.sh", f"""
        srun --nodelist="$METAQ_NODELIST" -N "$METAQ_NNODES" --ntasks-per-node=1 \\
             bash -c 'echo "$SLURMD_NODENAME"' | sort > {ran}
    """, NODES=2, NOTICE="beam")
    _until("the on-demand task to end", lambda: bool(_of(_events(q, jobid), "end",
                                                         task="todo/od.sh")), job_out=out)
    stop.touch()
    _wait_job(slurm, jobid, tmp_path)

    evs = _events(q, jobid)
    ends = {e["task"]: e for e in _of(evs, "end")}
    reserves = _of(evs, "reserve", notice="beam")
    # One host at a time, each right after the task on it ended, in the order they ended.
    assert [r["hosts"] for r in reserves] == [ends["todo/f1.sh"]["hosts"],
                                              ends["todo/f2.sh"]["hosts"]]
    assert reserves[0]["time"] >= ends["todo/f1.sh"]["time"]
    assert reserves[1]["time"] >= ends["todo/f2.sh"]["time"]
    start = _of(evs, "start", task="todo/od.sh")[0]
    held = sorted(h for r in reserves for h in r["hosts"])
    assert sorted(start["hosts"]) == held
    assert ran.read_text().split() == held  # srun really ran it on the reserved nodes
    assert start["notice"] == "beam" and start["instant"] is True and start["lenders"] == []
    assert [e["reason"] for e in _of(evs, "release", notice="beam")] == ["redeemed"]
    assert not _of(evs, "preempt")  # CUA never preempts
    assert _latency(q, jobid, "od.sh", arrived) < INSTANT
    _assert_each_ended_once(q, jobid, finished={"f2.sh", "f3.sh", "f4.sh", "od.sh"},
                            failed=frozenset({"f1.sh"}))


RIGID = """
    state="$(dirname "$METAQ_CHECKPOINT_FILE")/state"
    i=0
    if [ "$METAQ_RESUME" = 1 ]; then i=$(cat "$state"); fi
    echo "start $METAQ_ATTEMPT $METAQ_RESUME $i" >> {out}
    trap 'echo "stopped $i" >> {out}; exit 143' TERM
    while [ "$i" -lt {steps} ]; do
        sleep 0.1 & wait $!
        i=$((i + 1))
        echo "$i" > "$state.tmp" && mv "$state.tmp" "$state"
        touch "$METAQ_CHECKPOINT_FILE"
    done
    echo "done $i" >> {out}
"""


def test_paa_preempts_a_rigid_task_which_resumes_from_its_checkpoint(
        slurm: SlurmCluster, tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    out = tmp_path / "rigid.out"
    task(q, "rigid.sh", RIGID.format(out=out, steps=40), NODES=2, CHECKPOINT="10s 1s",
         SIGNAL="TERM@2", MIN_WC_TIME="1m")
    jobid = _submit(slurm, q, tmp_path, 2, "--mechanism", "N&PAA")
    job_out = tmp_path / "job.out"
    state = q.root / "jobs" / jobid / "runs" / "todo" / "rigid.sh" / "state"

    def progressed() -> bool:
        try:
            return int(state.read_text() or 0) >= 5
        except (OSError, ValueError):
            return False

    _until("the rigid task to checkpoint five steps", progressed, job_out=job_out)
    arrived = _arrive(q, "od.sh", "sleep 0.5", NODES=2)
    _wait_job(slurm, jobid, tmp_path)

    lines = out.read_text().splitlines()
    assert lines[0] == "start 1 0 0"
    assert lines[1].startswith("stopped ")
    saved = int(lines[1].split()[1])
    assert 5 <= saved < 40
    # The second run resumes exactly where the first one's last checkpoint left off.
    assert lines[2:] == [f"start 2 1 {saved}", "done 40"]
    evs = _events(q, jobid)
    pre = _of(evs, "preempt", task="todo/rigid.sh")
    assert len(pre) == 1 and pre[0]["for_task"] == "todo/od.sh"
    assert _of(evs, "checkpoint", task="todo/rigid.sh")
    first_end, last_end = _of(evs, "end", task="todo/rigid.sh")
    assert first_end["outcome"] == "preempted" and last_end["outcome"] == "finished"
    od = _of(evs, "start", task="todo/od.sh")[0]
    assert od["lenders"] == ["todo/rigid.sh"] and od["instant"] is True
    assert sorted(od["hosts"]) == ["n1", "n2"]
    assert od["time"] >= first_end["time"]  # never on a host its victim still used
    resumed = _of(evs, "start", task="todo/rigid.sh")[1]
    assert resumed["resume"] is True and resumed["attempt"] == 2
    assert _latency(q, jobid, "od.sh", arrived) < INSTANT
    _assert_each_ended_once(q, jobid, finished={"rigid.sh", "od.sh"})


MALLEABLE = """
    echo "start $METAQ_ATTEMPT $METAQ_RESUME $METAQ_NODELIST" >> {out}
    trap 'echo "resize $(paste -sd, "$METAQ_RESIZE_FILE")" >> {out}; \\
          touch "$METAQ_RESIZE_FILE.ack"' USR2
    # the resize signal goes to the whole process group and may kill the sleep: its
    # status must not become the loop's, and so the task's
    while [ ! -e {stop} ]; do sleep 0.05 || :; done
"""


def test_spaa_shrinks_a_malleable_task_in_place_and_expands_it_after(
        slurm: SlurmCluster, tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    out, stop, ran = tmp_path / "m.out", tmp_path / "stop", tmp_path / "ran"
    task(q, "mall.sh", MALLEABLE.format(out=out, stop=stop), TYPE="malleable", NODES=4,
         MIN_NODES=1, RESIZE="in-place USR2", MIN_WC_TIME="2m")
    jobid = _submit(slurm, q, tmp_path, 4, "--mechanism", "CUA&SPAA")
    job_out = tmp_path / "job.out"
    _until("the malleable task to start", out.exists, job_out=job_out)
    arrived = _arrive(q, "od.sh", f"""
        srun --nodelist="$METAQ_NODELIST" -N "$METAQ_NNODES" --ntasks-per-node=1 \\
             bash -c 'echo "$SLURMD_NODENAME"' | sort > {ran}
    """, NODES=2)
    _until("the shrink and the expansion",
           lambda: out.read_text().count("resize") >= 2, job_out=job_out)
    stop.touch()
    _wait_job(slurm, jobid, tmp_path)

    # The task's own record of $METAQ_RESIZE_FILE at each signal.
    assert out.read_text().splitlines() == ["start 1 0 n1,n2,n3,n4", "resize n1,n2",
                                            "resize n1,n2,n3,n4"]
    evs = _events(q, jobid)
    (shrink,) = _of(evs, "shrink", task="todo/mall.sh")
    (expand,) = _of(evs, "expand", task="todo/mall.sh")
    assert (shrink["mode"], shrink["hosts"], shrink["for_task"]) == (
        "in-place", ["n1", "n2"], "todo/od.sh")
    assert (expand["mode"], expand["hosts"]) == ("in-place", ["n1", "n2", "n3", "n4"])
    od_start = _of(evs, "start", task="todo/od.sh")[0]
    od_end = _of(evs, "end", task="todo/od.sh")[0]
    assert od_start["hosts"] == ["n3", "n4"] and od_start["lenders"] == ["todo/mall.sh"]
    assert ran.read_text().split() == ["n3", "n4"]
    assert shrink["time"] <= od_start["time"] and expand["time"] >= od_end["time"]
    assert len(_of(evs, "start", task="todo/mall.sh")) == 1  # resized, never restarted
    assert not _of(evs, "preempt")
    assert _latency(q, jobid, "od.sh", arrived) < INSTANT
    _assert_each_ended_once(q, jobid, finished={"mall.sh", "od.sh"})


def test_a_notice_whose_task_never_comes_is_released_at_the_threshold(
        slurm: SlurmCluster, tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    stop = tmp_path / "stop"
    task(q, "long.sh", f"while [ ! -e {stop} ]; do sleep 0.05; done", MIN_WC_TIME="2m")
    jobid = _submit(slurm, q, tmp_path, 2, "--mechanism", "CUA&PAA", "--release-after", "2")
    job_out = tmp_path / "job.out"
    _until("the long task to start", lambda: bool(_of(_events(q, jobid), "start")),
           job_out=job_out)
    _metaq("notice", "-q", str(q.root), "--nodes", "1", "--at", "+2s", "--walltime", "1m",
           "--name", "ghost")
    arrival = json.loads((q.root / "notices" / "ghost.json").read_text())["arrival"]

    def status() -> dict:
        return json.loads(_metaq("status", "--json", "-q", str(q.root)).stdout)

    def reserved() -> dict:
        (alloc,) = [a for a in status()["allocations"] if a["job"] == jobid]
        return alloc["reserved"]

    _until("metaq status to show the reservation", lambda: bool(reserved()), job_out=job_out)
    (held,) = _of(_events(q, jobid), "reserve", notice="ghost")
    assert reserved() == {"ghost": held["hosts"]}
    _until("the release", lambda: bool(_of(_events(q, jobid), "release")), job_out=job_out)
    assert reserved() == {}  # the allocation still runs, but holds nothing any more
    (notice,) = status()["notices"]
    assert (notice["name"], notice["state"]) == ("ghost", "released")
    stop.touch()
    _wait_job(slurm, jobid, tmp_path)

    evs = _events(q, jobid)
    (release,) = _of(evs, "release", notice="ghost")
    assert release["reason"] == "expired"
    # At the threshold: not before it, and promptly after (the decision asked to wake then).
    assert arrival + 2 - 0.05 <= release["time"] <= arrival + 2 + 1.0
    assert held["hosts"] != _of(evs, "start", task="todo/long.sh")[0]["hosts"]
    assert not _of(evs, "preempt")
    _assert_each_ended_once(q, jobid, finished={"long.sh"})
