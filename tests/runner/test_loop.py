"""The live loop on a local pretend cluster, with real task processes: exit codes, retries,
placement, the wall clock, the protections for the batch node, lingering."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from metaq_py.queue.admin import QueueAdmin
from metaq_py.queue.logbook import find_logbook
from metaq_py.queue.store import Queue
from tests.runner_helpers import (
    SETTINGS,
    assert_no_shared_host,
    events,
    make_queue,
    of,
    runner,
    task,
    where,
)


def test_exit_codes_decide_finished_or_failed(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    task(q, "ok.sh", "echo fine")
    task(q, "bad.sh", "exit 3")
    task(q, "sig.sh", "kill -9 $$")
    assert runner(q).run() == 0
    assert where(q, "ok.sh") == "finished"
    assert where(q, "bad.sh") == "failed"
    assert where(q, "sig.sh") == "failed"
    reason = (q.root / "failed/todo/bad.sh.reason").read_text()
    assert "exited with code 3" in reason
    assert "SIGKILL" in (q.root / "failed/todo/sig.sh.reason").read_text()
    evs = events(q)
    assert of(evs, "end", task="todo/ok.sh")[0]["outcome"] == "finished"
    bad = of(evs, "end", task="todo/bad.sh")[0]
    assert (bad["outcome"], bad["exit_code"], bad["signal"]) == ("failed", 3, None)
    sig = of(evs, "end", task="todo/sig.sh")[0]
    assert (sig["outcome"], sig["exit_code"], sig["signal"]) == ("failed", None, "SIGKILL")
    assert of(evs, "runner-stop")[0]["reason"] == "nothing left to run"


def test_retries_are_honoured_and_recorded(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    count = tmp_path / "count"
    task(q, "flaky.sh", f"""
        echo "$METAQ_ATTEMPT $METAQ_RESUME" >> {count}
        [ "$(wc -l < {count})" -ge 3 ]
    """, RETRIES=2)
    runner(q).run()
    assert where(q, "flaky.sh") == "finished"
    assert count.read_text().split("\n")[:3] == ["1 0", "2 0", "3 0"]
    outcomes = [e["outcome"] for e in of(events(q), "end", task="todo/flaky.sh")]
    assert outcomes == ["retry", "retry", "finished"]


def test_a_retried_task_adds_to_its_log(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    task(q, "twice.sh", 'echo "attempt $METAQ_ATTEMPT"; [ "$METAQ_ATTEMPT" -ge 2 ]', RETRIES=1)
    r = runner(q)
    r.run()
    assert where(q, "twice.sh") == "finished"
    log = q.root / "jobs" / r.jobid / "logs" / "todo" / "twice.sh.log"
    assert log.read_text().splitlines() == ["attempt 1", "attempt 2"]
    # Nothing of the runner's claims outlives it.
    assert not [p for p in (q.root / "working").rglob("*") if not p.is_dir()]
    assert not (q.root / "working" / r.machine / r.jobid).exists()


def test_retries_run_out(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    task(q, "never.sh", "exit 1", RETRIES=1)
    runner(q).run()
    assert where(q, "never.sh") == "failed"
    assert [e["outcome"] for e in of(events(q), "end")] == ["retry", "failed"]
    assert "gave up after 2 runs" in (q.root / "failed/todo/never.sh.reason").read_text()


def test_tasks_get_their_own_hosts_even_when_they_lie(tmp_path: Path) -> None:
    """Tasks say NODES 1 and then try to use every host; placement still gives each host to
    one task at a time, and the node lists handed out never overlap while both run."""
    q = make_queue(tmp_path / "q")
    for i in range(10):
        task(q, f"t{i}.sh", """
            echo "$METAQ_NODELIST" > /dev/null
            for h in local0 local1 local2 local3; do :; done   # "uses" hosts it was not given
            sleep 0.3
        """, NODES=1 + i % 3)
    runner(q, nodes=4).run()
    evs = events(q)
    assert len(of(evs, "end", outcome="finished")) == 10
    assert_no_shared_host(evs)
    for e in of(evs, "start"):
        assert len(e["hosts"]) == len(set(e["hosts"]))


def test_tasks_on_the_same_hosts_share_one_hostfile_naming_them(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    out = tmp_path / "seen"
    for i in range(6):
        task(q, f"t{i}.sh", f"""
            echo "$METAQ_NODELIST $METAQ_HOSTFILE $(paste -sd, "$METAQ_HOSTFILE")" >> {out}
        """, NODES=1 + i % 2)
    runner(q, nodes=2).run()
    seen = [line.split() for line in out.read_text().splitlines()]
    assert len(seen) == 6
    assert all(content == nodes for nodes, _file, content in seen)  # its concrete hosts
    files: dict[str, set[str]] = {}
    for nodes, file, _content in seen:
        files.setdefault(nodes, set()).add(file)
    assert all(len(names) == 1 for names in files.values())  # one file per host list...
    assert len(set().union(*files.values())) == len(files)  # ...and one list per file
    assert not list(q.root.glob("jobs/*/runs/todo/*/hostfile"))


def test_the_window_kept_between_decisions_is_the_one_worked_out_afresh(tmp_path: Path) -> None:
    """A decision reuses the last window when only its first tasks were claimed; whatever
    happened to the queue, the jobs offered are those a fresh look gives, in order."""
    q = make_queue(tmp_path / "q")
    for i in range(40):
        task(q, f"t{i:02d}.sh", "true", NODES=1 + i % 3)
    r = runner(q, nodes=4)
    offers = r.offers

    def fresh() -> list[object]:
        offers.last_window = None
        return [j.id for j in offers.waiting(1)]

    def check() -> None:
        assert [j.id for j in offers.waiting(1)] == fresh()

    fresh()
    for step in range(12):
        pending = q.pending()
        if step % 4 == 3:  # a task taken from the middle, by someone else
            q.claim(pending[len(pending) // 2], machine="other", jobid="9")
        elif step % 4 == 2:  # a new task, and one that can never run here
            task(q, f"new{step}.sh", "true", NODES=2)
            task(q, f"huge{step}.sh", "true", NODES=9)
        else:  # the usual: the first ones claimed
            for t in pending[:2]:
                q.claim(t, machine=r.machine, jobid=r.jobid)
        check()
    offers.last_window = None
    offers.waiting(1)
    assert offers.last_window is None  # a skipped task: nothing kept, every look is fresh


def test_gpu_ids_are_split_and_impossible_tasks_are_skipped_not_rejected(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    out = tmp_path / "cuda"
    task(q, "gpu.sh", f'echo "$CUDA_VISIBLE_DEVICES" > {out}', GPUS=2)
    task(q, "huge.sh", "true", NODES=8)
    task(q, "greedy.sh", "true", GPUS=9)
    r = runner(q, nodes=4, gpus=2)
    r.run()
    assert out.read_text().strip() == "0,1"
    assert where(q, "huge.sh") == "pending"
    assert where(q, "greedy.sh") == "pending"
    assert "can never run" in of(events(q), "runner-stop")[0]["reason"]


def test_defaults_protect_the_batch_node(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q", settings="folders: [todo]\n")
    r = runner(q)
    assert r.max_tasks == 64 and r.launch_pause == 0.05


def test_a_task_keeps_its_place_and_submit_time(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    path = task(q, "a.sh", "exit 1", RETRIES=1)
    submit = path.stat().st_mtime
    runner(q).run()
    failed = q.root / "failed/todo/a.sh"
    rec = find_logbook(failed, failed.stat().st_ino, q.packed)
    assert rec is not None and rec.submit == submit and rec.attempts == 2


@pytest.mark.parametrize(("order", "big_first"), [
    ("largest-first", True),
    ("submit", False),
    (None, False),  # no order key in metaq.yaml: submit order
])
def test_the_queue_order_setting_decides_which_task_starts_first(
        tmp_path: Path, order: str | None, big_first: bool) -> None:
    """On 2 nodes, two 1-node tasks submitted before a 2-node task: in submit order the small
    ones start together and the big one waits for both; largest-first starts the big one first."""
    settings = SETTINGS + (f"order: {order}\n" if order is not None else "")
    q = make_queue(tmp_path / "q", settings)
    for i, (name, nodes) in enumerate((("a.sh", 1), ("b.sh", 1), ("big.sh", 2))):
        path = task(q, name, "sleep 0.3", NODES=nodes)
        os.utime(path, (1000 + i, 1000 + i))  # submit times in this order, whatever the clock
    r = runner(q, nodes=2)
    r.run()
    log = q.root / "jobs" / r.jobid / "events.jsonl"
    evs = [json.loads(line) for line in log.read_text().splitlines()]
    start = {e["task"]: e["time"] for e in evs if e["event"] == "start"}
    end = {e["task"]: e["time"] for e in evs if e["event"] == "end"}
    assert sorted(start) == ["todo/a.sh", "todo/b.sh", "todo/big.sh"]
    assert all(e["outcome"] == "finished" for e in evs if e["event"] == "end")
    small = ("todo/a.sh", "todo/b.sh")
    if big_first:
        assert all(start[s] >= end["todo/big.sh"] for s in small)
    else:
        assert start["todo/big.sh"] >= max(end[s] for s in small)


def test_the_example_queue_runs_on_a_copy(tmp_path: Path) -> None:
    import shutil

    from tests.conftest import REPO
    shutil.copytree(REPO / "metaq_py" / "share" / "queue", tmp_path / "q")
    q = Queue(tmp_path / "q")
    runner(q, nodes=4, gpus=2).run()
    assert sorted(e.id for e in QueueAdmin(q).entries("finished")) == [
        "priority/alert.sh", "todo/analysis/run.sh", "todo/hello.sh", "todo/lattice/run.sh",
        "todo/scaling.sh"]


def test_a_claim_lost_to_another_runner_is_not_offered_again_from_a_kept_window(
        tmp_path: Path) -> None:
    # The first claim fails as if another runner had renamed the task first; the task is
    # still in todo/ when the runner decides again, and must be looked at afresh.
    q = make_queue(tmp_path / "q")
    for i in range(6):
        task(q, f"t{i}.sh", "true")
    r = runner(q, nodes=1)
    real = r.queue.claim
    lost: list[str] = []

    def claim(t, **kw):  # type: ignore[no-untyped-def]
        if not lost:
            lost.append(t.id)
            return None
        return real(t, **kw)

    r.queue.claim = claim  # type: ignore[method-assign]
    assert r.run() == 0
    assert lost == ["todo/t0.sh"]
    assert all(where(q, f"t{i}.sh") == "finished" for i in range(6))


def test_a_task_that_cannot_start_at_first_is_retried_by_the_same_runner(tmp_path: Path) -> None:
    """Its LOG folder cannot be made at its first launch (a scratch link into /proc, where no
    folder can be made, put right a moment too late): the launch fails on the spot, the task
    goes back to its folder with the attempt counted, and the same runner starts it again
    instead of stopping with it waiting."""
    q = make_queue(tmp_path / "q")
    scratch = q.root / "jobs" / "scratch"
    scratch.symlink_to("/proc/metaq-no-such-folder")
    task(q, "late.sh", 'echo "attempt $METAQ_ATTEMPT"', LOG="jobs/scratch/late.log",
         RETRIES=1)
    said: list[str] = []

    def say(line: str) -> None:
        said.append(line)
        if line.startswith("cannot start"):
            scratch.unlink()
            scratch.mkdir()  # only now: the first launch has failed for want of it

    r = runner(q, nodes=1, say=say)
    assert r.run() == 0
    assert where(q, "late.sh") == "finished"
    assert (scratch / "late.log").read_text().splitlines() == ["attempt 2"]  # ran once
    evs = events(q)
    ends = of(evs, "end", task="todo/late.sh")
    assert [(e["attempt"], e["outcome"]) for e in ends] == [(1, "retry"), (2, "finished")]
    assert "LOG file" in ends[0]["reason"]
    assert [e["attempt"] for e in of(evs, "start", task="todo/late.sh")] == [2]
    assert of(evs, "runner-stop")[0]["reason"] == "nothing left to run"
    assert sum(line.startswith("cannot start") for line in said) == 1


def test_a_task_that_can_never_start_ends_in_failed_after_its_attempts(tmp_path: Path) -> None:
    """A launch failure counts an attempt (``caps.attempts`` here 3): the runner tries the
    task until they are used up, it ends in failed/, and only then the runner stops."""
    q = make_queue(tmp_path / "q", settings=SETTINGS.replace("attempts: 5", "attempts: 3"))
    (q.root / "jobs/missing").symlink_to("/proc/metaq-no-such-folder")  # never made
    task(q, "never.sh", "true", LOG="jobs/missing/never.log", RETRIES=1)
    task(q, "fine.sh", "true", MIN_WC_TIME="1s")
    assert runner(q, nodes=1).run() == 0
    assert where(q, "never.sh") == "failed"
    assert where(q, "fine.sh") == "finished"
    evs = events(q)
    assert not of(evs, "start", task="todo/never.sh")
    ends = of(evs, "end", task="todo/never.sh")
    assert [(e["attempt"], e["outcome"]) for e in ends] == [
        (1, "retry"), (2, "retry"), (3, "failed")]
    assert "gave up after 3" in (q.root / "failed/todo/never.sh.reason").read_text()
    assert of(evs, "runner-stop")[0]["reason"] == "nothing left to run"
