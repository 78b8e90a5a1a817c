"""Replaying a runner's events into what its allocation does now, and deciding which runners
are live (stopped, past their end, reclaimed as dead, or with stale leases are not)."""

from __future__ import annotations

from pathlib import Path

from metaq_py.queue.lease import Claim
from metaq_py.report.allocations import dead_jobs, job_view, live_jobs
from metaq_py.report.joblog import JobLog
from tests.job_logs import end, runner_start, start

T0 = 1_750_000_000.0


def _log(jobid: str, events: list[dict]) -> JobLog:
    return JobLog(jobid, Path(f"jobs/{jobid}/events.jsonl"), tuple(events))


def _claim(jobid: str, heartbeat: float) -> Claim:
    return Claim(machine="m", jobid=jobid, folder="todo", relpath="x.sh", path=Path("x"),
                 host="h", pid=1, start=heartbeat, heartbeat=heartbeat, attempts=0,
                 submit=heartbeat, spec=None)


def test_shrink_lends_hosts_and_expand_gives_them_back() -> None:
    events = [runner_start(T0, ["a", "b", "c", "d"], end=T0 + 3600, gpus_per_node=2),
              start(T0 + 1, "todo/m.sh", ["a", "b", "c"], kind="malleable", gpus=3),
              {"time": T0 + 2, "event": "shrink", "task": "todo/m.sh", "hosts": ["a"],
               "for_task": "todo/od.sh", "mode": "in-place"}]
    v = job_view(_log("1", events))
    assert v is not None and v.nodes == 4 and v.gpus == 8 and v.gpus_busy() == 3
    m = v.running["todo/m.sh"]
    assert m.hosts == ("a",) and m.lent == {"todo/od.sh": ("b", "c")}
    assert v.idle() == ["b", "c", "d"]
    events.append({"time": T0 + 3, "event": "expand", "task": "todo/m.sh",
                   "hosts": ["a", "b"], "for_task": None, "mode": "in-place"})
    m = job_view(_log("1", events)).running["todo/m.sh"]
    assert m.hosts == ("a", "b") and m.lent == {"todo/od.sh": ("c",)}


def test_a_loan_outlives_a_restart_for_the_resize() -> None:
    # RESIZE restart: the shrink, the process ended (requeued) and started again smaller.
    events = [runner_start(T0, ["a", "b", "c"], end=T0 + 3600),
              start(T0 + 1, "todo/m.sh", ["a", "b", "c"], kind="malleable"),
              {"time": T0 + 2, "event": "shrink", "task": "todo/m.sh", "hosts": ["a"],
               "for_task": "todo/od.sh", "mode": "restart"},
              end(T0 + 3, "todo/m.sh", ["a", "b", "c"], outcome="requeued", seconds=2,
                  kind="malleable"),
              start(T0 + 3, "todo/m.sh", ["a"], kind="malleable"),
              start(T0 + 4, "todo/od.sh", ["b", "c"], kind="ondemand")]
    m = job_view(_log("1", events)).running["todo/m.sh"]
    assert m.hosts == ("a",) and m.lent == {"todo/od.sh": ("b", "c")}
    events += [end(T0 + 9, "todo/od.sh", ["b", "c"], seconds=5, kind="ondemand"),
               {"time": T0 + 10, "event": "expand", "task": "todo/m.sh",
                "hosts": ["a", "b", "c"], "for_task": None, "mode": "restart"},
               end(T0 + 11, "todo/m.sh", ["a"], outcome="requeued", seconds=8,
                   kind="malleable"),
               start(T0 + 11, "todo/m.sh", ["a", "b", "c"], kind="malleable")]
    m = job_view(_log("1", events)).running["todo/m.sh"]
    assert m.hosts == ("a", "b", "c") and m.lent == {}
    # A task requeued at the end of the allocation and started by a later runner owes nothing.
    events += [{"time": T0 + 12, "event": "shrink", "task": "todo/m.sh", "hosts": ["a"],
                "for_task": "todo/od2.sh", "mode": "restart"},
               end(T0 + 13, "todo/m.sh", ["a", "b", "c"], outcome="requeued", seconds=2,
                   kind="malleable"),
               runner_start(T0 + 20, ["a", "b", "c"], end=T0 + 3600),
               start(T0 + 21, "todo/m.sh", ["a", "b", "c"], kind="malleable")]
    assert job_view(_log("1", events)).running["todo/m.sh"].lent == {}


def test_reservations_add_up_and_end_on_release_or_redemption() -> None:
    events = [runner_start(T0, ["a", "b", "c"], end=None),
              {"time": T0 + 1, "event": "reserve", "notice": "n", "hosts": ["a"]},
              {"time": T0 + 2, "event": "reserve", "notice": "n", "hosts": ["b", "a"]},
              {"time": T0 + 3, "event": "reserve", "notice": "k", "hosts": ["c"]},
              start(T0 + 4, "todo/short.sh", ["b"])]
    v = job_view(_log("1", events))
    assert v.reserved == {"n": ("a", "b"), "k": ("c",)}
    assert v.reserved_idle("n") == ["a"] and v.idle() == []
    events += [{"time": T0 + 5, "event": "release", "notice": "k", "reason": "expired"},
               end(T0 + 6, "todo/short.sh", ["b"], seconds=2),
               start(T0 + 7, "todo/od.sh", ["a", "b"], kind="ondemand", notice="n")]
    v = job_view(_log("1", events))
    assert v.reserved == {} and v.idle() == ["c"]
    assert v.time_left(T0) == float("inf")


def test_a_log_without_runner_start_is_not_a_runner() -> None:
    assert job_view(_log("1", [start(T0, "todo/x.sh", ["a"])])) is None


def test_which_runners_are_live() -> None:
    now = T0 + 100
    logs = [
        _log("live", [runner_start(T0, ["a"], end=now + 60)]),
        _log("stopped", [runner_start(T0, ["a"], end=now + 60),
                         {"time": T0 + 1, "event": "runner-stop", "reason": "done"}]),
        _log("ended", [runner_start(T0, ["a"], end=now - 1)]),
        _log("dead", [runner_start(T0, ["a"], end=None)]),
        _log("stale", [runner_start(T0, ["a"], end=None)]),
        _log("reclaimer", [runner_start(T0, ["b"], end=None),
                           {"time": T0 + 2, "event": "reclaim", "task": "todo/x.sh",
                            "jobid": "dead", "reason": "its job is dead"}]),
    ]
    claims = [_claim("stale", now - 700), _claim("live", now - 5)]
    assert dead_jobs(logs) == {"dead"}
    got = live_jobs(logs, claims, now=now, stale_after=600)
    assert [v.jobid for v in got] == ["live", "reclaimer"]
    # a restarted job (second runner-start) is live again, with a fresh state
    again = _log("stopped", [*logs[1].events, runner_start(T0 + 50, ["z"], end=None)])
    (v,) = live_jobs([again], [], now=now, stale_after=600)
    assert v.hosts == ("z",) and v.stopped is None
