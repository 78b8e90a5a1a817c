"""Issue 28, findings 4 to 7: writes that followed links planted by a member, and a doctor
that removed tasks. The member plants as a real uid of the group; the owner's commands and
runner run as the owner."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from metaq_py.queue.store import Queue
from tests.hostile.members import Members
from tests.hostile.test_members import _out, _script


def _victim(m: Members) -> Path:
    """A private file of the owner's, outside the queue, that no command may change."""
    folder = m.base / "owner-private"
    m.owner.do(lambda: folder.mkdir(mode=0o700))
    m.owner.do(lambda: (folder / "notes.txt").write_text("the owner's notes\n"))
    return folder / "notes.txt"


def _claim(m: Members, q: Path, name: str, jobid: str = "j9") -> Path:
    """The owner's runner's claim of the waiting ``todo/<name>`` (made in a child as the
    owner); its place in ``working/``."""
    def take() -> None:
        queue = Queue(q)
        task = next(t for t in queue.scan().tasks if t.relpath == name)
        assert queue.claim(task, machine="m", jobid=jobid) is not None

    m.owner.do(take)
    return q / "working" / "m" / jobid / name


def test_4_cancel_replaces_a_planted_link_and_says_who_by_uid(members: Members) -> None:
    q = members.init_queue()
    victim = _victim(members)
    members.owner.do(lambda: _script(q / "todo" / "t.sh", "sleep 1"))
    claimed = _claim(members, q, "t.sh")
    request = claimed.with_name(".t.sh.cancel")
    members.member.do(lambda: request.symlink_to(victim))
    done = members.metaq(members.owner, "cancel", "-q", str(q), "t.sh",
                         env={"USER": "mallory", "LOGNAME": "mallory"})
    assert done.returncode == 0, done.stderr
    assert victim.read_text() == "the owner's notes\n"
    assert stat.S_ISREG(os.lstat(request).st_mode)
    said = request.read_text()
    assert said.startswith("cancelled by metaqowner ") and "mallory" not in said, said


def test_5_a_job_folder_made_before_the_runner_is_not_its_own(members: Members) -> None:
    """The member makes ``jobs/j1/`` before the owner's runner starts, with a FIFO where
    its event log goes and links where its hostfile's temporary name, a task's log and its
    run folder go; then, while the runner runs, tries to swap its folder and write in it."""
    q = members.init_queue()
    out = _out(members)
    victim = _victim(members)
    members.owner.do(lambda: _script(q / "todo" / "t.sh", f"touch {out}/t.sh; sleep 1"))
    job = q / "jobs" / "j1"

    def plant() -> None:
        for folder in ("hostfiles", "logs/todo", "runs"):
            (job / folder).mkdir(parents=True)
        os.mkfifo(job / "events.jsonl")
        for pid in range(2, 40000, 1):  # every temporary name the old hostfile writer used
            if pid % 97 == 0:
                (job / "hostfiles" / f".localhost.{pid}.tmp").symlink_to(victim)
        (job / "logs/todo/t.sh.log").symlink_to(victim)
        (job / "runs/todo").symlink_to(victim.parent)

    members.member.do(plant)
    runner = members.owner.popen(
        [*members_metaq(), "run", "-q", str(q), "--nodes", "2", "--batch", "local",
         "--jobid", "j1", "--machine", "m", "--grace", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_for(lambda: (out / "t.sh").exists(), runner)

        def swap() -> None:
            os.rename(job, q / "jobs" / "mine")

        def write_in() -> None:
            (job / "logs" / "x").write_text("")

        for attack in (swap, write_in):
            try:
                members.member.do(attack)
            except AssertionError as e:
                assert "PermissionError" in str(e), e
            else:
                raise AssertionError(f"the member could {attack.__name__} the job folder")
    finally:
        _, err = runner.communicate(timeout=60)
    assert runner.returncode == 0 and "Traceback" not in err, err[-3000:]
    assert victim.read_text() == "the owner's notes\n"
    assert sorted(p.name for p in victim.parent.iterdir()) == ["notes.txt"]
    st = os.lstat(job)
    assert stat.S_ISDIR(st.st_mode) and st.st_uid == members.owner.uid
    assert not st.st_mode & 0o022
    assert [p for p in (q / "jobs").iterdir() if p.name.startswith("j1.planted-")]
    assert (q / "finished/todo/t.sh").exists()


def test_6_submit_to_a_folder_planted_as_a_link_stays_in_the_queue(members: Members) -> None:
    q = members.init_queue()
    outside = members.base / "member-elsewhere"
    members.member.do(lambda: outside.mkdir(mode=0o777))
    members.member.do(lambda: (q / "todo" / "sub").symlink_to(outside))
    src = members.base / "s.sh"
    _script(src, "true")
    done = members.metaq(members.owner, "submit", "-q", str(q), "--folder", "sub", str(src))
    assert done.returncode == 0, done.stderr
    assert list(outside.iterdir()) == []
    assert stat.S_ISREG(os.lstat(q / "todo/sub/s.sh").st_mode)
    assert not os.path.islink(q / "todo/sub")


def test_7_doctor_fix_never_removes_a_task_in_any_state(members: Members) -> None:
    q = members.init_queue()
    scripts = members.base / "scripts"
    members.owner.do(lambda: scripts.mkdir())
    for name in ("run.sh", "done.sh", "wait.sh"):
        members.owner.do(lambda name=name: _script(scripts / name, "sleep 1"))
    # A running task reached through a link, a finished one, and a waiting one.
    members.owner.do(lambda: (q / "todo" / "run.sh").symlink_to(scripts / "run.sh"))
    claimed = _claim(members, q, "run.sh")
    members.owner.do(lambda: (q / "finished" / "todo").mkdir(parents=True))
    members.owner.do(lambda: (q / "finished/todo/done.sh").symlink_to(scripts / "done.sh"))
    members.owner.do(lambda: (q / "todo" / "wait.sh").symlink_to(scripts / "wait.sh"))
    for name in ("run.sh", "done.sh", "wait.sh"):  # their scripts moved away
        members.owner.do(lambda name=name: os.rename(scripts / name, scripts / f"old-{name}"))
    done = members.metaq(members.owner, "doctor", "--fix", "-q", str(q))
    assert "Traceback" not in done.stderr, done.stderr
    assert os.path.islink(claimed) and os.path.islink(q / "finished/todo/done.sh")
    assert os.path.islink(q / "rejected/todo/wait.sh"), done.stdout
    assert "not a script there" in (q / "rejected/todo/wait.sh.reason").read_text()


def members_metaq() -> list[str]:
    import sys

    return [sys.executable, "-m", "metaq_py"]


def _wait_for(seen, runner: subprocess.Popen) -> None:
    import time

    deadline = time.monotonic() + 60
    while not seen():
        assert runner.poll() is None, runner.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "the task never started"
        time.sleep(0.05)
