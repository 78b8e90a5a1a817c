"""Issue 28's findings that need two real uids: a hostile member of the group against the
owner of a queue made by ``metaq init --group``, whose runner runs as the owner.

Each test is one finding: the member does, as itself, what the red team did, and what must
hold is that nothing of the member's runs as the owner, and no data of the owner's is lost.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.hostile.members import MEMBER, OWNER, Members

RUN_LIMIT = 60.0
"""Seconds the owner's runner may take on these small queues."""


def _script(path: Path, body: str, *, directives: str = "#METAQ MIN_WC_TIME 1m\n") -> None:
    path.write_text(f"#!/bin/bash\n{directives}{body}\n")
    path.chmod(0o755)


def _run(m: Members, q: Path, *extra: str, jobid: str = "j1") -> subprocess.CompletedProcess:
    done = m.metaq(m.owner, "run", "-q", str(q), "--nodes", "4", "--batch", "local",
                   "--jobid", jobid, "--machine", "m", "--grace", "1", *extra,
                   timeout=RUN_LIMIT)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return done


def _out(m: Members) -> Path:
    out = m.base / "out"
    out.mkdir(exist_ok=True)
    out.chmod(0o777)
    return out


# --- finding 1: settings only from the owner -----------------------------------------------


def test_1_a_member_cannot_write_or_replace_the_settings(members: Members) -> None:
    q = members.init_queue(settings=f"trusted_users: [{OWNER}]\n")
    st = os.stat(q / "metaq.yaml")
    assert stat.S_IMODE(st.st_mode) == 0o644 and st.st_uid == members.owner.uid
    assert os.stat(q).st_mode & stat.S_ISVTX  # no one removes what another made at the top

    def edit() -> None:
        with open(q / "metaq.yaml", "a") as f:
            f.write(f"trusted_users: [{MEMBER}]\n")

    def replace() -> None:
        mine = q / "todo" / "mine.yaml"
        mine.write_text(f"trusted_users: [{OWNER}, {MEMBER}]\n")
        os.rename(mine, q / "metaq.yaml")

    def remove() -> None:
        os.unlink(q / "metaq.yaml")

    for attack in (edit, replace, remove):
        try:
            members.member.do(attack)
        except AssertionError as e:
            assert "PermissionError" in str(e), e
        else:
            raise AssertionError(f"the member could {attack.__name__} metaq.yaml")
    assert f"[{MEMBER}]" not in (q / "metaq.yaml").read_text()


def test_1_settings_others_may_write_are_refused_in_one_sentence(members: Members) -> None:
    q = members.init_queue()
    (q / "metaq.yaml").chmod(0o664)  # as metaq init --group made it before
    done = members.metaq(members.owner, "status", "-q", str(q))
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "writable by others" in done.stderr, done.stderr
    (q / "metaq.yaml").chmod(0o644)
    os.chown(q / "metaq.yaml", members.member.uid, -1)  # a member's file in its place
    for command in ("status", "doctor"):
        done = members.metaq(members.owner, command, "-q", str(q))
        assert done.returncode == 1 and f"belongs to {MEMBER}" in done.stderr, done.stderr
    # The member's own runner may trust the member's own file; doctor says the owner's won't.
    done = members.metaq(members.member, "doctor", "-q", str(q))
    assert done.returncode == 1 and "settings: metaq.yaml" in done.stdout, done.stdout


def test_1_a_job_script_others_may_write_is_not_submitted(members: Members) -> None:
    q = members.init_queue()
    jobscript = q / "todo" / "job.sh"
    members.member.do(lambda: _script(jobscript, "echo member code"))
    _script(q / "todo" / "t.sh", "true")
    done = members.metaq(members.owner, "alloc", "-q", str(q), "--dry-run", "--system", "slurm",
                         "--jobscript", str(jobscript))
    assert done.returncode == 1 and "job script" in done.stderr and \
        f"belongs to {MEMBER}" in done.stderr, done.stderr


# --- finding 2: an array index runs the script stored beside it ---------------------------


def test_2_an_array_index_never_runs_a_script_put_in_its_place(members: Members) -> None:
    q = members.init_queue()
    out = _out(members)
    src = members.base / "sweep.sh"
    _script(src, f'touch {out}/owner-$METAQ_ARRAY_INDEX; sleep 0.2',
            directives="#METAQ MIN_WC_TIME 1m\n#METAQ ARRAY 0-3\n")
    os.chown(src, members.owner.uid, members.owner.gid)
    done = members.metaq(members.owner, "submit", "-q", str(q), str(src))
    assert done.returncode == 0, done.stderr
    evil = f"#!/bin/sh\ntouch {out}/member-$METAQ_ARRAY_INDEX\n"

    def take_over() -> None:  # the array's folder renamed, a new one with the member's script
        array = q / "todo" / "sweep.sh"
        os.rename(array, q / "todo" / "elsewhere")
        os.mkdir(array)
        (array / ".script").write_text(evil)
        (array / ".script").chmod(0o755)
        for i in ("0", "1"):
            os.rename(q / "todo" / "elsewhere" / i, array / i)

    members.member.do(take_over)
    _run(members, q)
    ran = sorted(p.name for p in out.iterdir())
    assert not [r for r in ran if r.startswith("member")], ran
    assert {"owner-2", "owner-3"} <= set(ran), ran  # the rest of the array ran as it was
    for i in ("0", "1"):
        reason = (q / "rejected" / "todo" / "sweep.sh" / f"{i}.reason").read_text()
        assert f"belongs to {MEMBER}" in reason, reason


# --- finding 3: the checked file runs, not what is at its path later -----------------------


SWAPPER = textwrap.dedent("""\
    import os, sys, time
    working, evil, count, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    done = set()
    deadline = time.monotonic() + 50
    while len(done) < n and time.monotonic() < deadline:
        for dirpath, dirs, files in os.walk(working):
            for name in files:
                if name.startswith("t") and name not in done:
                    tmp = os.path.join(dirpath, ".x" + name)
                    with open(evil, "rb") as src, open(tmp, "wb") as dst:
                        dst.write(src.read())
                    os.chmod(tmp, 0o755)
                    try:
                        os.rename(tmp, os.path.join(dirpath, name))
                    except OSError:
                        os.unlink(tmp)
                        continue
                    done.add(name)
        time.sleep(0.002)
    with open(count, "w") as f:
        f.write(str(len(done)))
    """)


def test_3_a_claimed_task_swapped_before_its_start_runs_as_checked(members: Members) -> None:
    """The owner's runner launches one task each 2 s, so the two it claims with the first
    wait in working/ with their checks done; the member swaps each for their own script
    there. The checked content starts all the same, and the member's never does."""
    q = members.init_queue(settings=f"trusted_users: [{OWNER}]\n")
    out = _out(members)
    for name in ("t1.sh", "t2.sh", "t3.sh"):
        members.owner.do(lambda name=name: _script(q / "todo" / name,
                                                   f"touch {out}/owner-{name}"))
    evil = members.base / "evil.sh"
    evil.write_text(f"#!/bin/sh\ntouch {out}/member-${{METAQ_TASK##*/}}\n")
    evil.chmod(0o755)
    count = members.base / "swapped"
    swapper = members.member.popen([sys.executable, "-c", SWAPPER, str(q / "working"),
                                    str(evil), str(count), "3"])
    try:
        _run(members, q, "--launch-pause", "2")
    finally:
        swapper.wait(timeout=60)
    assert int(count.read_text()) >= 2  # the member swapped files the runner had checked
    ran = sorted(p.name for p in out.iterdir())
    assert ran == ["owner-t1.sh", "owner-t2.sh", "owner-t3.sh"], ran


# --- a trusted user's file the group may write ---------------------------------------------


def test_a_member_cannot_edit_a_trusted_users_task_in_place(members: Members) -> None:
    """With trusted_users set, the trusted owner's script made under umask 002 is writable by
    the group; a member appends their own line to it, keeping its owner. It must not run as
    the owner: it is rejected, saying why, while a script of mode 0755 runs."""
    q = members.init_queue(settings=f"trusted_users: [{OWNER}]\n")
    out = _out(members)

    def write() -> None:
        for name, mode in (("shared.sh", 0o775), ("private.sh", 0o755)):
            _script(q / "todo" / name, f"touch {out}/owner-{name}")
            (q / "todo" / name).chmod(mode)

    members.owner.do(write)

    def edit() -> None:
        with open(q / "todo" / "shared.sh", "a") as f:
            f.write(f"touch {out}/member-was-here\n")

    members.member.do(edit)
    assert os.stat(q / "todo" / "shared.sh").st_uid == members.owner.uid  # still the owner's
    _run(members, q)
    ran = sorted(p.name for p in out.iterdir())
    assert ran == ["owner-private.sh"], ran
    # Just edited, it has not settled long enough to be moved to rejected/; status says why
    # it waits there.
    done = members.metaq(members.owner, "status", "-q", str(q))
    said = done.stdout + done.stderr
    assert "shared.sh" in said and "chmod g-w" in said, said
