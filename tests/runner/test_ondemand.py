"""The on-demand mechanisms acting on real processes: preemption with requeue and resume,
shrinking in place with confirmation, the restart fallback, expanding back, checkpoints,
reservations for notices and their release."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from metaq_py.queue.logbook import find_logbook
from metaq_py.queue.notices import write_notice
from metaq_py.queue.store import Queue
from tests.runner_helpers import events, make_queue, of, runner, task, wait_until, where


def _in_background(fn) -> threading.Thread:
    t = threading.Thread(target=fn, daemon=True)
    t.start()
    return t


def _started(q: Queue, name: str) -> bool:
    return bool(of(events(q), "start", task=f"todo/{name}"))


def test_paa_preempts_a_rigid_task_which_resumes_later(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    out = tmp_path / "rigid.out"
    task(q, "rigid.sh", f"""
        echo "start $METAQ_ATTEMPT $METAQ_RESUME" >> {out}
        [ "$METAQ_RESUME" = 1 ] && exit 0
        trap 'echo saved >> {out}; exit 0' TERM
        sleep 60 & wait
    """, NODES=2, CHECKPOINT="10m 1s")

    def arrive() -> None:
        wait_until(lambda: out.exists())
        task(q, "urgent.sh", "sleep 0.5", TYPE="ondemand", NODES=2, MIN_WC_TIME="10s")

    _in_background(arrive)
    runner(q, nodes=2, scheduler="N&PAA").run()
    assert out.read_text().splitlines() == ["start 1 0", "saved", "start 2 1"]
    assert where(q, "rigid.sh") == "finished" and where(q, "urgent.sh") == "finished"
    evs = events(q)
    pre = of(evs, "preempt", task="todo/rigid.sh")
    assert len(pre) == 1 and pre[0]["for_task"] == "todo/urgent.sh"
    assert pre[0]["lost_node_seconds"] > 0
    first_end = of(evs, "end", task="todo/rigid.sh")[0]
    assert first_end["outcome"] == "preempted"
    urgent = of(evs, "start", task="todo/urgent.sh")[0]
    assert urgent["instant"] is True and urgent["lenders"] == ["todo/rigid.sh"]
    assert urgent["time"] >= first_end["time"]  # the victim was gone before it started
    assert of(evs, "arrival", task="todo/urgent.sh")
    done = q.root / "finished/todo/rigid.sh"
    rec = find_logbook(done, done.stat().st_ino, q.packed)
    assert rec is not None and rec.attempts == 0  # a preemption is never a failure


MALLEABLE = """
    echo "start $METAQ_ATTEMPT $METAQ_RESUME $METAQ_NNODES" >> {out}
    trap 'echo "resize $(paste -sd, "$METAQ_RESIZE_FILE")" >> {out}; {ack}' USR2
    # the resize signal goes to the whole process group and may kill the sleep: its
    # status must not become the loop's, and so the task's
    while [ ! -e {stop} ]; do sleep 0.05 || :; done
"""


def test_spaa_shrinks_in_place_then_expands_back(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    out, stop = tmp_path / "m.out", tmp_path / "stop"
    task(q, "mall.sh", MALLEABLE.format(out=out, stop=stop,
                                        ack='touch "$METAQ_RESIZE_FILE.ack"'),
         TYPE="malleable", NODES=4, MIN_NODES=1, RESIZE="in-place USR2")

    def script() -> None:
        wait_until(lambda: out.exists())
        task(q, "urgent.sh", "sleep 1", TYPE="ondemand", NODES=2, MIN_WC_TIME="10s")
        wait_until(lambda: out.read_text().count("resize") >= 2)
        stop.touch()

    _in_background(script)
    runner(q, nodes=4, scheduler="N&SPAA").run()
    lines = out.read_text().splitlines()
    assert lines == ["start 1 0 4", "resize local0,local1", "resize local0,local1,local2,local3"]
    evs = events(q)
    shrink = of(evs, "shrink", task="todo/mall.sh")[0]
    assert (shrink["mode"], shrink["hosts"], shrink["for_task"]) == (
        "in-place", ["local0", "local1"], "todo/urgent.sh")
    expand = of(evs, "expand", task="todo/mall.sh")[0]
    assert (expand["mode"], len(expand["hosts"])) == ("in-place", 4)
    urgent = of(evs, "start", task="todo/urgent.sh")[0]
    assert urgent["hosts"] == ["local2", "local3"] and urgent["lenders"] == ["todo/mall.sh"]
    assert where(q, "mall.sh") == "finished" and where(q, "urgent.sh") == "finished"
    assert len(of(evs, "start", task="todo/mall.sh")) == 1  # never restarted
    # A task resized in place has a hostfile of its own, rewritten at each resize.
    [hostfile] = q.root.glob("jobs/*/runs/todo/mall.sh/hostfile")
    assert hostfile.read_text().split() == ["local0", "local1", "local2", "local3"]
    end = of(evs, "end", task="todo/mall.sh")[0]
    # node-seconds follow the sizes: less than 4 nodes for the whole run
    assert end["node_seconds"] < 4 * end["seconds"] - 0.5


def test_a_task_that_does_not_confirm_is_restarted_at_its_new_size(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    out, stop = tmp_path / "m.out", tmp_path / "stop"
    task(q, "mall.sh", MALLEABLE.format(out=out, stop=stop, ack=":"),
         TYPE="malleable", NODES=4, MIN_NODES=1, RESIZE="in-place USR2", SIGNAL="TERM@1")

    def script() -> None:
        wait_until(lambda: out.exists())
        task(q, "urgent.sh", "sleep 1", TYPE="ondemand", NODES=2, MIN_WC_TIME="10s")
        wait_until(lambda: "start 2 1 2" in out.read_text())
        stop.touch()

    _in_background(script)
    runner(q, nodes=4, scheduler="N&SPAA").run()
    lines = out.read_text().splitlines()
    assert lines[:3] == ["start 1 0 4", "resize local0,local1", "start 2 1 2"]
    evs = events(q)
    modes = [e["mode"] for e in of(evs, "shrink", task="todo/mall.sh")]
    assert modes == ["in-place", "fallback-restart"]
    urgent = of(evs, "start", task="todo/urgent.sh")[0]
    first_end = of(evs, "end", task="todo/mall.sh")[0]
    assert first_end["outcome"] == "requeued"
    assert urgent["time"] >= first_end["time"]  # it waited for the old process to go
    assert where(q, "mall.sh") == "finished"


def test_a_checkpoint_is_noticed(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    task(q, "cp.sh", f"sleep 0.2; {sys.executable} -m metaq_py checkpoint; sleep 0.5",
         CHECKPOINT="1m 1s")
    runner(q, nodes=1).run()
    assert of(events(q), "checkpoint", task="todo/cp.sh")


def test_an_announced_task_redeems_its_notice(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    now = time.time()
    write_notice(q.root, name="obs", nodes=1, arrival=now + 1.0, walltime=60, now=now)

    def arrive() -> None:
        wait_until(lambda: bool(of(events(q), "reserve")))
        task(q, "alert.sh", "true", TYPE="ondemand", NOTICE="obs", MIN_WC_TIME="10s")

    _in_background(arrive)
    runner(q, nodes=2, scheduler="CUA&SPAA").run()
    evs = events(q)
    start = of(evs, "start", task="todo/alert.sh")[0]
    assert start["notice"] == "obs" and start["instant"] is True
    assert [e["reason"] for e in of(evs, "release", notice="obs")] == ["redeemed"]
    assert where(q, "alert.sh") == "finished"
