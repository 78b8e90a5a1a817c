"""Logbooks of done tasks packed into their runner's ``jobs/<jobid>/logbooks.jsonl``: a done
task keeps one inode, and every reader still finds its logbook (issue 29, part 2)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from metaq_py.queue.admin import QueueAdmin
from metaq_py.queue.logbook import PACK_NAME, PackedLogbooks, find_logbook
from metaq_py.queue.store import Queue

SCRIPT = "#!/bin/sh\n#METAQ RETRIES 0\necho hi\n"


@pytest.fixture
def q(tmp_path: Path) -> Queue:
    return Queue.init(tmp_path / "q")


def put(q: Queue, name: str) -> Path:
    path = q.root / "todo" / name
    path.write_text(SCRIPT)
    path.chmod(0o755)
    return path


def run_one(q: Queue, name: str, code: int, *, jobid: str = "j1"):
    task = next(t for t in q.scan(full=True).tasks if t.relpath == name)
    claim = q.claim(task, machine="m", jobid=jobid, host="h", pid=os.getpid())
    assert claim is not None
    return q.finish(claim, exit_code=code)


def hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_a_finished_task_keeps_one_inode_and_its_logbook_is_packed(q: Queue) -> None:
    put(q, "a.sh")
    moved = run_one(q, "a.sh", 0)
    assert moved is not None and moved.path == q.root / "finished/todo/a.sh"
    assert hidden(q.root / "finished/todo") == []  # no .a.sh.record beside it
    pack = q.root / "jobs/j1" / PACK_NAME
    line = json.loads(pack.read_text().splitlines()[-1])
    assert line["task"] == "finished/todo/a.sh" and line["inode"] == moved.path.stat().st_ino
    book = find_logbook(moved.path, moved.path.stat().st_ino, Queue(q.root).packed)
    assert book is not None and [h["event"] for h in book.history] == ["finished"]
    assert book.history[0]["job"] == "j1"


def test_a_failed_task_is_retried_with_its_packed_history(q: Queue) -> None:
    put(q, "b.sh")
    moved = run_one(q, "b.sh", 3)
    assert moved is not None and moved.state == "failed"
    assert hidden(q.root / "failed/todo") == []  # no .b.sh.record beside it
    assert (q.root / "failed/todo/b.sh.reason").is_file()  # the reason people read
    back = QueueAdmin(Queue(q.root)).retry("b.sh")
    book = find_logbook(back.path, back.path.stat().st_ino, None)  # beside it while it waits
    assert book is not None
    assert [h["event"] for h in book.history] == ["failed", "retried"]
    assert book.history[0]["exit_code"] == 3 and book.attempts == 0


def test_a_line_of_another_file_of_the_same_name_is_not_taken(q: Queue) -> None:
    put(q, "c.sh")
    moved = run_one(q, "c.sh", 0)
    assert moved is not None
    inode = moved.path.stat().st_ino
    other = q.root / "jobs/j0" / PACK_NAME  # an earlier job's line for an earlier c.sh
    other.parent.mkdir()
    other.write_text(json.dumps({"task": "finished/todo/c.sh", "inode": inode + 1,
                                 "submit": 1.0, "attempts": 7, "history": []}) + "\n")
    packed = PackedLogbooks(q.root)
    book = packed.find(moved.path, inode)
    assert book is not None and book.attempts == 0 and book.history[-1]["job"] == "j1"
    earlier = packed.find(moved.path, inode + 1)
    assert earlier is not None and earlier.attempts == 7  # told apart by the inode alone


def test_torn_and_garbage_lines_are_skipped(q: Queue) -> None:
    put(q, "d.sh")
    put(q, "e.sh")
    d = run_one(q, "d.sh", 0)
    pack = q.root / "jobs/j1" / PACK_NAME
    with pack.open("ab") as f:
        f.write(b"not json\n{\"task\": 3}\n\x00\xff\n")
    e = run_one(q, "e.sh", 0)
    with pack.open("ab") as f:
        f.write(b'{"task": "finished/todo/x.sh", "ino')  # torn by a kill -9
    packed = PackedLogbooks(q.root)
    assert d is not None and e is not None
    assert packed.find(d.path, d.path.stat().st_ino) is not None
    assert packed.find(e.path, e.path.stat().st_ino) is not None


@pytest.mark.parametrize("kind", ["symlink", "fifo", "folder"])
def test_a_thing_planted_at_the_pack_is_set_aside_never_followed(q: Queue, tmp_path: Path,
                                                                  kind: str) -> None:
    pack = q.root / "jobs/j1" / PACK_NAME
    pack.parent.mkdir(parents=True)
    target = tmp_path / "elsewhere"
    target.write_text("")
    if kind == "symlink":
        pack.symlink_to(target)
    elif kind == "fifo":
        os.mkfifo(pack)
    else:
        pack.mkdir()
    put(q, "f.sh")
    moved = run_one(q, "f.sh", 0)
    assert moved is not None
    assert target.read_text() == ""  # nothing written through the link
    assert pack.is_file() and not pack.is_symlink()
    assert any(p.name.startswith(f"{PACK_NAME}.planted-") for p in pack.parent.iterdir())
    assert find_logbook(moved.path, moved.path.stat().st_ino, PackedLogbooks(q.root))


def test_show_prints_a_packed_history(q: Queue) -> None:
    put(q, "g.sh")
    run_one(q, "g.sh", 5)
    out = subprocess.run(["metaq", "show", "--queue", str(q.root), "--json", "g.sh"],
                         capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    assert [h["event"] for h in data["history"]] == ["failed"]
    assert data["history"][0]["exit_code"] == 5


@pytest.mark.parametrize("kind", ["fifo", "symlink", "huge"])
def test_a_planted_pack_is_never_followed_nor_waited_on_by_readers(q: Queue, tmp_path: Path,
                                                                   kind: str) -> None:
    put(q, "h.sh")
    run_one(q, "h.sh", 0)
    planted = q.root / "jobs/zz" / PACK_NAME
    planted.parent.mkdir()
    secret = tmp_path / "secret.jsonl"
    secret.write_text(json.dumps({"task": "finished/todo/h.sh", "inode": 1, "submit": 1,
                                  "attempts": 9, "history": [{"event": "forged"}]}) + "\n")
    if kind == "fifo":
        os.mkfifo(planted)
    elif kind == "symlink":
        planted.symlink_to(secret)
    else:
        with planted.open("wb") as f:
            f.truncate(2 << 30)  # sparse: a reader that read it whole would take 2 GiB
    out = subprocess.run(["metaq", "show", "--queue", str(q.root), "--json", "h.sh"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert [h["event"] for h in json.loads(out.stdout)["history"]] == ["finished"]
    assert "forged" not in out.stdout


def test_a_long_lived_reader_finds_what_was_packed_after_it_looked(q: Queue) -> None:
    put(q, "late1.sh")
    first = run_one(q, "late1.sh", 0)
    packed = PackedLogbooks(q.root)
    assert first is not None and packed.find(first.path, first.path.stat().st_ino)
    put(q, "late2.sh")
    put(q, "late3.sh")
    second = run_one(q, "late2.sh", 0)  # the same job's pack, grown since
    third = run_one(q, "late3.sh", 0, jobid="j9")  # a new job's pack
    assert second is not None and third is not None
    assert packed.find(second.path, second.path.stat().st_ino) is not None
    assert packed.find(third.path, third.path.stat().st_ino) is not None
