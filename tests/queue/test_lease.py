"""A lease as other runners read it (metaq_py/queue/lease.py): each field is believed only when
it is what a runner writes, a lease that cannot be read counts as none, and a job places each
claim in the smallest free slot of its folder."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from metaq_py.queue.lease import (
    LEASE_LIMIT,
    JobFolder,
    claim_slot,
    find_claim,
    lease_path,
    read_claims,
    read_lease,
    write_lease,
)
from tests.queue.test_store import put

FOLDERS = ("todo",)
GOOD = {"machine": "m", "job": "1", "folder": "todo", "relpath": "t.sh", "host": "nid01",
        "pid": 42, "start": 100.0, "attempts": 2, "submit": 50.0, "stale_after": 60.0}


def _listed(tmp_path: Path, lease: object) -> object:
    """The claim ``read_claims`` makes of ``working/m/1/t.sh`` with ``lease`` (raw JSON)."""
    task = put(tmp_path / "working/m/1/t.sh")
    lease_path(task).write_text(json.dumps(lease))
    [claim] = read_claims(tmp_path / "working", folders=FOLDERS)
    return claim


def test_a_lease_as_a_runner_writes_it_is_read_whole(tmp_path: Path) -> None:
    claim = _listed(tmp_path, GOOD)
    assert (claim.host, claim.pid, claim.start, claim.attempts, claim.submit,
            claim.stale_after, claim.id) == ("nid01", 42, 100.0, 2, 50.0, 60.0, "todo/t.sh")
    assert claim.heartbeat == claim.lease.stat().st_mtime


@pytest.mark.parametrize(("field", "value", "read_as"), [
    ("host", "", None), ("host", "a\tb", None), ("host", "h" * 256, None), ("host", 7, None),
    ("host", "h" * 255, "h" * 255), ("host", "h", "h"),
    ("folder", ".hidden", "todo"), ("folder", "a/b", "todo"), ("folder", "", "todo"),
    ("folder", "f" * 256, "todo"), ("folder", "f" * 255, "f" * 255), ("folder", "x", "x"),
    ("pid", -1, None), ("pid", True, None), ("pid", 2**31, None), ("pid", "42", None),
    ("pid", 0, 0), ("pid", 2**31 - 1, 2**31 - 1),
    ("attempts", True, 0), ("attempts", -3, 0), ("attempts", 2**31 - 1, 2**31 - 1),
    ("start", "soon", "beat"), ("start", True, "beat"), ("start", -1, "beat"),
    ("start", 1e11, "beat"), ("start", 10**400, "beat"), ("start", 0, 0.0),
    ("start", 99_999_999_999, 99_999_999_999.0),
    ("submit", None, "beat"), ("submit", 3, 3.0),
    ("stale_after", 0.5, None), ("stale_after", 1.0, 1.0), ("stale_after", 7 * 86400.0,
                                                             7 * 86400.0),
    ("stale_after", 7 * 86400.0 + 1, None), ("stale_after", "60", None),
])
def test_a_field_that_is_not_what_a_runner_writes_is_taken_as_missing(
        tmp_path: Path, field: str, value: object, read_as: object) -> None:
    claim = _listed(tmp_path, {**GOOD, field: value})
    got = getattr(claim, field)
    if field == "folder":  # the task then goes back by it
        assert claim.id == f"{read_as}/t.sh"
    assert got == (claim.heartbeat if read_as == "beat" else read_as)


@pytest.mark.parametrize("raw", [b"[1, 2]", b"{", b"\xff", b'"text"', b"[" * 10_000])
def test_a_lease_that_is_no_json_object_counts_as_none(tmp_path: Path, raw: bytes) -> None:
    task = put(tmp_path / "t.sh")
    lease_path(task).write_bytes(raw)
    assert read_lease(task) is None


def test_a_lease_over_its_limit_counts_as_none(tmp_path: Path) -> None:
    task = put(tmp_path / "t.sh")
    padded = json.dumps({**GOOD, "pad": ""}).encode()
    exact = json.dumps({**GOOD, "pad": "x" * (LEASE_LIMIT - len(padded))}).encode()
    assert len(exact) == LEASE_LIMIT
    lease_path(task).write_bytes(exact)
    found = read_lease(task)
    assert found is not None and found[0]["pid"] == 42
    lease_path(task).write_bytes(exact[:-1] + b" }")
    assert read_lease(task) is None
    assert LEASE_LIMIT == 8192  # "a lease is about 300 bytes": room for any a runner writes


def test_a_written_lease_says_who_holds_the_task(tmp_path: Path) -> None:
    task = put(tmp_path / "t.sh")
    path = write_lease(task, machine="m", jobid="1", folder="todo", relpath="sub/t.sh",
                       host="h", pid=7, start=1.5, attempts=3, submit=0.5, stale_after=30.0)
    assert path == lease_path(task) == tmp_path / ".t.sh.lease"
    assert json.loads(path.read_text()) == {
        "machine": "m", "job": "1", "folder": "todo", "relpath": "sub/t.sh", "host": "h",
        "pid": 7, "start": 1.5, "attempts": 3, "submit": 0.5, "stale_after": 30.0}
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_slots_are_the_smallest_free_and_a_job_folder_remembers_its_own(tmp_path: Path
                                                                         ) -> None:
    job = tmp_path / "working/m/1"
    job.mkdir(parents=True)
    assert claim_slot(job, "t.sh") == job / "t.sh"
    put(job / "t.sh")
    assert claim_slot(job, "t.sh") == job / "2/t.sh"
    (job / "2").write_text("a file where slot 2 would be")
    assert claim_slot(job, "t.sh") == job / "3/t.sh"
    assert claim_slot(job, "t.sh", held={3}) == job / "4/t.sh"
    folder = JobFolder(tmp_path / "working/m/2")
    first, second = folder.take_slot("x.sh"), folder.take_slot("x.sh")
    assert (first, second) == (folder.job / "x.sh", folder.job / "2/x.sh")
    folder.leave(first)
    assert folder.take_slot("x.sh") == first  # free again
    folder.leave(second)
    folder.leave(first)
    folder.leave(folder.job / "nothing.sh")  # never held: nothing to forget
    assert folder.take_slot("x.sh") == first


def test_a_folder_planted_at_a_leases_name_is_set_aside(tmp_path: Path) -> None:
    task = put(tmp_path / "t.sh")
    lease_path(task).mkdir()
    (lease_path(task) / "inside").write_text("kept")
    path = write_lease(task, machine="m", jobid="1", folder="todo", relpath="t.sh", host="h",
                       pid=1, start=1.0, attempts=0, submit=1.0)
    assert path.is_file() and json.loads(path.read_text())["pid"] == 1
    [aside] = [p for p in tmp_path.iterdir() if ".planted-" in p.name]
    assert (aside / "inside").read_text() == "kept"


def test_a_slot_folder_holding_the_name_is_taken(tmp_path: Path) -> None:
    job = tmp_path / "working/m/1"
    put(job / "t.sh")
    (job / "2").mkdir()
    assert claim_slot(job, "t.sh") == job / "2/t.sh"  # an empty slot folder is free
    put(job / "2/t.sh")
    assert claim_slot(job, "t.sh") == job / "3/t.sh"
    folder = JobFolder(tmp_path / "working/m/2")
    _one, two, _three = (folder.take_slot("x.sh") for _ in range(3))
    folder.leave(two)  # slot 2 left while 1 and 3 are held
    assert folder.take_slot("x.sh") == two


def test_claims_in_working_are_all_tasks_even_one_called_like_a_reason(tmp_path: Path
                                                                        ) -> None:
    job = tmp_path / "working/m/1"
    put(job / "x.sh")
    put(job / "x.sh.reason")  # a task of its own: working/ never holds a .reason
    listed = sorted(c.relpath for c in read_claims(tmp_path / "working", folders=FOLDERS))
    assert listed == ["x.sh", "x.sh.reason"]


def test_a_slot_that_is_a_link_is_never_where_a_claim_is_found(tmp_path: Path) -> None:
    job = tmp_path / "working/m/1"
    job.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    task = put(elsewhere / "t.sh")
    write_lease(task, machine="m", jobid="1", folder="todo", relpath="sub/t.sh", host="h",
                pid=1, start=1.0, attempts=0, submit=1.0)
    (job / "2").symlink_to(elsewhere)
    assert find_claim(job, "todo", "sub/t.sh", FOLDERS) is None
    # nor listed through it (the link itself is a thing planted in working/, not a folder)
    assert [c.path for c in read_claims(tmp_path / "working", folders=FOLDERS)] == [job / "2"]
    real = put(job / "3/t.sh")
    write_lease(real, machine="m", jobid="1", folder="todo", relpath="sub/t.sh", host="h",
                pid=1, start=1.0, attempts=0, submit=1.0)
    assert find_claim(job, "todo", "sub/t.sh", FOLDERS) == real


@pytest.mark.parametrize(("relpath", "believed"), [
    ("/".join(["a" * 255] * 2), True), ("a" * 256, False),
    ("/".join(["d" * 99] * 30), True),  # 2,999 characters
    ("/".join(["a" * 255] * 11 + ["b" * 184]), True),  # 3,000
    ("/".join(["d" * 99] * 30) + "/x", False),  # 3,001
])
def test_a_leases_relative_path_is_believed_within_the_kernels_limits(
        tmp_path: Path, relpath: str, believed: bool) -> None:
    claim = _listed(tmp_path, {**GOOD, "relpath": relpath})
    assert claim.relpath == (relpath if believed else "t.sh")


def test_a_claim_without_a_lease_is_listed_with_what_its_path_and_file_say(tmp_path: Path
                                                                            ) -> None:
    task = put(tmp_path / "working/m/1/t.sh")
    [claim] = read_claims(tmp_path / "working", folders=FOLDERS)
    assert (claim.host, claim.pid, claim.attempts, claim.id) == (None, None, 0, "todo/t.sh")
    assert claim.heartbeat == claim.start == claim.submit == os.lstat(task).st_ctime
    assert claim.spec is None  # scripts are parsed only when asked
    [parsed] = read_claims(tmp_path / "working", folders=FOLDERS, specs=True)
    assert parsed.spec is not None


def test_leaving_a_place_that_is_no_numbered_slot_forgets_nothing(tmp_path: Path) -> None:
    folder = JobFolder(tmp_path / "working/m/1")
    first = folder.take_slot("x.sh")
    folder.leave(folder.job / "todo" / "x.sh")  # an older runner's place: no slot
    assert folder.take_slot("x.sh") == folder.job / "2/x.sh"  # slot 1 is still held
    folder.leave(first)
