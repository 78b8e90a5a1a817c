"""``#METAQ LOG`` where METAQ's users put it: under the queue's ``log/`` folder or in the
owner's own folders, missing folders made; never into someone else's folder, never through a
link someone else planted. Real runners, real task processes, real files."""

from __future__ import annotations

import os
from pathlib import Path

from metaq_py.queue.store import Queue
from tests.runner_helpers import events, make_queue, of, runner, where

NOBODY = 65534


def generate(q: Queue, name: str, log: str, body: str = 'echo "hello from $0"') -> Path:
    """Write a task as METAQ's campaign generators do: the file in place, then chmod."""
    path = q.root / "todo" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        f.write(f"#!/bin/bash\n#METAQ NODES 1\n#METAQ MIN_WC_TIME 1:00\n#METAQ LOG {log}\n\n"
                f"{body}\n")
    os.chmod(path, 0o755)
    return path


def test_a_generated_task_logs_into_the_queues_log_folder(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    assert not (q.root / "log").exists()
    generate(q, "prop.sh", f"{q.root.absolute()}/log/prop.sh.log")
    generate(q, "deep.sh", f"{tmp_path}/mine/campaign/step1/deep.log")  # the owner's own
    assert runner(q).run() == 0
    assert where(q, "prop.sh") == "finished" and where(q, "deep.sh") == "finished"
    assert (q.root / "log/prop.sh.log").read_text().startswith("hello from ")
    assert (tmp_path / "mine/campaign/step1/deep.log").read_text().startswith("hello from ")


def test_a_log_in_another_owners_folder_is_refused_with_one_line(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)  # root's, and nobody may not write in it
    task = generate(q, "nb.sh", f"{theirs}/nb.log")
    os.chown(task, NOBODY, NOBODY)
    old = os.stat(task).st_mtime - 60
    os.utime(task, (old, old))
    assert runner(q).run() == 0
    assert where(q, "nb.sh") == "rejected"
    reason = (q.root / "rejected/todo/nb.sh.reason").read_text().strip()
    assert len(reason.splitlines()) == 1
    assert f"folder {theirs} belongs to root" in reason and "may not write in it" in reason
    assert list(theirs.iterdir()) == []
    assert not of(events(q), "start")


def test_a_log_through_a_planted_link_is_refused_with_one_line(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    victim = tmp_path / "victim"
    victim.mkdir()
    (q.root / "log").symlink_to(victim)  # a folder link someone else made
    os.lchown(q.root / "log", NOBODY, NOBODY)
    generate(q, "a.sh", f"{q.root.absolute()}/log/a.log")
    (q.root / "log2").mkdir()
    (q.root / "log2/b.log").symlink_to(victim / "b.txt")  # a link as the log file itself
    generate(q, "b.sh", f"{q.root.absolute()}/log2/b.log")
    for name in ("a.sh", "b.sh"):
        old = os.stat(q.root / "todo" / name).st_mtime - 60
        os.utime(q.root / "todo" / name, (old, old))
    assert runner(q).run() == 0
    for name, words in (("a.sh", "is a symlink made by nobody"), ("b.sh", "is a symlink")):
        assert where(q, name) == "rejected"
        reason = (q.root / f"rejected/todo/{name}.reason").read_text().strip()
        assert len(reason.splitlines()) == 1 and words in reason
    assert list(victim.iterdir()) == []
