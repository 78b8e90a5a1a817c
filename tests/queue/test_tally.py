"""The tally of done tasks (``metaq_py/queue/tally.py``): kept by every move, by several real
processes at once, it always equals a count of the files, and a rebuild agrees with it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metaq_py.queue import tally
from metaq_py.queue.admin import QueueAdmin
from metaq_py.queue.layout import DONE_STATES
from metaq_py.queue.store import Queue

REPO = Path(__file__).resolve().parents[2]

WORKER = """
import json, os, sys
from metaq_py.errors import MetaqError
from metaq_py.queue.admin import QueueAdmin
from metaq_py.queue.store import Queue

root, ops, hard = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3] == "1"
q = Queue(root)
admin = QueueAdmin(q)
for op, rel, code in ops:
    try:
        if op == "end":
            task = next((t for t in q.scan(full=True).tasks if t.relpath == rel), None)
            claim = q.claim(task, machine="m", jobid=str(os.getpid())) if task else None
            if claim is not None:
                q.finish(claim, exit_code=code)
        elif op == "cancel":
            admin.cancel("todo/" + rel)
        else:
            admin.retry("todo/" + rel)
    except MetaqError:
        pass  # another writer moved it first
if hard:
    os._exit(0)  # no fold at exit: the writer's file must carry its count
"""


def make_queue(root: Path, n: int) -> list[str]:
    """A queue of ``n`` tasks spread over campaign folders and projects; their relpaths."""
    Queue.init(root)
    (root / "metaq.yaml").write_text("defaults:\n  retries: 0\n")
    rels = []
    for i in range(n):
        rel = f"c{i % 3}/t{i}.sh" if i % 4 else f"t{i}.sh"
        path = root / "todo" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        project = f"#METAQ PROJECT p{i % 2}\n" if i % 3 else ""
        path.write_text(f"#!/bin/sh\n{project}exit 0\n")
        path.chmod(0o755)
        rels.append(rel)
    return rels


def run_writers(root: Path, plans: list[tuple[list[list], bool]]) -> None:
    """Run one real process per plan, all at once, and wait for them."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(root), json.dumps(ops),
                               "1" if hard else "0"], env=env, stderr=subprocess.PIPE)
             for ops, hard in plans]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()


op = st.tuples(st.sampled_from(["end", "end", "cancel", "retry"]), st.integers(0, 11),
               st.sampled_from([0, 0, 1]))
plans = st.lists(st.tuples(st.lists(op, max_size=12), st.booleans()), min_size=2, max_size=3)


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plans=plans, established=st.booleans())
def test_the_tally_equals_a_count_of_the_files_after_concurrent_writers(
        tmp_path_factory: pytest.TempPathFactory, plans: list, established: bool) -> None:
    root = tmp_path_factory.mktemp("q")
    rels = make_queue(root, 12)
    if established:
        tally.rebuild(root)
    run_writers(root, [([[o, rels[i], c] for o, i, c in ops], hard) for ops, hard in plans])
    files = tally.count_files(root)
    assert sum(files.values()) == sum(
        1 for s in DONE_STATES for p in (root / s).rglob("*.sh"))
    if established:
        assert tally.read_tally(root) == files
        # Writers that exited normally folded themselves: only hard exits leave a file.
        left = list((tally.summary_dir(root) / "tally").glob("*.jsonl"))
        assert len(left) <= sum(1 for ops, hard in plans if hard and ops)
    else:
        assert tally.read_tally(root) is None  # never established: status counts the files
    assert tally.rebuild(root) == files
    assert tally.read_tally(root) == files


def test_moves_between_waiting_states_leave_the_tally_alone(tmp_path: Path) -> None:
    rels = make_queue(tmp_path, 4)
    tally.rebuild(tmp_path)
    q = Queue(tmp_path)
    admin = QueueAdmin(q)
    admin.hold("todo/" + rels[1])
    admin.release("todo/" + rels[1])
    assert tally.read_tally(tmp_path) == {}
    admin.cancel("todo/" + rels[1])
    assert tally.read_tally(tmp_path) == {tally.Key("cancelled", "todo", "c1", "p1"): 1}
    admin.retry("todo/" + rels[1])
    assert tally.read_tally(tmp_path) == {}
    assert tally.count_files(tmp_path) == {}


def test_a_writer_reads_back_through_snapshots_rotation_and_a_torn_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tally, "SNAPSHOT_EVERY", 3)
    monkeypatch.setattr(tally, "ROTATE_BYTES", 600)
    make_queue(tmp_path, 0)
    tally.rebuild(tmp_path)
    expected: dict = {}
    for i in range(40):
        path = tmp_path / "finished" / "todo" / f"c{i % 5}" / f"t{i}.sh"
        tally.note(tmp_path, None, path, project=f"p{i % 2}")
        k = tally.Key("finished", "todo", f"c{i % 5}", f"p{i % 2}")
        expected[k] = expected.get(k, 0) + 1
        assert tally.read_tally(tmp_path) == expected
    files = sorted((tally.summary_dir(tmp_path) / "tally").glob("*.jsonl"))
    assert len(files) == 1 and files[0].name.split(".")[-2] != "000000"  # it rotated
    with open(files[0], "ab") as f:
        f.write(b'{"d":[["finished","todo","c0","p0",1')  # a line being written
    assert tally.read_tally(tmp_path) == expected
    tally.close_writers()  # the fold adds this writer's count to the base
    assert not list((tally.summary_dir(tmp_path) / "tally").glob("*.jsonl"))
    assert tally.read_tally(tmp_path) == expected


def test_the_done_states_agree_with_the_store() -> None:
    assert tally.DONE == DONE_STATES
