"""Follow-ons under a real runner and its launch agent (metaq_py.runner.tasks.follow_ons):
short tasks start as the task before them ends, each once, never two on a host (or a core) at
a time; a follow-on held too long goes back without an attempt counted and runs later as a
first attempt; a task stopped takes back its follow-ons before they start, and a runner
stopped amid them loses and repeats nothing; on-demand work that arrives is not kept waiting
by them; and long tasks get none."""

from __future__ import annotations

import itertools
import signal
import threading
from collections import Counter
from pathlib import Path

from metaq_py.launch.binding import machine_cpus
from metaq_py.queue.logbook import Logbook, read_logbook
from metaq_py.queue.store import Queue
from metaq_py.runner.wakeups import Wakeup, What
from tests.runner_helpers import (
    assert_no_shared_host,
    events,
    make_queue,
    of,
    runner,
    task,
    wait_until,
)

_RECORD = ('echo "$METAQ_NODELIST $(date +%s.%N) $METAQ_ATTEMPT/$METAQ_RESUME" '
           '>> {out}/$(basename "$METAQ_TASK").ran\n')
"""A task body's line that records where, when and as which attempt the task ran (a line per
run)."""


def _tasks(q: Queue, out: Path, names: list[str], body: str = "") -> None:
    out.mkdir(exist_ok=True)
    for name in names:
        task(q, name, _RECORD.format(out=out) + body)


def _behind_slow_tasks(q: Queue, out: Path, slow_for: float
                       ) -> tuple[list[str], list[str], list[str]]:
    """Four quick tasks (after which follow-ons are made), two that run ``slow_for`` seconds,
    and four quick ones to follow them."""
    quick = [f"a{i}.sh" for i in range(4)]
    slow = [f"b{i}.sh" for i in range(2)]
    after = [f"c{i}.sh" for i in range(4)]
    _tasks(q, out, quick)
    _tasks(q, out, slow, f"sleep {slow_for}\n")
    _tasks(q, out, after)
    return quick, slow, after


def _runs(out: Path) -> dict[str, list[tuple[str, float, str]]]:
    """Each task's runs, as (host, time, attempt/resume) from its own record."""
    runs = {}
    for f in out.glob("*.ran"):
        runs[f.name.removesuffix(".ran")] = [
            (host, float(at), attempt) for host, at, attempt in
            (line.split() for line in f.read_text().splitlines())]
    return runs


def _book(q: Queue, where: str) -> Logbook | None:
    """The logbook of the task at ``where`` (a path in the queue)."""
    path = q.root / where
    return read_logbook(path, path.stat().st_ino)


def _no_attempt_spent(q: Queue, folder: str, names: list[str]) -> bool:
    """Whether none of the tasks ``names``, now in ``folder``, has an attempt counted."""
    return all((book := _book(q, f"{folder}/{name}")) is None or book.attempts == 0
               for name in names)


def _assert_each_ran_once_and_finished(q: Queue, out: Path, names: list[str]) -> None:
    runs = _runs(out)
    assert sorted(runs) == sorted(names)
    assert all(len(r) == 1 for r in runs.values()), {k: v for k, v in runs.items() if len(v) > 1}
    finished = sorted(p.name for p in (q.root / "finished/todo").glob("*.sh"))
    assert finished == sorted(names)
    evs = events(q)
    starts = Counter(e["task"] for e in of(evs, "start"))
    assert set(starts.values()) == {1} and len(starts) == len(names)
    assert_no_shared_host(evs)


def test_short_tasks_start_as_follow_ons_each_once_and_one_host_at_a_time(
        tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    out = tmp_path / "out"
    names = [f"t{i:03d}.sh" for i in range(80)]
    _tasks(q, out, names)
    r = runner(q, nodes=2)
    assert r.run() == 0
    assert r.follow_ons.made >= 40  # most starts, once four short ends were seen
    assert r.follow_ons.made - r.follow_ons.given_back >= 40
    _assert_each_ran_once_and_finished(q, out, names)
    # Physically too: on each host, a task's record comes after the one before it ended.
    by_host: dict[str, list[float]] = {}
    for runs in _runs(out).values():
        for host, at, _ in runs:
            by_host.setdefault(host, []).append(at)
    assert sorted(by_host) == sorted(r.ctx.alloc.nodes)
    # Every task's records are in start order per host with none at the same moment.
    for times in by_host.values():
        assert all(a < b for a, b in itertools.pairwise(sorted(times)))


def test_a_follow_on_held_too_long_goes_back_uncounted_and_runs_later(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    out = tmp_path / "out"
    # Longer than a follow-on's hold, with room for a slow machine's moment to make it.
    quick, slow, after = _behind_slow_tasks(q, out, 2.5)
    r = runner(q, nodes=2)
    assert r.run() == 0
    assert r.follow_ons.given_back >= 2  # held behind the slow ones, and withdrawn
    _assert_each_ran_once_and_finished(q, out, quick + slow + after)
    assert _no_attempt_spent(q, "finished/todo", after)
    # A follow-on given back never ran: its start is a first attempt, not a resumption.
    assert {run[2] for runs in _runs(out).values() for run in runs} == {"1/0"}
    books = [_book(q, f"finished/todo/{name}") for name in after]
    assert any(h.get("event") == "returned" for b in books if b for h in b.history)


def test_a_runner_stopped_amid_follow_ons_loses_and_repeats_no_task(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    out = tmp_path / "out"
    names = [f"t{i:03d}.sh" for i in range(300)]
    _tasks(q, out, names, "sleep 0.05\n")
    r = runner(q, nodes=2)
    ran = threading.Thread(target=r.run)
    ran.start()
    assert wait_until(lambda: r.follow_ons.made >= 10)
    r.wakeups.inbox.put(Wakeup(What.SIGNAL, signum=signal.SIGTERM))
    ran.join(30)
    assert not ran.is_alive() and r.stopping is not None
    runs = _runs(out)
    assert all(len(v) == 1 for v in runs.values())
    finished = {p.name for p in (q.root / "finished/todo").glob("*.sh")}
    waiting = {p.name for p in (q.root / "todo").glob("*.sh")}
    # Each task is exactly once either finished or back in the queue: none claimed, none lost.
    assert finished | waiting == set(names) and not finished & waiting
    assert not list((q.root / "working").rglob("*.sh"))
    assert set(runs) >= finished
    assert len(finished) < len(names)  # it did stop early
    # A task stopped while it ran is back, resumable, with no attempt spent.
    assert _no_attempt_spent(q, "todo", sorted(waiting))


def test_on_demand_work_does_not_wait_for_the_follow_ons(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    out = tmp_path / "out"
    names = [f"t{i:03d}.sh" for i in range(400)]
    _tasks(q, out, names, "sleep 0.05\n")
    r = runner(q, nodes=2, mechanism="N&PAA")
    ran = threading.Thread(target=r.run)
    ran.start()
    assert wait_until(lambda: r.follow_ons.made >= 10)
    task(q, "urgent.sh", _RECORD.format(out=out), folder="todo", TYPE="ondemand", NODES=2,
         MIN_WC_TIME="10s")
    ran.join(120)
    assert not ran.is_alive()
    evs = events(q)
    arrival = next(e for e in of(evs, "arrival") if e["task"] == "todo/urgent.sh")
    start = next(e for e in of(evs, "start") if e["task"] == "todo/urgent.sh")
    # The follow-ons held are withdrawn first, and the tasks running are preempted for it.
    assert start["time"] - arrival["time"] < 1.0
    assert start["lenders"] and all(e["for_task"] == "todo/urgent.sh"
                                    for e in of(evs, "preempt"))
    preempted = Counter(e["task"].removeprefix("todo/") for e in of(evs, "preempt"))
    runs = _runs(out)
    assert sorted(runs) == sorted([*names, "urgent.sh"])
    # A preempted task runs again (to resume); every other task once.
    assert {k: len(v) for k, v in runs.items() if len(v) != 1} == \
        {k: n + 1 for k, n in preempted.items()}
    assert sorted(p.name for p in (q.root / "finished/todo").glob("*.sh")) == sorted(runs)
    assert_no_shared_host(evs)


def test_long_tasks_get_no_follow_ons(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    out = tmp_path / "out"
    names = [f"t{i}.sh" for i in range(6)]
    _tasks(q, out, names, "sleep 1.1\n")
    r = runner(q, nodes=3)
    assert r.run() == 0
    assert r.follow_ons.made == 0
    _assert_each_ran_once_and_finished(q, out, names)


def test_a_task_stopped_takes_back_its_follow_ons_before_they_start(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    out = tmp_path / "out"
    quick, slow, held = _behind_slow_tasks(q, out, 5)
    r = runner(q, nodes=2)
    ran = threading.Thread(target=r.run)
    ran.start()
    assert wait_until(lambda: r.follow_ons.made >= 4, timeout=5)  # c0-c3, two per slow task
    r.wakeups.inbox.put(Wakeup(What.SIGNAL, signum=signal.SIGTERM))
    ran.join(30)
    assert not ran.is_alive()
    assert r.follow_ons.given_back == 4
    runs = _runs(out)
    assert sorted(runs) == sorted(quick + slow)  # no follow-on ever started
    assert sorted(p.name for p in (q.root / "todo").glob("*.sh")) == sorted(slow + held)
    assert _no_attempt_spent(q, "todo", held)


def test_shares_follow_on_the_cores_the_share_before_them_frees(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    out = tmp_path / "out"
    out.mkdir()
    names = [f"s{i:03d}.sh" for i in range(60)]
    for name in names:
        # Pinned just after it starts: the affinity is read once it is one CPU (or after 4 s,
        # when the test sees it was never pinned).
        task(q, name, 'i=0; while grep Cpus_allowed_list /proc/$$/status | cut -f2 | '
             'grep -q "[,-]" && [ $i -lt 400 ]; do sleep 0.01; i=$((i+1)); done\n'
             'echo "$METAQ_CPUS $(date +%s.%N) '
             '$(grep Cpus_allowed_list /proc/$$/status | cut -f2)" '
             f'>> {out}/$(basename "$METAQ_TASK").ran\n', CPUS=1)
    r = runner(q, nodes=1, cores=2)
    assert r.run() == 0
    assert r.follow_ons.made >= 20
    runs = {f.name: f.read_text().split() for f in out.glob("*.ran")}
    assert len(runs) == 60 and all(len(v) == 3 for v in runs.values())  # each once
    # Each share ran pinned to the core it was given (the core of the share before it, for a
    # follow-on), and no core ran two shares at a time.
    by_core: dict[str, list[float]] = {}
    cpus = machine_cpus()
    for core, at, pinned in runs.values():
        assert pinned == str(cpus[int(core)])
        by_core.setdefault(core, []).append(float(at))
    assert sorted(by_core) == ["0", "1"]
    evs = events(q)
    starts = Counter(e["task"] for e in of(evs, "start"))
    assert set(starts.values()) == {1} and len(starts) == 60
    spans: dict[int, list[tuple[float, float]]] = {}
    ends = {e["task"]: e["time"] for e in of(evs, "end")}
    for e in of(evs, "start"):
        for core in e["cores"]:
            spans.setdefault(core, []).append((e["time"], ends[e["task"]]))
    for core_spans in spans.values():
        core_spans.sort()
        assert all(e1 <= s2 for (_, e1), (s2, _) in itertools.pairwise(core_spans))
