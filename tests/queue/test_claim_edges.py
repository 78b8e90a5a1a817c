"""A claim that does not happen leaves nothing behind: no lease in working/, no slot held; a
claim whose file no longer parses goes to rejected/ without its lease; and a claim listed by
another runner keeps the task's logbook, read when it is taken back."""

from __future__ import annotations

import os
from pathlib import Path

from metaq_py.queue.logbook import read_logbook
from metaq_py.queue.store import Queue
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
