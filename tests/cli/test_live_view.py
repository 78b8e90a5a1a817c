"""``metaq status`` watching a real runner from outside: the nodes a live allocation holds for
a notice while it holds them, and the nodes a malleable task has lent to on-demand work while
it is lent. The runner is ``metaq run`` on a local pretend cluster, in its own process, and
the collaborator's side is the ``metaq`` command line."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from metaq_py.queue.store import Queue
from tests.conftest import REPO
from tests.runner_helpers import make_queue, task

JOB = "status1"


def _metaq(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "metaq_py", *args], capture_output=True,
                          text=True, timeout=60, check=False, cwd=REPO)
    assert done.returncode == 0, done.stderr
    return done


def _until(what: str, predicate: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def _events(q: Queue) -> list[dict]:
    path = q.root / "jobs" / JOB / "events.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _of(q: Queue, kind: str) -> list[dict]:
    return [e for e in _events(q) if e["event"] == kind]


def _allocation(q: Queue) -> dict:
    """This test's allocation as ``metaq status --json`` shows it."""
    st = json.loads(_metaq("status", "--json", "-q", str(q.root)).stdout)
    (alloc,) = [a for a in st["allocations"] if a["job"] == JOB]
    return alloc


@pytest.fixture
def run_metaq(tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start ``metaq run`` on a local pretend cluster in the background; it is waited for
    (and killed if it is still running) at the end of the test."""
    procs: list[subprocess.Popen[str]] = []

    def start(q: Queue, nodes: int, *args: str) -> subprocess.Popen[str]:
        p = subprocess.Popen(
            [sys.executable, "-m", "metaq_py", "run", "-q", str(q.root), "--batch", "local",
             "--jobid", JOB, "--nodes", str(nodes), "--grace", "1", "--margin", "1", *args],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        procs.append(p)
        return p

    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.communicate(timeout=30)


def _stopped(p: subprocess.Popen[str]) -> str:
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 0, out
    return out


def test_status_shows_a_reservation_while_it_is_held_and_not_after_its_release(
        tmp_path: Path, run_metaq: Callable[..., subprocess.Popen[str]]) -> None:
    q = make_queue(tmp_path / "q")
    stop = tmp_path / "stop"
    task(q, "long.sh", f"while [ ! -e {stop} ]; do sleep 0.05; done")
    p = run_metaq(q, 3, "--mechanism", "CUA&PAA", "--release-after", "2")
    _until("the long task to start", lambda: bool(_of(q, "start")))
    assert _allocation(q)["reserved"] == {}
    _metaq("notice", "-q", str(q.root), "--nodes", "2", "--at", "+2s", "--walltime", "1m",
           "--name", "beam")
    _until("the reservation", lambda: bool(_of(q, "reserve")))
    alloc = _allocation(q)
    (started,) = _of(q, "start")
    held = [h for e in _of(q, "reserve") for h in e["hosts"]]
    assert alloc["reserved"] == {"beam": held}
    assert len(held) == 2 and not set(held) & set(started["hosts"])
    assert alloc["idle"] == 0  # one host runs long.sh, the other two are held
    _until("the release", lambda: bool(_of(q, "release")))
    alloc = _allocation(q)  # the runner still runs long.sh
    assert alloc["reserved"] == {} and alloc["idle"] == 2
    assert [e["reason"] for e in _of(q, "release")] == ["expired"]
    stop.touch()
    _stopped(p)
    st = json.loads(_metaq("status", "--json", "-q", str(q.root)).stdout)
    assert st["allocations"] == []  # the runner has stopped: nothing is live any more


MALLEABLE = """
    trap 'touch "$METAQ_RESIZE_FILE.ack"' USR2
    # the resize signal goes to the whole process group and may kill the sleep: its
    # status must not become the loop's, and so the task's
    while [ ! -e {stop} ]; do sleep 0.05 || :; done
"""


def test_status_shows_nodes_lent_by_a_shrunk_task_until_they_come_back(
        tmp_path: Path, run_metaq: Callable[..., subprocess.Popen[str]]) -> None:
    q = make_queue(tmp_path / "q")
    stop, go = tmp_path / "stop", tmp_path / "go"
    task(q, "mall.sh", MALLEABLE.format(stop=stop), TYPE="malleable", NODES=3, MIN_NODES=1,
         RESIZE="in-place USR2")
    p = run_metaq(q, 3, "--mechanism", "N&SPAA")
    _until("the malleable task to start", lambda: bool(_of(q, "start")))
    task(q, "od.sh", f"while [ ! -e {go} ]; do sleep 0.05; done", TYPE="ondemand", NODES=1,
         MIN_WC_TIME="30s")
    _until("the on-demand task to start", lambda: len(_of(q, "start")) == 2)
    (shrink,) = _of(q, "shrink")
    od = _of(q, "start")[1]
    alloc = _allocation(q)
    assert alloc["lent"] == [{"task": "todo/mall.sh", "to": "todo/od.sh", "hosts": od["hosts"]}]
    assert len(shrink["hosts"]) == 2 and not set(shrink["hosts"]) & set(od["hosts"])
    go.touch()
    _until("the expansion", lambda: bool(_of(q, "expand")))
    assert _allocation(q)["lent"] == []
    stop.touch()
    _stopped(p)
