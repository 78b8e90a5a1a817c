"""Issue 28, findings 9 and 10: a lease the runner may not renew (a member's file put in its
place, as a real uid), and a full disk (a small real tmpfs). Neither crashes the runner, and
no task that ended is run again."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from metaq_py.queue.store import Queue
from tests.hostile.members import Members
from tests.hostile.test_members import _out, _script
from tests.runner_helpers import make_queue, task, wait_until

METAQ = [sys.executable, "-m", "metaq_py"]


def _runner(q: Path, jobid: str, *extra: str, user: object = None) -> subprocess.Popen[str]:
    argv = [*METAQ, "run", "-q", str(q), "--nodes", "1", "--batch", "local", "--jobid", jobid,
            "--machine", "m", "--grace", "1", *extra]
    if user is not None:
        return user.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # type: ignore[attr-defined]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


class Lines:
    """A runner's standard error, read line by line as it comes (a thread), to wait for
    what it says."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def said(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def end(self, timeout: float = 60) -> str:
        self.proc.wait(timeout)
        self.thread.join(10)
        return "".join(self.lines)


def test_9_a_lease_a_member_replaced_loses_that_claim_only(members: Members) -> None:
    q = members.init_queue(settings="heartbeat: 1s\nstale_after: 30s\npoll_interval: 1s\n")
    out = _out(members)
    (out / "go").unlink(missing_ok=True)
    for name in ("a.sh", "b.sh"):
        members.owner.do(lambda name=name: _script(
            q / "todo" / name, f"touch {out}/{name}; trap '' TERM; "
            f"while [ ! -e {out}/go ]; do sleep 0.05; done", directives=
            "#METAQ MIN_WC_TIME 1m\n#METAQ NODES 1\n"))
    runner = Lines(members.owner.popen(
        [*METAQ, "run", "-q", str(q), "--nodes", "2", "--batch", "local", "--jobid", "j1",
         "--machine", "m", "--grace", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    try:
        assert wait_until(lambda: (out / "a.sh").exists() and (out / "b.sh").exists(), 30)
        lease = q / "working/m/j1/.a.sh.lease"

        def replace() -> None:
            mine = lease.with_name(".mine")
            mine.write_text('{"machine": "m", "job": "j1"}')
            mine.chmod(0o644)  # the member's alone: the owner may not touch it
            os.rename(mine, lease)

        members.member.do(replace)
        assert wait_until(lambda: runner.said("todo/a.sh is no longer ours"), 30)
        assert runner.proc.poll() is None  # it goes on with b.sh
        assert (q / "working/m/j1/b.sh").exists()
    finally:
        (out / "go").touch()
        err = runner.end()
    assert runner.proc.returncode == 0 and "Traceback" not in err, err[-3000:]
    assert "can no longer be renewed" in err, err
    assert (q / "finished/todo/b.sh").exists()


# --- finding 10: a full disk ---------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs mounted for the test (root only)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a real full disk needs root to mount a small tmpfs (CI runs as root)")
    where = tmp_path / "disk"
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0755", "tmpfs",
                           str(where)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _fill(disk: Path) -> Path:
    """Take every free block of ``disk`` with one file (removing it frees them)."""
    filler = disk / "filler"
    with open(filler, "wb") as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 65536)
            f.flush()
    with contextlib.suppress(OSError), open(filler, "ab") as f:
        while True:  # the last partial block
            f.write(b"\0" * 512)
            f.flush()
    return filler


def _counts(out: Path) -> dict[str, int]:
    return {p.name: len(p.read_text().splitlines()) for p in out.iterdir() if p.suffix == ".sh"}


def test_10_a_full_disk_defers_claims_without_a_crash(small_disk: Path, tmp_path: Path
                                                        ) -> None:
    """The disk is full before the runner starts: its first claim cannot write a lease. It
    says so once, claims nothing, and claims as soon as there is room again."""
    q = make_queue(small_disk / "q")
    out = tmp_path / "out"
    out.mkdir()
    task(q, "t1.sh", f"echo $$ >> {out}/t1.sh")
    filler = _fill(small_disk)
    first = Lines(_runner(q.root, "j1"))
    try:
        assert wait_until(lambda: first.said("cannot claim now"), 30)
        assert first.proc.poll() is None and not (out / "t1.sh").exists()
        filler.unlink()
        err = first.end()
    finally:
        if first.proc.poll() is None:
            first.proc.kill()
    assert first.proc.returncode == 0 and "Traceback" not in err, err[-3000:]
    assert "claims go on" in err and _counts(out) == {"t1.sh": 1}, err[-3000:]


def _gated(q: Queue, out: Path, gate: Path, n: int = 4) -> None:
    for i in range(1, n + 1):
        task(q, f"t{i}.sh", f"echo $$ >> {out}/t{i}.sh; "
                            f"while [ ! -e {gate} ]; do sleep 0.05; done")


def test_10_an_ended_task_that_cannot_be_moved_is_never_run_again(small_disk: Path,
                                                                  tmp_path: Path) -> None:
    """Tasks end while the disk is full: the first the runner cannot move waits in memory;
    the runner is stopped while the disk is still full, so its exit is recorded beside it.
    Once there is room again, the next runner settles it from that record, never running it
    again, and runs the rest."""
    q = make_queue(small_disk / "q")
    out, gate = tmp_path / "out", tmp_path / "gate"
    out.mkdir()
    _gated(q, out, gate)
    first = Lines(_runner(q.root, "j1"))
    try:
        assert wait_until(lambda: (out / "t1.sh").exists(), 30)
        filler = _fill(small_disk)
        gate.touch()
        assert wait_until(lambda: first.said("after its exit (No space left on device)"), 30)
        first.proc.send_signal(signal.SIGTERM)
        err = first.end()
    finally:
        if first.proc.poll() is None:
            first.proc.kill()
    assert first.proc.returncode == 0 and "Traceback" not in err, err[-3000:]
    assert "its exit is recorded beside it" in err, err[-3000:]
    assert list((q.root / "working/m/j1").glob(".t*.sh.ended-0")), err[-3000:]
    filler.unlink()
    second = Lines(_runner(q.root, "j2"))
    err2 = second.end()
    assert second.proc.returncode == 0 and "Traceback" not in err2, err2[-3000:]
    assert _counts(out) == {f"t{i}.sh": 1 for i in range(1, 5)}, (_counts(out), err2[-2000:])
    assert sorted(p.name for p in (q.root / "finished/todo").glob("t*")) == \
        [f"t{i}.sh" for i in range(1, 5)]


def test_10_a_full_disk_that_clears_settles_in_the_same_runner(small_disk: Path,
                                                                tmp_path: Path) -> None:
    q = make_queue(small_disk / "q")
    out, gate = tmp_path / "out", tmp_path / "gate"
    out.mkdir()
    _gated(q, out, gate)
    first = Lines(_runner(q.root, "j1"))
    try:
        assert wait_until(lambda: (out / "t1.sh").exists(), 30)
        filler = _fill(small_disk)
        gate.touch()
        assert wait_until(lambda: first.said("after its exit (No space left on device)"), 30)
        filler.unlink()  # room again: the kept outcome is moved at the next heartbeat
        err = first.end()
    finally:
        if first.proc.poll() is None:
            first.proc.kill()
    assert first.proc.returncode == 0 and "Traceback" not in err, err[-3000:]
    assert "is settled now: finished" in err, err[-3000:]
    assert _counts(out) == {f"t{i}.sh": 1 for i in range(1, 5)}
    assert sorted(p.name for p in (q.root / "finished/todo").glob("t*")) == \
        [f"t{i}.sh" for i in range(1, 5)]
