"""The queue on disk: scanning, claiming, leases, every state move, rejection and trust."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from metaq_py.clock import Clock
from metaq_py.errors import QueueError
from metaq_py.queue.admin import QueueAdmin
from metaq_py.queue.store import Queue
from tests.capability import inotify_problem, missing

SCRIPT = "#!/bin/sh\n{directives}echo hi\n"


def put(path: Path, directives: str = "", *, mode: int = 0o755, text: str | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text if text is not None else SCRIPT.format(directives=directives))
    path.chmod(mode)
    return path


def settle(q: Queue) -> None:
    """Age every file in the task folders past the queue's settle time, as if it had been
    dropped there a while ago (a fresh invalid file may still be being copied in)."""
    old = time.time() - 60
    for folder in q.config.folders:
        for p in (q.root / folder).rglob("*"):
            os.utime(p, (old, old), follow_symlinks=False)


@pytest.fixture
def q(tmp_path: Path) -> Queue:
    return Queue.init(tmp_path / "q")


def ids(q: Queue) -> list[str]:
    return [t.id for t in q.scan().tasks]


# --- layout and reading --------------------------------------------------------------------


def test_init_creates_the_layout_and_a_config(q: Queue) -> None:
    for name in ("priority", "todo", "hold", "working", "finished", "failed", "rejected",
                 "cancelled", "notices", "jobs"):
        assert (q.root / name).is_dir()
    assert "folders: [priority, todo]" in (q.root / "metaq.yaml").read_text()
    q.check_one_filesystem()


def test_a_missing_queue_is_reported_and_missing_folders_are_empty(tmp_path: Path) -> None:
    with pytest.raises(QueueError, match="no queue at"):
        Queue(tmp_path / "nope").require()
    (tmp_path / "bare" / "todo").mkdir(parents=True)
    put(tmp_path / "bare" / "todo" / "a.sh")
    bare = Queue(tmp_path / "bare")
    assert ids(bare) == ["todo/a.sh"]
    assert list(QueueAdmin(bare).entries("failed")) == [] and bare.leases() == []
    assert sorted(os.listdir(tmp_path / "bare")) == ["todo"]  # nothing was written


def test_scheduling_order(q: Queue) -> None:
    put(q.root / "todo" / "old.sh")
    os.utime(q.root / "todo" / "old.sh", (1000, 1000))
    put(q.root / "todo" / "new.sh")
    put(q.root / "todo" / "sub" / "urgent.sh", "#METAQ PRIORITY 5\n")
    put(q.root / "priority" / "first.sh", "#METAQ PRIORITY -9\n")
    assert ids(q) == ["priority/first.sh", "todo/sub/urgent.sh", "todo/old.sh", "todo/new.sh"]
    task = q.scan().tasks[2]
    assert task.submit == 1000 and task.attempts == 0
    assert task.walltime == q.config.defaults.min_wc_time


def sized(q: Queue, name: str, nodes: int, submit: float, directives: str = "", *,
          folder: str = "todo") -> None:
    """A task of ``nodes`` nodes in ``folder``, submitted (its mtime) at ``submit``."""
    path = put(q.root / folder / name, f"#METAQ NODES {nodes}\n{directives}")
    os.utime(path, (submit, submit))


def ordered_queue(root: Path, order: str | None) -> Queue:
    """A queue whose metaq.yaml says ``order: <order>`` (or nothing, for the default), with
    tasks of 1, 4 and 2 nodes submitted in that order."""
    q = Queue.init(root)
    if order is not None:
        (root / "metaq.yaml").write_text(f"order: {order}\n")
    q = Queue(root)
    sized(q, "one.sh", 1, 1000)
    sized(q, "four.sh", 4, 1001)
    sized(q, "two.sh", 2, 1002)
    return q


def test_largest_first_orders_equal_priority_tasks_by_size(tmp_path: Path) -> None:
    q = ordered_queue(tmp_path / "q", "largest-first")
    assert q.config.order == "largest-first"
    want = ["todo/four.sh", "todo/two.sh", "todo/one.sh"]
    assert [t.id for t in q.pending()] == want
    # metaq ls and metaq status list what the runner picks from, in the same order
    assert [e.id for e in QueueAdmin(q).entries("pending")] == want
    # A task added to a warm index is put in its place by bisection, with the same key.
    sized(q, "three.sh", 3, 1003)
    sized(q, "late_one.sh", 1, 999)
    assert [t.id for t in q.pending()] == ["todo/four.sh", "todo/three.sh", "todo/two.sh",
                                          "todo/late_one.sh", "todo/one.sh"]


def test_the_default_order_is_submit_time(tmp_path: Path) -> None:
    for order in (None, "submit"):
        q = ordered_queue(tmp_path / f"q-{order}", order)
        assert q.config.order == "submit"
        assert [t.id for t in q.pending()] == ["todo/one.sh", "todo/four.sh", "todo/two.sh"]


def test_folder_and_priority_still_win_over_size(tmp_path: Path) -> None:
    q = ordered_queue(tmp_path / "q", "largest-first")
    sized(q, "small_urgent.sh", 1, 2000, "#METAQ PRIORITY 1\n")
    sized(q, "small_first.sh", 1, 2001, folder="priority")
    sized(q, "huge_low.sh", 8, 900, "#METAQ PRIORITY -1\n")
    # a malleable task counts at its smallest size, the count EASY holds nodes for
    sized(q, "elastic.sh", 16, 800, "#METAQ TYPE malleable\n#METAQ MIN_NODES 3\n")
    assert [t.id for t in q.pending()] == [
        "priority/small_first.sh", "todo/small_urgent.sh", "todo/four.sh", "todo/elastic.sh",
        "todo/two.sh", "todo/one.sh", "todo/huge_low.sh"]


def test_hidden_paths_are_skipped(q: Queue) -> None:
    put(q.root / "todo" / ".hidden.sh")
    put(q.root / "todo" / ".git" / "x.sh")
    put(q.root / "todo" / "seen.sh")
    assert ids(q) == ["todo/seen.sh"]


def test_symlinked_tasks_work_but_symlinked_folders_are_never_walked(q: Queue, tmp_path: Path
                                                                     ) -> None:
    # Issue 15, finding 1: a link to a folder is refused, never walked (it used to be).
    real = put(tmp_path / "elsewhere" / "real.sh", "#METAQ NODES 3\n")
    (q.root / "todo" / "link.sh").symlink_to(real)
    (q.root / "todo" / "linked-dir").symlink_to(tmp_path / "elsewhere")
    (q.root / "todo" / "loop-dir").symlink_to(q.root / "todo")  # a folder loop
    scan = q.scan()
    tasks = scan.tasks
    assert sorted(t.id for t in tasks) == ["todo/link.sh"]
    assert {t.spec.nodes for t in tasks} == {3}
    refused = {b.id: b.reason for b in scan.invalid}
    assert "symlink to a folder" in refused["todo/linked-dir"]
    assert "symlink to a folder" in refused["todo/loop-dir"]
    claim = q.claim(next(t for t in tasks if t.id == "todo/link.sh"), machine="m", jobid="1")
    assert claim is not None and claim.path.is_symlink() and claim.spec.nodes == 3


def test_symlink_loop_and_dangling_link_are_rejected_others_untouched(q: Queue) -> None:
    good = put(q.root / "todo" / "good.sh")
    (q.root / "todo" / "a").symlink_to(q.root / "todo" / "b")
    (q.root / "todo" / "b").symlink_to(q.root / "todo" / "a")
    (q.root / "todo" / "dangling.sh").symlink_to(q.root / "nowhere.sh")
    settle(q)
    assert [t.id for t in q.pending()] == ["todo/good.sh"]
    assert good.exists()
    rejected = q.root / "rejected" / "todo"
    assert "symlink loop" in (rejected / "a.reason").read_text()
    assert "does not exist" in (rejected / "dangling.sh.reason").read_text()


BAD_FILES = [
        ("binary.sh", b"\x7fELF\x00\x00", 0o755, "binary"),
        ("latin1.sh", b"#!/bin/sh\n#METAQ PROJECT caf\xe9\n", 0o755, "UTF-8"),
        ("empty.sh", b"", 0o755, "empty"),
        ("noshebang.sh", b"echo hi\n", 0o755, "shebang"),
        ("notexec.sh", b"#!/bin/sh\necho\n", 0o644, "not executable"),
        ("unknown.sh", b"#!/bin/sh\n#METAQ CORES 4\n", 0o755, "line 2"),
        ("dup.sh", b"#!/bin/sh\n#METAQ NODES 1\n#METAQ NODES 1\n", 0o755, "line 3"),
        ("nan.sh", b"#!/bin/sh\n#METAQ NODES x\n", 0o755, "whole number"),
        ("zero.sh", b"#!/bin/sh\n#METAQ NODES 0\n", 0o755, "at least 1"),
        ("min.sh", b"#!/bin/sh\n#METAQ TYPE malleable\n#METAQ NODES 1\n#METAQ MIN_NODES 2\n",
         0o755, "more than NODES"),
        ("type.sh", b"#!/bin/sh\n#METAQ TYPE batch\n", 0o755, "rigid, malleable or ondemand"),
        ("long.sh", b"#!/bin/sh\n" + b"#\n" * 40000, 0o755, "64 KiB"),
        # METAQ read it as 2 nodes: run at 1, it would be wrong without a word (issue 34)
        ("late.sh", b"#!/bin/bash\nmodule load x\n#METAQ NODES 2\n./run\n", 0o755,
         "line 3: this #METAQ line comes after the first command (line 2)"),
]


@pytest.mark.parametrize(("name", "content", "mode", "words"), BAD_FILES,
                         ids=[case[0] for case in BAD_FILES])
def test_invalid_task_in_the_queue_is_rejected_with_reason(q: Queue, name: str, content: bytes,
                                                           mode: int, words: str) -> None:
    other = put(q.root / "todo" / "other.sh")
    bad = q.root / "todo" / name
    bad.write_bytes(content)
    bad.chmod(mode)
    settle(q)
    assert [t.id for t in q.pending()] == ["todo/other.sh"]
    assert not bad.exists() and other.exists()
    assert (q.root / "rejected" / "todo" / name).read_bytes() == content  # nothing lost
    reason = (q.root / "rejected" / "todo" / f"{name}.reason").read_text()
    assert words in reason and str(bad) in reason and reason.count("\n") == 1


def test_a_task_marked_header_only_keeps_its_late_metaq_lines_and_runs(q: Queue) -> None:
    put(q.root / "todo" / "gen.sh", text="#!/bin/sh\n#METAQ NODES 2\n#METAQ HEADER_ONLY\n"
        "cat > next.sh <<EOF\n#!/bin/sh\n#METAQ NODES 8\nEOF\n")
    settle(q)
    [task] = q.pending()
    assert task.spec.nodes == 2
    claim = q.claim(task, machine="m", jobid="1")
    assert claim is not None and claim.spec.nodes == 2


def test_scan_alone_never_moves_anything(q: Queue) -> None:
    put(q.root / "todo" / "bad.sh", "#METAQ NODES none\n")
    settle(q)
    scan = q.scan()
    assert scan.tasks == () and len(scan.invalid) == 1
    assert (q.root / "todo" / "bad.sh").exists()


def test_warm_rescan_opens_nothing_and_changes_are_seen(q: Queue) -> None:
    for i in range(20):
        put(q.root / "todo" / f"t{i:02d}.sh")
    q.scan()
    assert q.index.parsed == 20
    first = q.scan()
    assert (q.index.parsed, q.index.listed) == (0, 0)  # nothing opened, no folder listed
    put(q.root / "todo" / "new.sh", "#METAQ NODES 3\n")  # a new file changes the folder
    second = q.scan()
    assert q.index.parsed == 1 and len(second.tasks) == 21
    # An edit in place does not touch the folder: the periodic full pass sees it.
    put(q.root / "todo" / "t05.sh", "#METAQ NODES 7\n")
    q.scan()
    assert q.index.parsed == 0
    third = q.scan(full=True)
    assert q.index.parsed == 1
    assert next(t for t in third.tasks if t.id == "todo/t05.sh").spec.nodes == 7
    assert len(first.tasks) == 20 and len(third.tasks) == 21


def test_full_pass_runs_every_verify_interval(q: Queue) -> None:
    put(q.root / "todo" / "a.sh")
    q.index.verify_interval = 0.0
    q.scan()
    put(q.root / "todo" / "a.sh", "#METAQ NODES 4\n")
    assert q.scan().tasks[0].spec.nodes == 4


def test_a_fresh_invalid_file_is_left_to_settle(q: Queue) -> None:
    half = put(q.root / "todo" / "copying.sh", text="#!/bin/sh\n#METAQ NOD")
    assert q.pending() == [] and half.exists()  # maybe still being copied in
    settle(q)
    assert q.pending() == [] and not half.exists()
    assert (q.root / "rejected/todo/copying.sh").exists()


def test_vanishing_files_during_scans_are_skipped(q: Queue) -> None:
    stop = threading.Event()

    def churn() -> None:
        n = 0
        while not stop.is_set():
            p = put(q.root / "todo" / f"v{n % 50}.sh")
            p.unlink()
            n += 1

    thread = threading.Thread(target=churn)
    thread.start()
    try:
        for _ in range(200):
            scan = q.scan()
            assert all(t.id.startswith("todo/v") for t in scan.tasks)
            bad = [i.reason for i in scan.invalid if "does not exist" in i.reason]
            assert bad == []
    finally:
        stop.set()
        thread.join()


def test_a_task_moved_away_after_its_read_is_listed_from_that_read(
        q: Queue, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another writer may move a task between its read and its logbook's check (seen with
    real concurrent writers): the scan uses what it read and never fails."""
    task = put(q.root / "todo" / "a.sh")
    claim = q.claim(q.scan().tasks[0], machine="m", jobid="1")
    assert claim is not None
    q.requeue(claim, reason="test")  # leaves a logbook beside the task, one attempt
    index_module = sys.modules[type(q.index).__module__]
    real_judge = index_module.judge

    def judge_then_move(path, **kw):  # type: ignore[no-untyped-def]
        verdict = real_judge(path, **kw)
        if Path(path) == task:
            task.rename(q.root / "cancelled" / "a.sh")
        return verdict

    monkeypatch.setattr(index_module, "judge", judge_then_move)
    scan = Queue(q.root).scan(full=True)
    assert [(t.id, t.attempts) for t in scan.tasks] == [("todo/a.sh", 1)]
    monkeypatch.undo()
    assert Queue(q.root).scan(full=True).tasks == ()


# --- trust -------------------------------------------------------------------------------


def test_world_writable_task_is_rejected(q: Queue) -> None:
    put(q.root / "todo" / "open.sh", mode=0o757)
    put(q.root / "todo" / "fine.sh")
    settle(q)
    assert [t.id for t in q.pending()] == ["todo/fine.sh"]
    assert "writable by every user" in (q.root / "rejected/todo/open.sh.reason").read_text()


def test_world_writable_folder_taints_its_tasks(q: Queue) -> None:
    put(q.root / "todo" / "shared" / "x.sh")
    (q.root / "todo" / "shared").chmod(0o777)
    settle(q)
    assert q.pending() == []
    assert "the folder" in (q.root / "rejected/todo/shared/x.sh.reason").read_text()


def test_group_writable_needs_the_configured_group(tmp_path: Path) -> None:
    q = Queue.init(tmp_path / "q")
    put(q.root / "todo" / "g.sh", mode=0o775)
    os.chown(q.root / "todo" / "g.sh", 0, 4321)  # a group that is no one's private group
    assert q.scan().tasks == ()
    assert "not the queue's group" in q.scan().invalid[0].reason
    (q.root / "metaq.yaml").write_text("group: 4321\n")
    assert [t.id for t in Queue(q.root).scan().tasks] == ["todo/g.sh"]


def test_trusted_users(tmp_path: Path) -> None:
    q = Queue.init(tmp_path / "q")
    put(q.root / "todo" / "x.sh")
    os.chown(q.root / "todo" / "x.sh", 65534, -1)
    (q.root / "metaq.yaml").write_text("trusted_users: [root]\n")
    scan = Queue(q.root).scan()
    assert scan.tasks == () and "trusted_users" in scan.invalid[0].reason


def test_init_with_group_makes_setgid_group_folders(tmp_path: Path) -> None:
    q = Queue.init(tmp_path / "q", group="0")
    st = os.stat(q.root / "todo")
    assert st.st_mode & 0o2070 == 0o2070 and st.st_gid == 0
    assert q.config.group == "0"


def test_log_where_the_owner_may_not_write_is_an_error(q: Queue, tmp_path: Path) -> None:
    put(q.root / "todo" / "esc.sh", "#METAQ LOG /etc/passwd\n")
    put(q.root / "todo" / "dots.sh", "#METAQ LOG jobs/../../x.log\n")
    put(q.root / "todo" / "ok.sh", "#METAQ LOG jobs/mine/ok.log\n")
    put(q.root / "todo" / "inj.sh", "#METAQ LOG jobs/events.jsonl\n")
    for name in ("esc.sh", "dots.sh"):  # tasks of a user who may write neither place
        os.chown(q.root / "todo" / name, 65534, 65534)
    settle(q)
    tasks = q.pending()
    assert [t.id for t in tasks] == ["todo/ok.sh"]
    assert "may not write it" in (q.root / "rejected/todo/esc.sh.reason").read_text()
    assert "may not write in it" in (q.root / "rejected/todo/dots.sh.reason").read_text()
    assert "jobs/ folder" in (q.root / "rejected/todo/inj.sh.reason").read_text()
    claim = q.claim(tasks[0], machine="m", jobid="9")
    assert q.log_path(claim) == (q.root / "jobs/mine/ok.log").absolute()


def test_log_roots_tighten_where_a_log_may_go(tmp_path: Path) -> None:
    q = Queue.init(tmp_path / "q")
    (q.root / "metaq.yaml").write_text("log_roots: [log]\n")
    q = Queue(q.root)
    put(q.root / "todo" / "out.sh", f"#METAQ LOG {tmp_path}/elsewhere.log\n")
    put(q.root / "todo" / "in.sh", "#METAQ LOG log/in.log\n")
    settle(q)
    assert [t.id for t in q.pending()] == ["todo/in.sh"]
    assert "outside the queue's log roots" in \
        (q.root / "rejected/todo/out.sh.reason").read_text()


# --- claims and moves ----------------------------------------------------------------------


def test_claim_moves_atomically_and_writes_a_lease(q: Queue) -> None:
    put(q.root / "todo" / "a" / "run.sh", "#METAQ NODES 2\n")
    task = q.pending()[0]
    claim = q.claim(task, machine="theta", jobid="123", host="nid01", pid=42)
    assert claim is not None
    # Where METAQ puts a running task: under its file name, its folder kept in the lease.
    assert claim.path == q.root / "working/theta/123/run.sh" and claim.path.exists()
    assert not task.path.exists()
    lease = json.loads(claim.lease.read_text())
    assert (lease["job"], lease["host"], lease["pid"]) == ("123", "nid01", 42)
    assert (lease["folder"], lease["relpath"]) == ("todo", "a/run.sh")
    assert q.claim(task, machine="theta", jobid="124") is None  # someone else won
    [listed] = q.leases()
    assert (listed.jobid, listed.host, listed.pid, listed.id) == ("123", "nid01", 42,
                                                                  "todo/a/run.sh")
    old = listed.heartbeat - 60
    os.utime(claim.lease, (old, old))  # a minute without a heartbeat
    assert q.heartbeat(claim)
    assert q.leases()[0].heartbeat > old + 59


def test_claim_rereads_the_file_it_took(q: Queue) -> None:
    path = put(q.root / "todo" / "x.sh", "#METAQ NODES 2\n")
    task = q.pending()[0]
    put(path, "#METAQ NODES 9\n")  # edited after the scan
    assert q.claim(task, machine="m", jobid="1").spec.nodes == 9
    put(q.root / "todo" / "y.sh")
    task = q.pending()[0]
    put(task.path, "#METAQ NODES bad\n")  # a claimed file is checked at once, settled or not
    assert q.claim(task, machine="m", jobid="1") is None
    assert (q.root / "rejected/todo/y.sh.reason").exists()


def test_a_link_planted_as_a_job_folder_is_never_taken_for_claims(q: Queue) -> None:
    """``working/m/j -> ../../finished``: the finished task behind it is no claim, so no
    runner ever takes it back and runs it again."""
    put(q.root / "todo" / "a.sh")
    q.finish(q.claim(q.pending()[0], machine="m", jobid="1"), exit_code=0)
    assert (q.root / "finished" / "todo" / "a.sh").exists()
    (q.root / "working" / "m").mkdir(parents=True, exist_ok=True)
    (q.root / "working" / "m" / "j").symlink_to("../../finished")
    (q.root / "working" / "evil").symlink_to("../finished")
    assert q.leases() == []


def test_a_task_leaving_working_takes_its_lease_along(q: Queue) -> None:
    """Once its task has left working/, a lease is gone: nothing of the job is left there
    once it is tidied."""
    for name in ("a.sh", "b.sh"):
        put(q.root / "todo" / name)
    a, b = q.pending()
    first = q.claim(a, machine="m", jobid="1", host="h1", pid=7)
    q.finish(first, exit_code=0)
    assert not first.lease.exists()
    second = q.claim(b, machine="m", jobid="1", host="h2", pid=8)
    [listed] = q.leases()
    assert listed.id == "todo/b.sh" and listed.host == "h2"
    q.requeue(second, reason="preempted", count_attempt=False)
    assert [e.name for e in (q.root / "working/m/1").iterdir()] == []
    q.tidy_job(machine="m", jobid="1")
    assert not (q.root / "working/m/1").exists()


def test_requeue_keeps_identity_submit_time_and_counts_attempts(q: Queue) -> None:
    put(q.root / "todo" / "d" / "run.sh")
    os.utime(q.root / "todo/d/run.sh", (500, 500))
    task = q.pending()[0]
    claim = q.claim(task, machine="m", jobid="1")
    moved = q.requeue(claim, reason="preempted by ondemand", count_attempt=False)
    assert moved.state == "todo" and moved.path == q.root / "todo/d/run.sh"
    again = q.pending()[0]
    assert (again.submit, again.attempts) == (500, 0)
    claim = q.claim(again, machine="m", jobid="2")
    q.requeue(claim, reason="node failure")
    third = q.pending()[0]
    assert (third.id, third.submit, third.attempts) == ("todo/d/run.sh", 500, 1)
    assert q.leases() == []


def test_finish_success_and_failure(q: Queue) -> None:
    put(q.root / "todo" / "a" / "run.sh")
    put(q.root / "todo" / "b" / "run.sh")
    a, b = q.pending()
    ca = q.claim(a, machine="m", jobid="1", host="h1")
    cb = q.claim(b, machine="m", jobid="1", host="h1")
    assert q.finish(ca, exit_code=0).path == q.root / "finished/todo/a/run.sh"
    moved = q.finish(cb, exit_code=3, reason="segfault")
    assert moved.state == "failed" and moved.path == q.root / "failed/todo/b/run.sh"
    reason = (q.root / "failed/todo/b/run.sh.reason").read_text()
    assert "exited with code 3 in job 1 on h1 (segfault)" in reason
    assert q.leases() == [] and q.pending() == []


def test_retries_send_a_failed_run_back(q: Queue) -> None:
    put(q.root / "todo" / "flaky.sh", "#METAQ RETRIES 1\n")
    claim = q.claim(q.pending()[0], machine="m", jobid="1")
    assert q.finish(claim, exit_code=1).state == "todo"
    task = q.pending()[0]
    assert task.attempts == 1
    assert q.finish(q.claim(task, machine="m", jobid="1"), exit_code=1).state == "failed"


def test_caps_attempts_stops_endless_reclaims(tmp_path: Path) -> None:
    q = Queue.init(tmp_path / "q")
    (q.root / "metaq.yaml").write_text("caps:\n  attempts: 2\n")
    q = Queue(q.root)
    put(q.root / "todo" / "killer.sh")
    c = q.claim(q.pending()[0], machine="m", jobid="1")
    assert q.reclaim(c, reason="job 1 is dead").state == "todo"
    c = q.claim(q.pending()[0], machine="m", jobid="2")
    moved = q.reclaim(c, reason="job 2 is dead")
    assert moved.state == "failed"
    assert "gave up after 2" in (q.root / "failed/todo/killer.sh.reason").read_text()
    events = list(q.events("1"))
    assert events[0]["event"] == "reclaimed" and events[0]["task"] == "todo/killer.sh"


def test_stale_leases_and_reclaim_races(q: Queue) -> None:
    put(q.root / "todo" / "x.sh")
    claim = q.claim(q.pending()[0], machine="m", jobid="1")
    assert q.stale() == []
    os.utime(claim.lease, (1, 1))
    [stale] = q.stale()
    assert stale.id == "todo/x.sh"
    assert q.reclaim(stale, reason="stale").state == "todo"
    assert q.reclaim(stale, reason="stale") is None  # the second reclaimer finds it gone
    assert not q.heartbeat(claim)  # the owner learns that it lost the task
    assert q.finish(claim, exit_code=0) is None


def test_the_queue_reads_time_only_from_its_clock(tmp_path: Path) -> None:
    clock = Clock(5_000.0)
    q = Queue.init(tmp_path / "q", clock=clock)
    put(q.root / "todo" / "x.sh")
    claim = q.claim(q.pending()[0], machine="m", jobid="1")
    assert (claim.start, claim.heartbeat) == (5_000.0, 5_000.0)
    os.utime(claim.lease, (4_900.0, 4_900.0))  # the heartbeat is the lease's mtime
    assert q.stale() == []  # 100 s old by the queue's clock: within stale_after
    clock.advance_to(4_900.0 + q.config.stale_after + 1)
    [stale] = q.stale()
    moved = q.reclaim(stale, reason="stale")
    assert [e["time"] for e in q.events("1")] == [clock.now()]
    history = json.loads((moved.path.parent / ".x.sh.record").read_text())["history"]
    assert [h["time"] for h in history] == [clock.now()]


def test_names_never_collide(q: Queue) -> None:
    put(q.root / "todo" / "x" / "run.sh")
    put(q.root / "todo" / "y" / "run.sh")
    claims = [q.claim(t, machine="m", jobid="5") for t in q.pending()]
    # One job holds two tasks of one name: the second takes a numbered slot, same name.
    assert [c.path.relative_to(q.root).as_posix() for c in claims] == [
        "working/m/5/run.sh", "working/m/5/2/run.sh"]
    assert sorted(c.id for c in q.leases()) == ["todo/x/run.sh", "todo/y/run.sh"]
    logs = {q.log_path(c) for c in claims}
    assert len(logs) == 2
    for c in claims:
        q.finish(c, exit_code=0)
    assert sorted(p.relative_to(q.root).as_posix()
                  for p in (q.root / "finished").rglob("run.sh")) == [
        "finished/todo/x/run.sh", "finished/todo/y/run.sh"]
    # The same task finishing twice keeps both copies.
    put(q.root / "todo" / "x" / "run.sh")
    q.finish(q.claim(q.pending()[0], machine="m", jobid="6"), exit_code=0)
    assert (q.root / "finished/todo/x/run.sh.1").exists()


# --- events, watching ----------------------------------------------------------------------


def test_event_log_appends_json_lines(q: Queue) -> None:
    log = q.events("77")
    log.append("start", task="todo/a.sh", nodes=["n1"])
    log.append("end", task="todo/a.sh", exit_code=0)
    with open(log.path, "a") as f:
        f.write('{"torn": ')  # a crash mid-write
    records = list(log)
    assert [r["event"] for r in records] == ["start", "end"]
    assert records[1]["exit_code"] == 0 and records[0]["time"] <= records[1]["time"]


@pytest.mark.parametrize("use_watchdog", [True, False])
def test_watcher_wakes_early_on_a_change(q: Queue, use_watchdog: bool) -> None:
    from metaq_py.queue.watcher import QueueWatcher

    problem = inotify_problem() if use_watchdog else None
    if problem is not None:
        missing(problem)
    with QueueWatcher([q.root / "todo"], interval=0.2, use_watchdog=use_watchdog) as w:
        assert w.live == use_watchdog  # events where asked and here, else polling
        assert not w.wait(0.3)
        threading.Timer(0.2, lambda: put(q.root / "todo" / "new.sh")).start()
        start = time.monotonic()
        assert w.wait(10)
        assert time.monotonic() - start < 5
