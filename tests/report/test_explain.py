"""``explain``: why a task is not running, from a real queue, real leases and event logs."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from metaq_py.queue.admin import QueueAdmin
from metaq_py.queue.notices import write_notice
from metaq_py.queue.store import Queue
from metaq_py.report.explain import explain
from tests.job_logs import add_task, claim, end, new_queue, runner_start, start, write_log


@pytest.fixture
def q(tmp_path: Path) -> Queue:
    return new_queue(tmp_path / "queue")


def _runner(q: Queue, jobid: str, hosts: list[str], *, left: float = 7200, gpus: int = 0,
            more: list[dict] | None = None) -> None:
    now = time.time()
    write_log(q.root, jobid, [runner_start(now - 60, hosts, end=now + left, jobid=jobid,
                                           gpus_per_node=gpus), *(more or [])])


def _why(q: Queue, ref: str) -> str:
    return " ".join(explain(q, ref, now=time.time()).reasons)


def test_without_a_live_runner_it_says_so(q: Queue) -> None:
    add_task(q, "a.sh")
    ex = explain(q, "todo/a.sh", now=time.time())
    assert ex.state == "pending" and ex.task == "todo/a.sh"
    assert "No batch job is running metaq" in ex.reasons[0]
    # advice a user of an installed metaq can follow: no path into a source tree
    assert "metaq jobscript slurm prints a job script" in ex.reasons[0]
    assert "jobscripts/" not in ex.reasons[0]
    assert "first of 1 waiting" in ex.reasons[-1]


def test_a_stopped_runner_is_not_live(q: Queue) -> None:
    add_task(q, "a.sh")
    _runner(q, "5", ["n1"], more=[{"time": time.time() - 1, "event": "runner-stop",
                                   "reason": "done"}])
    assert "No batch job is running metaq" in _why(q, "todo/a.sh")


def test_too_many_nodes_for_every_allocation(q: Queue) -> None:
    add_task(q, "big.sh", "#METAQ NODES 8\n")
    _runner(q, "1", ["n1", "n2"])
    _runner(q, "2", ["n3", "n4", "n5", "n6"])
    why = _why(q, "todo/big.sh")
    assert "too big for every live allocation (nodes or GPUs)" in why
    assert "job 1:" in why and "job 2:" in why and "8 nodes" in why


def test_too_many_gpus(q: Queue) -> None:
    add_task(q, "gpu.sh", "#METAQ GPUS 8\n")
    _runner(q, "1", ["n1", "n2"], gpus=2)
    why = _why(q, "todo/gpu.sh")
    assert "too big for every live allocation (nodes or GPUs)" in why and "GPUs" in why


def test_not_enough_wall_clock(q: Queue) -> None:
    add_task(q, "long.sh", "#METAQ MIN_WC_TIME 2h\n")
    _runner(q, "1", ["n1", "n2"], left=600)
    why = _why(q, "todo/long.sh")
    assert "Not enough wall clock is left in any live allocation" in why
    assert "02:00:00" in why


def test_another_machine(q: Queue) -> None:
    add_task(q, "m.sh", "#METAQ MACHINE theta\n")
    _runner(q, "1", ["n1"])
    assert "Every live allocation is on another machine" in _why(q, "todo/m.sh")


def test_waiting_behind_a_reservation(q: Queue) -> None:
    add_task(q, "r.sh", "#METAQ NODES 2\n", age=120)
    add_task(q, "w.sh", "#METAQ NODES 2\n", age=60)
    running = claim(q, "todo/r.sh", jobid="1")
    now = time.time()
    _runner(q, "1", ["a", "b", "c", "d"], more=[
        start(now - 30, running.id, ["a", "b"]),
        {"time": now - 20, "event": "reserve", "notice": "beam", "hosts": ["c", "d"]},
    ])
    why = _why(q, "todo/w.sh")
    assert "Waiting behind a reservation: job 1 holds idle nodes (2 for notice beam)" in why


def test_released_reservation_frees_the_nodes(q: Queue) -> None:
    add_task(q, "w.sh", "#METAQ NODES 2\n")
    now = time.time()
    _runner(q, "1", ["c", "d"], more=[
        {"time": now - 20, "event": "reserve", "notice": "beam", "hosts": ["c", "d"]},
        {"time": now - 10, "event": "release", "notice": "beam", "reason": "expired"},
    ])
    assert "Job 1 has 2 idle nodes" in _why(q, "todo/w.sh")


def test_busy_nodes_and_the_place_in_the_order(q: Queue) -> None:
    add_task(q, "first.sh", "#METAQ PRIORITY 5\n")
    add_task(q, "run.sh", "#METAQ NODES 2\n", age=300)
    add_task(q, "second.sh")
    running = claim(q, "todo/run.sh", jobid="1")
    _runner(q, "1", ["a", "b"], more=[start(time.time() - 5, running.id, ["a", "b"])])
    why = _why(q, "todo/second.sh")
    assert "Job 1 has 0 idle of 2 nodes and it needs 1; 1 task holds the rest" in why
    assert "number 2 of 2 waiting tasks" in why and "todo/first.sh" in why


def test_held(q: Queue) -> None:
    add_task(q, "h.sh")
    QueueAdmin(q).hold("todo/h.sh")
    ex = explain(q, "todo/h.sh", now=time.time())
    assert ex.state == "hold" and "metaq release todo/h.sh" in ex.reasons[0]


def test_rejected_shows_the_reason(q: Queue) -> None:
    add_task(q, "bad.sh", "#METAQ NODES two\n", age=60)
    q.pending()  # rejects the settled invalid file, as a runner does
    ex = explain(q, "todo/bad.sh", now=time.time())
    assert ex.state == "rejected"
    assert "rejected as invalid" in ex.reasons[0] and "NODES must be a whole number" in \
        ex.reasons[0]


def test_an_invalid_file_not_yet_moved(q: Queue) -> None:
    add_task(q, "bad.sh", "#METAQ NODE 2\n", age=0)
    ex = explain(q, "todo/bad.sh", now=time.time())
    assert ex.state == "pending" and "not a valid task" in ex.reasons[0]
    assert "NODE" in ex.reasons[0]


def test_running_finished_failed_and_cancelled(q: Queue) -> None:
    for name in ("r.sh", "f.sh", "x.sh", "c.sh"):
        add_task(q, name)
    r = claim(q, "todo/r.sh", jobid="1")
    _runner(q, "1", ["a", "b"], more=[start(time.time() - 5, r.id, ["b"])])
    ex = explain(q, "todo/r.sh", now=time.time())
    assert ex.state == "working" and "running in job 1 on m" in ex.reasons[0]
    assert "on host b" in ex.reasons[0]
    q.finish(claim(q, "todo/f.sh", jobid="1"), exit_code=0)
    assert explain(q, "todo/f.sh", now=time.time()).reasons == (
        "It has already finished (it exited with code 0).",)
    q.finish(claim(q, "todo/x.sh", jobid="1"), exit_code=3)
    failed = explain(q, "todo/x.sh", now=time.time())
    assert failed.state == "failed" and "exited with code 3" in failed.reasons[0]
    QueueAdmin(q).cancel("todo/c.sh")
    assert "cancelled by" in explain(q, "todo/c.sh", now=time.time()).reasons[0]


def test_a_stale_lease_is_called_out(q: Queue) -> None:
    add_task(q, "r.sh")
    r = claim(q, "todo/r.sh", jobid="1")
    ex = explain(q, r.id, now=time.time() + q.config.stale_after + 60)
    assert "probably dead" in ex.reasons[-1]


def test_an_on_demand_task_and_its_notice(q: Queue) -> None:
    add_task(q, "od.sh", "#METAQ TYPE ondemand\n#METAQ NOTICE beam\n")
    assert "notice 'beam' is not live" in _why(q, "todo/od.sh")
    write_notice(q.root, nodes=1, arrival=time.time() + 600, walltime=60, now=time.time(),
                 name="beam")
    assert "redeems notice 'beam': 1 nodes" in _why(q, "todo/od.sh")


def test_an_ended_task_frees_its_hosts(q: Queue) -> None:
    add_task(q, "w.sh", "#METAQ NODES 2\n")
    now = time.time()
    _runner(q, "1", ["a", "b"], more=[start(now - 50, "todo/old.sh", ["a", "b"]),
                                      end(now - 10, "todo/old.sh", ["a", "b"], seconds=40)])
    assert "Job 1 has 2 idle nodes" in _why(q, "todo/w.sh")
