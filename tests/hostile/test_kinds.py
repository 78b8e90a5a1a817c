"""Every kind of file a command reads (``FILE_KINDS`` of ``metaq_py.queue.layout``, one list),
planted with each of five things by a member of the group, as a real uid: a FIFO, a link to a
readable file of another user (an outsider, not in the group), a folder, a huge (sparse)
file and garbage. Then the owner's runner, ``status``, ``doctor``, ``report`` and ``alloc
--dry-run`` run, as the owner.

What must hold for every plant: no command hangs or prints a traceback, the good task runs
once, the outsider's file is neither changed nor shown, and nothing outside the queue is
written. A place the member may not write (the owner's own files) is planted by root, as a
careless owner or a queue made before these rules would have it, so that every reader meets
every plant.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from metaq_py.queue.layout import FILE_KINDS, FileKind
from metaq_py.queue.store import Queue
from tests.hostile.members import Members
from tests.hostile.test_members import _out, _script

NAMES = {"folder": "todo", "task": "t.sh", "array": "arr.sh", "machine": "m", "jobid": "dead",
         "writer": "w1"}
"""What the placeholders of a kind's path stand for in the planted queue."""

SECRET = "outsider-secret-7f3a"
LIMIT = 90.0
"""Seconds any one command may take on a planted queue before it counts as a hang."""

COMMANDS = {
    "run": ["run", "--nodes", "2", "--batch", "local", "--jobid", "j1", "--machine", "m",
            "--grace", "1"],
    "status": ["status"],
    "doctor": ["doctor"],
    "report": ["report"],
    "alloc": ["alloc", "--dry-run", "--system", "slurm"],
}


def where(kind: FileKind) -> str:
    """The path (relative to the queue) a kind is planted at."""
    return kind.path.format(**NAMES)


def test_every_kind_has_a_place_and_every_reader_a_command() -> None:
    assert len({k.name for k in FILE_KINDS}) == len(FILE_KINDS)
    for kind in FILE_KINDS:
        assert where(kind) and set(kind.readers) <= set(COMMANDS), kind


# --- the plants -------------------------------------------------------------------------------


def _fifo(path: Path, secret: Path) -> None:
    os.mkfifo(path)


def _link(path: Path, secret: Path) -> None:
    path.symlink_to(secret)


def _folder(path: Path, secret: Path) -> None:
    path.mkdir()
    (path / "inside").write_bytes(b"\0")


def _huge(path: Path, secret: Path) -> None:
    with open(path, "wb") as f:
        f.truncate(2 << 30)  # 2 GiB, sparse: what a read of it whole would take


def _garbage(path: Path, secret: Path) -> None:
    path.write_bytes(b'\x00\xff{"s": [[1,2,3,4,"x"]], "jobs": {}}\n[[[\n' * 2000)


PLANTS: dict[str, Callable[[Path, Path], None]] = {
    "fifo": _fifo, "link": _link, "folder": _folder, "huge": _huge, "garbage": _garbage}


def _plant(m: Members, q: Path, kind: FileKind, plant: str, secret: Path) -> str:
    """Put ``plant`` at ``kind``'s place, as the member, else as root; who did."""
    path = q / where(kind)

    def act() -> None:
        os.makedirs(path.parent, exist_ok=True)
        if os.path.lexists(path):
            os.rename(path, path.with_name(path.name + ".was"))
        PLANTS[plant](path, secret)

    try:
        m.member.do(act)
        return "member"
    except AssertionError as e:
        if "PermissionError" not in str(e):
            raise
    act()
    return "root"


# --- the queue they are planted in ----------------------------------------------------------


def _world(m: Members) -> tuple[Path, Path, Path]:
    """The owner's queue with one of each kind of file in place, the outsider's readable
    file, and the folder tasks mark they ran in."""
    q = m.init_queue(settings="heartbeat: 1s\nstale_after: 3s\npoll_interval: 1s\n"
                              "caps:\n  launch_pause: 0\n")
    out = _out(m)
    private = m.base / "outsider"
    private.mkdir(mode=0o755)
    secret = private / "notes.json"
    secret.write_text(f'{{"name": "{SECRET}", "nodes": 1, "arrival": 1, "walltime": 1}}\n')
    os.chown(private, m.outsider.uid, -1)
    os.chown(secret, m.outsider.uid, -1)
    src = m.base / "src"
    src.mkdir(mode=0o755)

    def build() -> None:
        _script(q / "todo" / "good.sh", f"touch {out}/good.sh")
        for where_ in ("todo/t.sh", "hold/todo/t.sh"):
            os.makedirs(q / os.path.dirname(where_), exist_ok=True)
            _script(q / where_, f"touch {out}/t.sh")
        queue = Queue(q)
        task = next(t for t in queue.scan().tasks if t.relpath == "t.sh")
        claim = queue.claim(task, machine="m", jobid="dead")
        assert claim is not None
        _script(q / "todo" / "t.sh", f"touch {out}/t.sh")  # another one waits again
        for state in ("finished", "failed"):
            os.makedirs(q / state / "todo", exist_ok=True)
            _script(q / state / "todo" / "t.sh", "true")
        (q / "failed/todo/t.sh.reason").write_text("exited with code 1\n")
        (q / "notices/t.sh.json").write_text('{"name": "n", "nodes": 1, "arrival": 4e9, '
                                             '"walltime": 60, "issued": 1}\n')
        (q / "alloc").mkdir(exist_ok=True)

    m.owner.do(build)
    _script(src / "arr.sh", f"touch {out}/arr-$METAQ_ARRAY_INDEX",
            directives="#METAQ MIN_WC_TIME 1m\n#METAQ ARRAY 0-1\n")
    done = m.metaq(m.owner, "submit", "-q", str(q), str(src / "arr.sh"))
    assert done.returncode == 0, done.stderr
    for command in ("status", "report"):  # the files of the tally and the status cache
        m.metaq(m.owner, command, "-q", str(q))
    m.owner.do(lambda: _own_job(q))
    return q, out, secret


def _own_job(q: Path) -> None:
    """The dead job's folder with its event log, as its runner left it."""
    from metaq_py.queue.disk.folders import own_folder

    own_folder(q, q / "jobs" / "dead")
    (q / "jobs/dead/events.jsonl").write_text('{"time": 1, "event": "runner-start"}\n')


def _fingerprint(path: Path) -> tuple:
    st = os.lstat(path)
    return st.st_mode, st.st_uid, st.st_size, st.st_mtime_ns, path.read_bytes()


def _commands(m: Members, q: Path) -> dict[str, subprocess.CompletedProcess[str]]:
    ran = {}
    for name, args in COMMANDS.items():
        try:
            ran[name] = m.metaq(m.owner, *args, "-q", str(q), timeout=LIMIT)
        except subprocess.TimeoutExpired:
            pytest.fail(f"metaq {name} hung on the planted queue")
    return ran


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_a_plant_at_every_kind_of_file(members: Members, plant: str) -> None:
    q, out, secret = _world(members)
    before = _fingerprint(secret)
    kinds = [k for k in FILE_KINDS if k.name != "settings"]
    by = {k.name: _plant(members, q, k, plant, secret) for k in kinds}
    ran = _commands(members, q)
    for name, done in ran.items():
        said = done.stdout + done.stderr
        assert "Traceback" not in said, f"metaq {name} ({by}):\n{said[-3000:]}"
        assert done.returncode in (0, 1), f"metaq {name}: {done.returncode}\n{said[-2000:]}"
        assert SECRET not in said, f"metaq {name} showed the outsider's file"
    assert ran["run"].returncode == 0, ran["run"].stderr[-3000:]
    assert (out / "good.sh").exists(), ran["run"].stderr[-3000:]
    assert _fingerprint(secret) == before
    assert sorted(p.name for p in secret.parent.iterdir()) == ["notes.json"]


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_a_plant_at_the_settings_is_refused_in_one_sentence(members: Members,
                                                            plant: str) -> None:
    q = members.init_queue()
    secret = members.base / "outsider.yaml"
    secret.write_text(f"trusted_users: [{SECRET}]\n")
    os.chown(secret, members.outsider.uid, -1)
    settings = next(k for k in FILE_KINDS if k.name == "settings")
    (q / "metaq.yaml").unlink()
    PLANTS[plant](q / where(settings), secret)
    for name, done in _commands(members, q).items():
        said = done.stdout + done.stderr
        assert done.returncode == 1 and "Traceback" not in said, f"metaq {name}: {said}"
        assert "metaq.yaml" in done.stderr and done.stderr.count("\n") == 1, done.stderr
        assert SECRET not in said
    if plant == "folder":
        shutil.rmtree(q / "metaq.yaml")
