"""The runner's decision loop on a fake clock: real queues on disk, stand-in processes, and
time that jumps from one happening to the next (see ``tests/runner/fakes.py``). Nothing here
sleeps or polls, and every time asserted is exact."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

from metaq_py.batch import BatchOverrides, detect_batch
from metaq_py.clock import Clock
from metaq_py.queue.notices import write_notice
from metaq_py.queue.store import Queue
from metaq_py.runner.loop import Runner
from tests.runner.fakes import START, Behaviour, World
from tests.runner_helpers import events, make_queue, of, task, where


def _submit_in_order(q: Queue, *paths: Path) -> None:
    for i, path in enumerate(paths):
        os.utime(path, (1000 + i, 1000 + i))


def _at(event: dict) -> float:
    """When ``event`` happened, in seconds of fake time (rounded off float noise)."""
    return round(event["time"] - START, 6)


def _times(evs: list[dict], kind: str) -> dict[str, float]:
    return {e["task"]: _at(e) for e in of(evs, kind)}


def test_easy_backfills_behind_a_reservation_at_exact_times(tmp_path: Path) -> None:
    """4 nodes: a (2 nodes, 10 s) and b (2 nodes, 5 s) start at once; c (4 nodes) must wait
    for a, which EASY reserves for; d (1 node, 4 s, behind c) fits before the reservation
    when b ends, and is backfilled then; c starts the moment a ends."""
    q = make_queue(tmp_path / "q")
    paths = [task(q, "a.sh", "", NODES=2, MIN_WC_TIME="10s"),
             task(q, "b.sh", "", NODES=2, MIN_WC_TIME="5s"),
             task(q, "c.sh", "", NODES=4, MIN_WC_TIME="3s"),
             task(q, "d.sh", "", NODES=1, MIN_WC_TIME="4s")]
    _submit_in_order(q, *paths)
    world = World({"todo/a.sh": Behaviour(10), "todo/b.sh": Behaviour(5),
                   "todo/c.sh": Behaviour(3), "todo/d.sh": Behaviour(4)})
    assert world.runner(q, nodes=4).run() == 0
    evs = events(q)
    assert _times(evs, "start") == {"todo/a.sh": 0, "todo/b.sh": 0, "todo/d.sh": 5,
                                    "todo/c.sh": 10}
    assert _times(evs, "end") == {"todo/b.sh": 5, "todo/d.sh": 9, "todo/a.sh": 10,
                                  "todo/c.sh": 13}
    assert all(where(q, f"{n}.sh") == "finished" for n in "abcd")
    stop = of(evs, "runner-stop")[0]
    assert (_at(stop), stop["reason"]) == (13, "nothing left to run")


def test_a_failure_is_retried_at_once_on_the_same_hosts(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    task(q, "flaky.sh", "", RETRIES=1, MIN_WC_TIME="2s")
    world = World({"todo/flaky.sh": Behaviour(2, exit_code=3)})
    world.runner(q, nodes=1).run()
    evs = events(q)
    ends = of(evs, "end", task="todo/flaky.sh")
    assert [(_at(e), e["outcome"], e["exit_code"]) for e in ends] == [
        (2, "retry", 3), (4, "failed", 3)]
    assert [e["attempt"] for e in of(evs, "start")] == [1, 2]
    assert where(q, "flaky.sh") == "failed"


def test_concurrency_cap_and_launch_pause(tmp_path: Path) -> None:
    """At most 2 tasks at once, one launch per 0.25 s: each start is at the later of a free
    slot and the pause after the last launch."""
    q = make_queue(tmp_path / "q")
    _submit_in_order(q, *(task(q, f"t{i}.sh", "") for i in range(5)))
    world = World({f"todo/t{i}.sh": Behaviour(0.4) for i in range(5)})
    world.runner(q, nodes=4, max_tasks=2, launch_pause=0.25).run()
    evs = events(q)
    starts = sorted(_times(evs, "start").values())
    assert starts == [0, 0.25, 0.5, 0.75, 1.0]
    assert min(b - a for a, b in itertools.pairwise(starts)) == 0.25
    running, peak = 0, 0
    for e in evs:
        running += {"start": 1, "end": -1}.get(e["event"], 0)
        peak = max(peak, running)
    assert peak == 2


def test_the_wall_clock_is_a_resource_and_the_runner_drains(tmp_path: Path) -> None:
    """A 10 s task cannot fit in a 6 s allocation: it never starts, and the runner leaves as
    soon as the task that fits is done, instead of waiting for the end."""
    q = make_queue(tmp_path / "q")
    task(q, "long.sh", "", MIN_WC_TIME="10s", PRIORITY=5)
    task(q, "short.sh", "", MIN_WC_TIME="1s")
    world = World({"todo/short.sh": Behaviour(0.2)})
    world.runner(q, end=6.0, grace=1.0, margin=0.5).run()
    evs = events(q)
    assert where(q, "short.sh") == "finished"
    assert where(q, "long.sh") == "pending"
    assert not of(evs, "start", task="todo/long.sh")
    stop = of(evs, "runner-stop")[0]
    assert _at(stop) == 0.2  # it drained and left at once
    assert "more time" in stop["reason"]


def test_linger_waits_for_new_work_until_the_wall_clock_ends(tmp_path: Path) -> None:
    """Lingering, the runner takes work submitted later, and stops at its own deadline: the
    end (4 s) less the margin (0.5 s) less the grace period (0.5 s)."""
    q = make_queue(tmp_path / "q")
    task(q, "first.sh", "", MIN_WC_TIME="1s")
    world = World({"todo/first.sh": Behaviour(0.1), "todo/late.sh": Behaviour(0.1)})
    world.at(START + 1.0, lambda: task(q, "late.sh", "", MIN_WC_TIME="1s"))
    world.runner(q, end=4.0, linger=True, grace=0.5, margin=0.5).run()
    evs = events(q)
    assert where(q, "late.sh") == "finished"
    assert _times(evs, "start")["todo/late.sh"] == 1.0
    stop = of(evs, "runner-stop")[0]
    assert _at(stop) == 3.0
    assert "allocation ends" in stop["reason"]


def test_a_task_ignoring_its_stop_signal_is_killed_after_the_grace_period(
        tmp_path: Path) -> None:
    """At the end of the allocation (3.5 s - 0.5 s margin - 1 s grace) the task is told to
    stop; it ignores that, and is killed exactly one grace period later, then requeued."""
    q = make_queue(tmp_path / "q")
    task(q, "stubborn.sh", "", MIN_WC_TIME="1s")
    world = World({"todo/stubborn.sh": Behaviour(60, on_stop=None)})
    world.runner(q, end=3.5, grace=1.0, margin=0.5).run()
    evs = events(q)
    end = of(evs, "end", task="todo/stubborn.sh")[0]
    assert (_at(end), end["outcome"], end["signal"]) == (3.0, "requeued", "SIGKILL")
    [process] = world.processes
    assert [s.name for s in process.signals] == ["SIGTERM"]
    assert where(q, "stubborn.sh") == "pending"


def test_paa_preempts_and_the_on_demand_task_starts_when_its_victim_is_gone(
        tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    task(q, "rigid.sh", "", NODES=2, CHECKPOINT="10m 1s")
    world = World({"todo/rigid.sh": Behaviour(30, on_stop=0.5),
                   "todo/urgent.sh": Behaviour(2)})
    world.at(START + 5, lambda: task(q, "urgent.sh", "", TYPE="ondemand", NODES=2,
                                     MIN_WC_TIME="10s"))
    world.runner(q, nodes=2, scheduler="N&PAA").run()
    evs = events(q)
    pre = of(evs, "preempt", task="todo/rigid.sh")
    assert [(_at(e), e["for_task"]) for e in pre] == [(5, "todo/urgent.sh")]
    assert _at(of(evs, "arrival", task="todo/urgent.sh")[0]) == 5
    rigid = [(_at(e), e["outcome"]) for e in of(evs, "end", task="todo/rigid.sh")]
    assert rigid == [(5.5, "preempted"), (37.5, "finished")]
    urgent = of(evs, "start", task="todo/urgent.sh")[0]
    assert _at(urgent) == 5.5  # the moment its victim was gone, not before
    assert urgent["instant"] is True and urgent["lenders"] == ["todo/rigid.sh"]
    again = of(evs, "start", task="todo/rigid.sh")[1]
    assert (_at(again), again["attempt"], again["resume"]) == (7.5, 2, True)


def test_an_unconfirmed_shrink_falls_back_to_a_restart_after_the_grace_period(
        tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    task(q, "mall.sh", "", TYPE="malleable", NODES=4, MIN_NODES=1, RESIZE="in-place USR2",
         SIGNAL="TERM@1")
    world = World({"todo/mall.sh": Behaviour(20, on_stop=0.25, confirm=None),
                   "todo/urgent.sh": Behaviour(1)})
    world.at(START + 2, lambda: task(q, "urgent.sh", "", TYPE="ondemand", NODES=2,
                                     MIN_WC_TIME="10s"))
    world.runner(q, nodes=4, scheduler="N&SPAA").run()
    evs = events(q)
    shrinks = [(_at(e), e["mode"]) for e in of(evs, "shrink", task="todo/mall.sh")]
    assert shrinks == [(2, "in-place"), (3, "fallback-restart")]
    first_end = of(evs, "end", task="todo/mall.sh")[0]
    assert (_at(first_end), first_end["outcome"]) == (3.25, "requeued")
    urgent = of(evs, "start", task="todo/urgent.sh")[0]
    assert _at(urgent) == 3.25 and urgent["hosts"] == ["local2", "local3"]
    restarted = of(evs, "start", task="todo/mall.sh")[1]
    assert (_at(restarted), len(restarted["hosts"])) == (3.25, 2)
    assert where(q, "mall.sh") == "finished" and where(q, "urgent.sh") == "finished"


def test_cua_reserves_for_a_notice_and_releases_it_when_nothing_comes(tmp_path: Path) -> None:
    """A notice of 2 nodes arriving at 1 s: CUA reserves them, and with nothing redeeming it,
    releases them ``release_after`` (1 s) after the announced arrival, at exactly 2 s."""
    q = make_queue(tmp_path / "q")
    task(q, "short.sh", "", MIN_WC_TIME="1s")
    write_notice(q.root, name="obs", nodes=2, arrival=START + 1.0, walltime=60, now=START)
    world = World({"todo/short.sh": Behaviour(0.5)})
    world.runner(q, nodes=2, scheduler="CUA&PAA", release_after=1.0).run()
    evs = events(q)
    reserved = [h for e in of(evs, "reserve", notice="obs") for h in e["hosts"]]
    assert sorted(reserved) == ["local0", "local1"]
    release = of(evs, "release", notice="obs")
    assert [(_at(e), e["reason"]) for e in release] == [(2.0, "expired")]
    assert where(q, "short.sh") == "finished"
    assert _at(of(evs, "runner-stop")[0]) == 2.0


def test_the_runner_and_its_queue_keep_one_clock(tmp_path: Path) -> None:
    """A runner given a clock other than its queue's would stamp claims and events in two
    times at once: it is refused."""
    q = make_queue(tmp_path / "q")
    batch = detect_batch(overrides=BatchOverrides(system="local", nnodes=1), env={})
    with pytest.raises(ValueError, match="clock must be its queue's"):
        Runner(q, batch, clock=Clock(START))
    q = Queue(q.root, clock=Clock(START))
    assert Runner(q, batch).clock is q.clock


def _campaign_queue(root: Path, contract_time: str = "20s") -> tuple[Queue, object]:
    """prop.sh claimed by another job (running elsewhere), and contract.sh AFTER it, alone
    in the queue's task folders; leases long enough that no heartbeat is needed."""
    from tests.runner_helpers import SETTINGS
    q = make_queue(root, SETTINGS.replace("heartbeat: 1s\nstale_after: 3s",
                                          "heartbeat: 30s\nstale_after: 10m"))
    task(q, "prop.sh", "", MIN_WC_TIME="10s")
    task(q, "contract.sh", "", AFTER="todo/prop.sh", MIN_WC_TIME=contract_time)
    q = Queue(root, clock=Clock(START))
    [prop] = [t for t in q.scan().tasks if t.id == "todo/prop.sh"]
    claim = q.claim(prop, machine="elsewhere", jobid="41")
    assert claim is not None
    return q, claim


def test_a_runner_stays_for_a_dependency_running_elsewhere(tmp_path: Path) -> None:
    """contract.sh waits for prop.sh, which another allocation runs and finishes at 5 s: the
    runner has nothing else to do but stays, and starts contract.sh the moment prop.sh has
    finished, instead of stopping at once with nothing left to run."""
    q, claim = _campaign_queue(tmp_path / "q")
    world = World({"todo/contract.sh": Behaviour(2)})
    elsewhere = Queue(q.root, clock=world.clock)
    world.at(START + 5, lambda: elsewhere.finish(claim, exit_code=0))
    said: list[str] = []
    world.runner(q, end=100.0, said=said).run()
    evs = events(q)
    assert _times(evs, "start") == {"todo/contract.sh": 5}
    assert where(q, "contract.sh") == "finished"
    assert "staying for todo/contract.sh: it waits for its dependency todo/prop.sh, which is " \
           "running" in said
    stop = of(evs, "runner-stop")[0]
    assert (_at(stop), stop["reason"]) == (7, "nothing left to run")


def test_a_runner_stays_only_while_the_dependent_could_still_finish(tmp_path: Path) -> None:
    """prop.sh never finishes: the runner looks again every 10 s (nothing wakes it: a task
    ends elsewhere without a queue event) and leaves at the first look where contract.sh
    (20 s) no longer fits before its stop time, 100 - 0.5 margin - 1 grace = 98.5 s."""
    q, _ = _campaign_queue(tmp_path / "q")
    world = World()
    runner = world.runner(q, end=100.0)
    runner.run()
    stop = of(events(q), "runner-stop")[0]
    assert _at(stop) == 80  # at 70, 28.5 s were left; at 80, 18.5 s
    assert stop["reason"] == ("nothing left to run here: 1 waiting task waits for "
                              "dependencies that cannot finish in time")
    assert runner.passes == 9  # one at 0, then one per 10 s: no busy wait
    assert where(q, "contract.sh") == "pending"


@pytest.mark.parametrize("case", ["held", "too long", "no end"])
def test_a_runner_does_not_stay_for_what_cannot_come(tmp_path: Path, case: str) -> None:
    """It leaves at once when the dependency is held (nothing says it will ever run), when
    the dependent could not finish in the time left, and, in an allocation without an end,
    when the dependency only waits (it stays forever only for a running one)."""
    q, claim = _campaign_queue(tmp_path / "q", "2m" if case == "too long" else "20s")
    if case == "held":
        q.requeue(claim, reason="test", count_attempt=False)
        (q.root / "hold" / "todo").mkdir(parents=True, exist_ok=True)
        (q.root / "todo" / "prop.sh").rename(q.root / "hold" / "todo" / "prop.sh")
    if case == "no end":
        q.requeue(claim, reason="test", count_attempt=False)
        task(q, "prop.sh", "", MIN_WC_TIME="10s", NODES=64)  # waits, and cannot run here
    world = World()
    world.runner(q, end=None if case == "no end" else 100.0).run()
    evs = events(q)
    assert not of(evs, "start")
    assert _at(of(evs, "runner-stop")[0]) == 0
