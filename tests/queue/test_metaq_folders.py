"""``priority/``, ``todo/``, ``hold/`` and their sub-folders keep the meaning METAQ gave them,
and a task written in place and then made executable, as METAQ's generators write them, is
seen as soon as it is executable."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from metaq_py.queue.admin import QueueAdmin
from metaq_py.queue.campaign.deps import Resolver
from metaq_py.queue.doctor import examine
from metaq_py.queue.store import Queue
from tests.queue.test_store import put


@pytest.fixture
def q(tmp_path: Path) -> Queue:
    return Queue.init(tmp_path / "q")


def test_priority_goes_first_and_sub_folders_at_any_depth_are_scanned(q: Queue) -> None:
    put(q.root / "todo/old.sh", "#METAQ PRIORITY 9\n")
    os.utime(q.root / "todo/old.sh", (100, 100))
    put(q.root / "todo/a/b/c/deep.sh")
    put(q.root / "priority/ens3/urgent.sh")
    put(q.root / "hold/todo/parked.sh")
    put(q.root / "hold/by-hand.sh")
    assert [t.id for t in q.pending()] == ["priority/ens3/urgent.sh", "todo/old.sh",
                                           "todo/a/b/c/deep.sh"]


def test_a_file_put_into_hold_by_hand_is_held_and_released_to_todo(q: Queue) -> None:
    admin = QueueAdmin(q)
    put(q.root / "hold/x.sh")  # as a METAQ user parks a task: mv todo/x.sh hold/
    put(q.root / "hold/ens1/y.sh")
    put(q.root / "todo/z.sh")
    admin.hold("z.sh")  # metaq hold keeps the task's folder in the path
    held = sorted((e.id, e.path.relative_to(q.root).as_posix()) for e in admin.entries("hold"))
    assert held == [("todo/ens1/y.sh", "hold/ens1/y.sh"), ("todo/x.sh", "hold/x.sh"),
                    ("todo/z.sh", "hold/todo/z.sh")]
    assert q.pending() == []
    assert Resolver(q).where("todo/ens1/y.sh") == "hold"
    assert examine(q, now=q.clock.now()) == []  # nothing stray about them
    assert admin.find("hold/x.sh").id == "todo/x.sh"
    assert admin.release("x.sh").path == q.root / "todo/x.sh"
    assert admin.release("todo/ens1/y.sh").path == q.root / "todo/ens1/y.sh"
    assert admin.release("z.sh").path == q.root / "todo/z.sh"
    assert sorted(t.id for t in q.pending()) == ["todo/ens1/y.sh", "todo/x.sh", "todo/z.sh"]


def test_a_file_written_in_place_then_chmodded_is_seen_at_the_next_scan(q: Queue) -> None:
    path = q.root / "todo/ens/gen.sh"
    path.parent.mkdir(parents=True)
    with open(path, "w") as f:  # as a METAQ generator writes it: in place, mode 0644 ...
        f.write("#!/bin/sh\n#METAQ NODES 1\ntrue\n")
    scan = q.scan(full=False)
    assert scan.tasks == () and [b.id for b in scan.invalid] == ["todo/ens/gen.sh"]
    path.chmod(0o755)  # ... then made executable: no folder's mtime changes
    scan = q.scan(full=False)
    assert [t.id for t in scan.tasks] == ["todo/ens/gen.sh"] and scan.invalid == ()
    assert q.index.listed == 1  # the one folder, listed again; the rest untouched


def test_a_finished_task_is_found_by_its_file_name(q: Queue) -> None:
    put(q.root / "todo/gpu/ens7/prop_42.sh")
    claim = q.claim(q.pending()[0], machine="m", jobid="1")
    assert claim is not None
    q.finish(claim, exit_code=0)
    assert [p.relative_to(q.root).as_posix() for p in q.root.glob("finished/**/prop_42.sh")
            ] == ["finished/todo/gpu/ens7/prop_42.sh"]
    found = QueueAdmin(q).find("prop_42.sh")
    assert (found.state, found.id) == ("finished", "todo/gpu/ens7/prop_42.sh")
