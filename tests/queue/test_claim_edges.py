"""A claim that does not happen leaves nothing behind: no lease in working/, no slot held; a
claim whose file no longer parses goes to rejected/ without its lease; and a claim listed by
another runner keeps the task's logbook, read when it is taken back."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from metaq_py.errors import QueueError
from metaq_py.queue.logbook import logbook_path, read_logbook
from metaq_py.queue.store import Queue
from metaq_py.queue.watcher import OwnMoves
from tests.capability import missing
from tests.queue.test_store import put


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def test_a_lost_race_leaves_no_lease_and_frees_its_place(tmp_path: Path) -> None:
    q = Queue.init(tmp_path / "q")
    put(q.root / "todo/a/run.sh")
    put(q.root / "todo/b/run.sh")
    first, second = q.pending()
    os.unlink(first.path)  # another job took it after this one's scan
    assert q.claim(first, machine="m", jobid="1") is None
    job = q.root / "working/m/1"
    assert _files(job) == []  # the lease written before the rename is gone with it
    claim = q.claim(second, machine="m", jobid="1")
    assert claim is not None and claim.path == job / "run.sh"  # its place, free again


def test_a_claimed_file_that_no_longer_parses_goes_to_rejected_without_its_lease(
        tmp_path: Path) -> None:
    q = Queue.init(tmp_path / "q")
    path = put(q.root / "todo/t.sh")
    [waiting] = q.pending()
    path.write_text("#!/bin/sh\n#METAQ NODES many\ntrue\n")  # changed after the scan
    assert q.claim(waiting, machine="m", jobid="1") is None
    assert _files(q.root / "working") == []
    assert (q.root / "rejected/todo/t.sh").is_file()
    assert "NODES" in (q.root / "rejected/todo/t.sh.reason").read_text()


def test_a_claim_listed_by_another_runner_keeps_the_tasks_logbook(tmp_path: Path) -> None:
    q = Queue.init(tmp_path / "q")
    put(q.root / "todo/t.sh")
    claim = q.claim(q.pending()[0], machine="m", jobid="1")
    assert claim is not None
    q.requeue(claim, reason="preempted", count_attempt=False)  # its logbook: one entry
    claim = q.claim(q.pending()[0], machine="m", jobid="2")
    assert claim is not None
    [listed] = Queue(q.root).leases()  # as another runner sees it
    assert listed.has_logbook
    moved = Queue(q.root).reclaim(listed, reason="job 2 is gone")
    assert moved is not None
    book = read_logbook(moved.path, moved.path.stat().st_ino)
    assert book is not None and [h["event"] for h in book.history] == ["requeued", "requeued"]
    assert book.attempts == 1


def test_a_claim_whose_place_in_working_would_be_too_deep_is_rejected(tmp_path: Path
                                                                       ) -> None:
    # The queue sits so deep that todo/x.sh fits the kernel's limits with the room the queue
    # keeps, and working/m/1/x.sh (7 bytes longer) does not.
    root = tmp_path
    while len(str(root)) < 3980 - 201:
        root = root / ("d" * 200)
    root = root / ("e" * (3980 - len(str(root)) - 1))
    assert len(str(root)) == 3980
    q = Queue.init(root)
    put(q.root / "todo/x.sh")
    [waiting] = q.pending()
    assert q.claim(waiting, machine="m", jobid="1") is None
    assert not (q.root / "todo/x.sh").exists()
    [reason] = (q.root / "rejected/todo").glob("*.reason")
    assert "too deep" in reason.read_text()
    assert _files(q.root / "working") == []


def test_a_task_whose_folder_became_a_file_is_rejected_not_raised(tmp_path: Path) -> None:
    q = Queue.init(tmp_path / "q")
    put(q.root / "todo/sub/x.sh")
    [waiting] = q.pending()
    os.rename(q.root / "todo/sub", tmp_path / "sub")
    (q.root / "todo/sub").write_text("a file where the folder was")
    # ENOTDIR: the task cannot be where it was; nothing is claimed and nothing raised (a
    # move whose source's folder became a file is a move of a source that is gone).
    assert q.claim(waiting, machine="m", jobid="1") is None
    assert _files(q.root / "working") == []
    assert (tmp_path / "sub/x.sh").is_file()  # the task is where the folder went


def test_a_runners_own_claims_are_noted_for_its_watcher(tmp_path: Path) -> None:
    q = Queue.init(tmp_path / "q")
    q.own_moves = OwnMoves()
    put(q.root / "todo/a.sh")
    put(q.root / "todo/b.sh")
    first = q.claim(q.pending()[0], machine="m", jobid="1")
    assert first is not None
    q.requeue(first, reason="given back", started=False)  # a.sh now has a logbook
    a, b = q.pending()
    os.unlink(b.path)  # b.sh is taken by another runner first
    assert q.claim(b, machine="m", jobid="1") is None
    assert not q.own_moves.left(str(b.path))  # a failed claim is not ours
    assert q.claim(a, machine="m", jobid="1") is not None
    assert q.own_moves.left(str(a.path))  # the task's leaving, and its logbook's
    assert q.own_moves.left(str(logbook_path(a.path)))


def test_a_heartbeat_of_a_claim_that_is_gone_says_so(tmp_path: Path) -> None:
    q = Queue.init(tmp_path / "q")
    put(q.root / "todo/t.sh")
    claim = q.claim(q.pending()[0], machine="m", jobid="1")
    assert claim is not None and q.heartbeat(claim) is True
    claim.lease.unlink()
    assert q.heartbeat(claim) is False


def test_a_working_folder_on_another_file_system_is_refused_in_one_sentence(
        tmp_path: Path) -> None:
    if os.geteuid() != 0:
        missing("mounting a tmpfs at working/ needs root")
    q = Queue.init(tmp_path / "q")
    put(q.root / "todo/t.sh")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs",
                           str(q.root / "working")], capture_output=True, text=True)
    if done.returncode != 0:
        missing(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        with pytest.raises(QueueError, match="working/ is on another file system"):
            q.claim(q.pending()[0], machine="m", jobid="1")
        assert (q.root / "todo/t.sh").is_file()  # still waiting, never lost
    finally:
        subprocess.run(["umount", str(q.root / "working")], check=True)


def test_a_job_folder_under_a_folder_anyone_may_write_is_never_trusted(tmp_path: Path) -> None:
    """``working/`` made writable by every user: a claim into a job folder below it is
    refused, and so is the next one into the same job folder: a refused claim does not make
    its folders trusted."""
    q = Queue.init(tmp_path / "q")
    put(q.root / "todo" / "a.sh")
    put(q.root / "todo" / "b.sh")
    first, second = q.pending()
    (q.root / "working").chmod(0o777)
    assert q.claim(first, machine="m", jobid="1") is None
    assert q.claim(second, machine="m", jobid="1") is None
    reasons = sorted((q.root / "rejected" / "todo").glob("*.reason"))
    assert [r.name for r in reasons] == ["a.sh.reason", "b.sh.reason"]
    assert all("writable by every user" in r.read_text() for r in reasons)

