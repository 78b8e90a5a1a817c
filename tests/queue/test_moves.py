"""The one move of a task with its companions (metaq_py/queue/moves.py): what travels with
it, what is left behind and removed, and the quiet renames of companions that may be absent."""

from __future__ import annotations

import os
from pathlib import Path

from metaq_py.queue.disk.folders import REASON_SUFFIX, free_name
from metaq_py.queue.lease import lease_path
from metaq_py.queue.logbook import (
    Logbook,
    logbook_path,
    publish_logbook,
    read_logbook,
    stage_logbook,
)
from metaq_py.queue.moves import history_entry, inode_of, move_task, rename_quietly


def write_logbook(task: Path, logbook: Logbook) -> Path:
    """Give ``task`` its logbook as a runner does: staged beside it, then published."""
    return publish_logbook(stage_logbook(task, logbook), task)


def _task(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\ntrue\n")
    return path


def test_a_move_takes_the_logbook_and_leaves_no_companion_behind(tmp_path: Path) -> None:
    src = _task(tmp_path / "working" / "m" / "1" / "t.sh")
    write_logbook(src, Logbook(inode=inode_of(src), submit=5.0, attempts=2))
    lease_path(src).write_text("{}")
    (src.parent / ".t.sh.cancel").write_text("stop")  # as `metaq cancel` names it
    dst = tmp_path / "todo" / "t.sh"
    assert move_task(src, dst, root=tmp_path) == dst
    book = read_logbook(dst, inode_of(dst))
    assert book is not None and (book.submit, book.attempts) == (5.0, 2)
    assert sorted(os.listdir(src.parent)) == []  # lease, cancel request and logbook gone
    assert not os.path.lexists(logbook_path(src))


def test_a_new_logbook_replaces_the_old_which_is_removed(tmp_path: Path) -> None:
    src = _task(tmp_path / "working" / "t.sh")
    write_logbook(src, Logbook(inode=inode_of(src), submit=5.0, attempts=1))
    dst = tmp_path / "finished" / "t.sh"
    new = Logbook(inode=inode_of(src), submit=5.0, attempts=3)  # the inode travels with it
    moved = move_task(src, dst, root=tmp_path, logbook=new)
    assert moved == dst
    assert not os.path.lexists(logbook_path(src))  # the old one does not linger
    book = read_logbook(dst, inode_of(dst))
    assert book is not None and book.attempts == 3


def test_a_done_tasks_reason_goes_with_it_only_from_a_done_state(tmp_path: Path) -> None:
    failed = _task(tmp_path / "failed" / "todo" / "t.sh")
    Path(f"{failed}{REASON_SUFFIX}").write_text("it failed\n")
    back = tmp_path / "todo" / "t.sh"
    assert move_task(failed, back, root=tmp_path) == back  # old_reason: on by default
    assert not os.path.lexists(f"{failed}{REASON_SUFFIX}")
    # In a task folder, "<task>.reason" may be another task: it stays.
    other = _task(tmp_path / "todo" / "u.sh.reason")
    task = _task(tmp_path / "todo" / "u.sh")
    assert move_task(task, tmp_path / "hold" / "u.sh", root=tmp_path, old_reason=False)
    assert other.exists()


def test_a_reason_is_written_beside_the_moved_task(tmp_path: Path) -> None:
    src = _task(tmp_path / "todo" / "t.sh")
    dst = move_task(src, tmp_path / "rejected" / "t.sh", root=tmp_path, reason="bad header")
    assert dst is not None
    assert Path(f"{dst}{REASON_SUFFIX}").read_text() == "bad header\n"


def test_a_vanished_task_moves_nothing(tmp_path: Path) -> None:
    dst = tmp_path / "finished" / "gone.sh"
    assert move_task(tmp_path / "todo" / "gone.sh", dst, root=tmp_path,
                     logbook=Logbook(inode=0, submit=1.0)) is None
    assert not os.path.lexists(dst)
    assert not [p for p in (tmp_path / "finished").rglob("*")]  # no staged logbook left


def test_a_move_never_overwrites_another_task(tmp_path: Path) -> None:
    taken = _task(tmp_path / "finished" / "t.sh")
    src = _task(tmp_path / "working" / "t.sh")
    dst = move_task(src, taken, root=tmp_path)
    assert dst == tmp_path / "finished" / "t.sh.1"
    assert free_name(taken) == tmp_path / "finished" / "t.sh.2"
    assert taken.read_text() == "#!/bin/sh\ntrue\n"


def test_quiet_renames_say_whether_they_moved_anything(tmp_path: Path) -> None:
    a = tmp_path / "a"
    a.write_text("x")
    assert rename_quietly(a, tmp_path / "b") is True
    assert (tmp_path / "b").read_text() == "x"
    assert rename_quietly(a, tmp_path / "c") is False  # not there
    assert rename_quietly(tmp_path / ("n" * 300), tmp_path / "d") is False  # too long to be
    assert inode_of(tmp_path / "b") == os.lstat(tmp_path / "b").st_ino
    assert inode_of(a) == -1


def test_a_move_with_a_reason_needs_the_reasons_name_free_too(tmp_path: Path) -> None:
    _task(tmp_path / "rejected" / "t.sh.reason")  # a task of that name, done before
    src = _task(tmp_path / "todo" / "t.sh")
    dst = move_task(src, tmp_path / "rejected" / "t.sh", root=tmp_path, reason="bad")
    assert dst == tmp_path / "rejected" / "t.sh.1"
    assert Path(f"{dst}{REASON_SUFFIX}").read_text() == "bad\n"
    assert (tmp_path / "rejected" / "t.sh.reason").read_text() == "#!/bin/sh\ntrue\n"


def test_a_history_entry_leaves_out_what_is_not_known() -> None:
    assert history_entry("requeued", now=5.0, job="7", host=None, reason="preempted",
                         exit_code=None) == {"time": 5.0, "event": "requeued", "job": "7",
                                             "reason": "preempted"}


def test_a_packed_logbook_replaces_the_old_which_is_removed_not_moved(tmp_path: Path) -> None:
    """With a pack (a runner keeping the logbooks of done tasks together), the new logbook
    goes to the pack before the rename, and the old one beside the task is removed: it does
    not follow the task, where it would stand beside it as a second, stale record."""
    src = _task(tmp_path / "working" / "t.sh")
    write_logbook(src, Logbook(inode=inode_of(src), submit=5.0, attempts=1))
    dst = tmp_path / "finished" / "t.sh"
    new = Logbook(inode=inode_of(src), submit=5.0, attempts=3)
    packed: list[tuple[Path, Logbook]] = []
    moved = move_task(src, dst, root=tmp_path, logbook=new,
                      pack=lambda at, book: packed.append((at, book)))
    assert moved == dst and packed == [(dst, new)]
    assert not os.path.lexists(logbook_path(src))
    assert not os.path.lexists(logbook_path(dst))
