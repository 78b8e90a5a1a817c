"""``metaq doctor``: each anomaly of issue 15 planted in a real queue, listed by the real
command without a byte changing, and fixed by ``--fix`` where a fix loses no one's data.

A row is (name, plant, kind, where, fixed): ``plant(world)`` makes the anomaly,
``kind``/``where`` is what the listing must say (kind and path relative to the queue),
and ``fixed(world)`` asserts what ``--fix`` did (``None``: the anomaly has no fix, so it
must still be listed after ``--fix``). Add a case in one row.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from metaq_py.queue.lease import lease_path
from metaq_py.queue.store import Queue
from tests.runner_helpers import make_queue, task


@dataclass
class World:
    q: Queue
    victim: Path


def _snapshot(*roots: Path) -> dict[str, tuple]:
    """Every path below ``roots`` (links not followed) with its type, mode, owner, mtime
    and a digest of a regular file's content."""
    out: dict[str, tuple] = {}
    for root in roots:
        for dirpath, dirs, files in os.walk(root):
            for name in dirs + files:
                p = os.path.join(dirpath, name)
                st = os.lstat(p)
                digest = ""
                if os.path.isfile(p) and not os.path.islink(p):
                    digest = hashlib.sha1(Path(p).read_bytes()).hexdigest()
                out[p] = (st.st_mode, st.st_uid, st.st_mtime_ns, digest)
    return out


def doctor(q: Queue, *args: str) -> tuple[int, list[dict]]:
    done = subprocess.run([sys.executable, "-m", "metaq_py", "doctor", "--json", "-q",
                           str(q.root), *args], capture_output=True, text=True, timeout=60)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout)


def _claim(w: World, name: str, jobid: str, *, age: float) -> Path:
    task(w.q, name, "true")
    t = next(t for t in w.q.scan().tasks if t.relpath == name)
    claim = w.q.claim(t, machine="m", jobid=jobid)
    assert claim is not None
    old = time.time() - age
    os.utime(lease_path(claim.path), (old, old))
    return lease_path(claim.path)


# --- plants ---------------------------------------------------------------------------------


def link_to_folder(w: World) -> None:
    (w.q.root / "todo/d").symlink_to(w.victim)


def link_in_logs(w: World) -> None:
    (w.q.root / "jobs/J1/logs/todo").mkdir(parents=True)
    (w.q.root / "jobs/J1/logs/todo/t.sh.log").symlink_to(w.victim / "notes.txt")


def fifo_in_finished(w: World) -> None:
    (w.q.root / "finished/todo").mkdir()
    os.mkfifo(w.q.root / "finished/todo/f.sh")


def loose_mode(w: World) -> None:
    task(w.q, "open.sh", "true").chmod(0o777)


def stale_lease(w: World) -> None:
    _claim(w, "s.sh", "41", age=3600)


def garbage_lease(w: World) -> None:
    _claim(w, "g.sh", "42", age=0).write_text('{"start": "abc", "pid": "x"}')


def stale_garbage_lease(w: World) -> None:
    lease = _claim(w, "h.sh", "43", age=0)
    lease.write_text("[" * 5000)
    old = time.time() - 3600
    os.utime(lease, (old, old))


def orphan_lease(w: World) -> None:
    (w.q.root / "working/m/44").mkdir(parents=True)
    (w.q.root / "working/m/44/.gone.sh.lease").write_text("{}")


def bad_notice(w: World) -> None:
    (w.q.root / "notices/n.json").write_text('{"name": "n", "nodes": "many"}')


def sly_notice(w: World) -> None:
    """A notice that claims to be issued in 9999, for work the next day."""
    far = 253402210800.0  # 9999-12-31
    (w.q.root / "notices/sly.json").write_text(json.dumps(
        {"name": "sly", "nodes": 1, "arrival": far, "walltime": 60, "issued": far - 86400}))


def long_name(w: World) -> None:
    task(w.q, "c" * 230 + ".sh", "true")


def stray_folder(w: World) -> None:
    (w.q.root / "stuff").mkdir()
    (w.q.root / "stuff/keep.txt").write_text("someone's\n")


def empty_stray(w: World) -> None:
    (w.q.root / "empty").mkdir()


def file_in_done_state(w: World) -> None:
    (w.q.root / "failed/loose.sh").write_text("#!/bin/bash\n")


def planted_link(w: World) -> None:
    (w.q.root / "todo/x.sh.planted-abc123").symlink_to("/etc/passwd")


def linked_queue_folder(w: World) -> None:
    os.rmdir(w.q.root / "cancelled")
    (w.q.root / "cancelled").symlink_to(w.victim)


def untrusted_owner(w: World) -> None:
    path = task(w.q, "theirs.sh", "true")
    os.chown(path, 65534, 65534)


# --- what --fix must have done --------------------------------------------------------------


def gone(rel: str) -> Callable[[World], None]:
    def check(w: World) -> None:
        assert not os.path.lexists(w.q.root / rel)
    return check


def mode_is(rel: str, mode: int) -> Callable[[World], None]:
    def check(w: World) -> None:
        assert (w.q.root / rel).stat().st_mode & 0o777 == mode
    return check


def back_in_todo(name: str) -> Callable[[World], None]:
    def check(w: World) -> None:
        assert (w.q.root / "todo" / name).is_file()
        assert not list((w.q.root / "working").rglob(name))
    return check


def in_rejected(pattern: str) -> Callable[[World], None]:
    def check(w: World) -> None:
        found = [p for p in (w.q.root / "rejected/todo").glob(pattern)
                 if not p.name.endswith(".reason")]
        assert len(found) == 1 and os.path.exists(f"{found[0]}.reason")
    return check


def notice_rejected(w: World) -> None:
    assert (w.q.root / "notices/rejected/n.json").is_file()
    assert (w.q.root / "notices/rejected/n.json.reason").is_file()


def folder_set_aside(w: World) -> None:
    assert not os.path.lexists(w.q.root / "cancelled")
    assert [p.is_symlink() for p in w.q.root.glob("cancelled.planted-*")] == [True]


Fixed = Callable[[World], None] | None
CASES: list[tuple[str, Callable[[World], None], str, str, Fixed]] = [
    ("link to a folder in todo/", link_to_folder, "symlink", "todo/d", gone("todo/d")),
    ("link at a default log", link_in_logs, "symlink", "jobs/J1/logs/todo/t.sh.log",
     gone("jobs/J1/logs/todo/t.sh.log")),
    ("FIFO in finished/", fifo_in_finished, "special", "finished/todo/f.sh",
     gone("finished/todo/f.sh")),
    ("task writable by all", loose_mode, "mode", "todo/open.sh", mode_is("todo/open.sh", 0o755)),
    ("stale lease", stale_lease, "stale-lease", "working/m/41/.s.sh.lease",
     back_in_todo("s.sh")),
    ("malformed lease, fresh", garbage_lease, "bad-lease", "working/m/42/.g.sh.lease",
     None),
    ("malformed lease, stale", stale_garbage_lease, "bad-lease",
     "working/m/43/.h.sh.lease", back_in_todo("h.sh")),
    ("orphan lease", orphan_lease, "orphan-lease", "working/m/44/.gone.sh.lease",
     gone("working/m/44/.gone.sh.lease")),
    ("bad notice", bad_notice, "bad-notice", "notices/n.json", notice_rejected),
    ("notice issued in the far future", sly_notice, "bad-notice", "notices/sly.json",
     gone("notices/sly.json")),
    ("name too long", long_name, "long-name", "todo/" + "c" * 230 + ".sh",
     in_rejected("long-name-*")),
    ("stray folder with a file", stray_folder, "stray", "stuff", None),
    ("empty stray folder", empty_stray, "stray", "empty", gone("empty")),
    ("a file loose in failed/", file_in_done_state, "stray", "failed/loose.sh", None),
    ("planted link set aside", planted_link, "planted", "todo/x.sh.planted-abc123",
     gone("todo/x.sh.planted-abc123")),
    ("a link in place of cancelled/", linked_queue_folder, "symlink", "cancelled",
     folder_set_aside),
]
if os.getuid() == 0:  # only root can give a file to another user
    CASES.append(("a task of an untrusted owner", untrusted_owner, "owner", "todo/theirs.sh",
                  in_rejected("theirs.sh")))


def _world(tmp: Path) -> World:
    from tests.runner_helpers import SETTINGS

    # A fresh lease must stay fresh while doctor runs three times on a loaded machine (the
    # runners' tests' 3 s would not); the stale plants are an hour old.
    q = make_queue(tmp / "q", SETTINGS.replace("stale_after: 3s", "stale_after: 10m")
                   + "trusted_users: [root]\n")
    victim = tmp / "victim"
    victim.mkdir(mode=0o700)
    (victim / "notes.txt").write_text("secret\n")
    task(q, "good.sh", "true")
    return World(Queue(q.root), victim)


def test_a_clean_queue_has_no_anomaly(tmp_path: Path) -> None:
    w = _world(tmp_path)
    assert doctor(w.q) == (0, [])


@pytest.mark.parametrize(("name", "plant", "kind", "where", "fixed"), CASES,
                         ids=[c[0] for c in CASES])
def test_doctor_lists_then_fixes(tmp_path: Path, name: str, plant: Callable[[World], None],
                                 kind: str, where: str, fixed: Fixed) -> None:
    w = _world(tmp_path)
    plant(w)
    before = _snapshot(tmp_path)
    code, found = doctor(w.q)
    assert code == 1
    assert [(a["kind"], a["path"]) for a in found] == [(kind, where)], found
    assert all(a["problem"] and a["remedy"] for a in found)
    assert _snapshot(tmp_path) == before, "doctor without --fix changed something"
    victim = _snapshot(w.victim)
    code, listed = doctor(w.q, "--fix")
    assert _snapshot(w.victim) == victim
    assert (w.q.root / "todo/good.sh").is_file()
    after = doctor(w.q)
    if fixed is None:
        assert listed[0]["fixed"] is None and code == 1
        assert [(a["kind"], a["path"]) for a in after[1]] == [(kind, where)]
    else:
        assert listed[0]["fixed"] and not listed[0]["fixed"].startswith("not fixed"), listed
        assert code == 0
        fixed(w)
        assert after == (0, [])


def test_text_listing_says_what_to_do(tmp_path: Path) -> None:
    w = _world(tmp_path)
    link_to_folder(w)
    bad_notice(w)
    done = subprocess.run([sys.executable, "-m", "metaq_py", "doctor", "-q", str(w.q.root)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines[0].startswith("bad-notice: notices/n.json: ")
    assert "what to do:" in lines[1] and "--fix would move it to notices/rejected/" in lines[2]
    assert lines[3].startswith("symlink: todo/d: a link to ")
    assert lines[-1] == "2 anomalies found; nothing was changed"
