"""Task arrays: one task file per index, made at once, each a plain task for the runner."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from metaq_py.directive_keys import parse_indices
from metaq_py.errors import QueueError
from metaq_py.queue.admin import QueueAdmin
from metaq_py.queue.campaign.arrays import read_array, split_ref
from metaq_py.queue.store import Queue
from metaq_py.queue.submit import Submitter
from metaq_py.ranges import format_indices


@pytest.fixture
def q(tmp_path: Path) -> Queue:
    return Queue.init(tmp_path / "q")


def script(path: Path, body: str, directives: str = "") -> Path:
    path.write_text(f"#!/usr/bin/env python3\n{directives}{body}\n")
    path.chmod(0o755)
    return path


def test_an_array_is_one_task_per_index_in_index_order(q: Queue, tmp_path: Path) -> None:
    src = script(tmp_path / "prop.py", "import os; print(os.environ['METAQ_ARRAY_INDEX'], "
                 "os.environ['METAQ_ARRAY_ID'])", "#METAQ NODES 2\n#METAQ PROJECT lat\n")
    dst = Submitter(q).submit(src, array="1-9:2,20")
    assert dst == q.root / "todo/prop.py" and dst.is_dir()
    tasks = q.scan().tasks
    assert [t.id for t in tasks] == [f"todo/prop.py/{i}" for i in (1, 3, 5, 7, 9, 20)]
    assert all(t.spec.nodes == 2 and t.spec.project == "lat" and t.spec.array is None
               for t in tasks)
    info = read_array(q.root, "todo/prop.py")
    assert info is not None and info.indices == (1, 3, 5, 7, 9, 20)
    # Any interpreter: the index file execs the stored script with the index in its env.
    out = subprocess.run([str(q.root / "todo/prop.py/7")], capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == ["7", "todo/prop.py"]
    assert not [n for n in os.listdir(q.root / "todo") if n.startswith(".")]


def test_the_array_directive_in_the_script_makes_an_array(q: Queue, tmp_path: Path) -> None:
    src = script(tmp_path / "a.sh", "true", "#METAQ ARRAY 0-2\n")
    Submitter(q).submit(src)
    assert [t.relpath for t in q.scan().tasks] == ["a.sh/0", "a.sh/1", "a.sh/2"]


def test_a_failed_array_submission_leaves_nothing(q: Queue, tmp_path: Path) -> None:
    Submitter(q).submit(script(tmp_path / "p.sh", "true"), array="0-2")
    # Index 3 names prop index 3, which does not exist: refused, nothing written.
    src = script(tmp_path / "c.sh", "true", "#METAQ AFTER p.sh[{index}]\n")
    with pytest.raises(QueueError, match="index 3"):
        Submitter(q).submit(src, array="0-3")
    assert sorted(os.listdir(q.root / "todo")) == ["p.sh"]
    with pytest.raises(QueueError, match="already in the queue"):
        Submitter(q).submit(script(tmp_path / "p.sh", "true"))


def test_array_refs_select_indices_in_a_state(q: Queue, tmp_path: Path) -> None:
    admin = QueueAdmin(q)
    Submitter(q).submit(script(tmp_path / "run.sh", "true"), array="0-19")
    assert [e.id for e in admin.select("run.sh[3-4]", states=("pending",))] == \
        ["todo/run.sh/3", "todo/run.sh/4"]
    admin.cancel("run.sh[17]")
    assert (q.root / "cancelled/todo/run.sh/17").exists()
    assert len(admin.select("todo/run.sh", states=("pending",))) == 19
    assert [e.id for e in admin.select("run.sh[*]", states=("cancelled",))] == \
        ["todo/run.sh/17"]
    with pytest.raises(QueueError, match=r"no task of the array todo/run\.sh"):
        admin.select("run.sh", states=("failed",))


@given(st.sets(st.integers(0, 300), min_size=1, max_size=60))
def test_indices_written_as_ranges_read_back(indices: set[int]) -> None:
    assert parse_indices(format_indices(list(indices))) == tuple(sorted(indices))


@given(st.text(max_size=30))
def test_split_ref_never_raises_and_keeps_the_name(text: str) -> None:
    base, sel = split_ref(text)
    assert text.startswith(base)
    if sel is not None:
        assert text == f"{base}[{sel}]"


def test_an_array_leaves_its_folder_only_when_no_index_waits_is_held_or_runs(
        q: Queue, tmp_path: Path) -> None:
    Submitter(q).submit(script(tmp_path / "p.sh", "true"), array="0-3")
    admin = QueueAdmin(q)
    admin.hold("p.sh[3]")
    running = q.claim(next(t for t in q.scan().tasks if t.relpath == "p.sh/2"),
                      machine="m", jobid="1")
    assert running is not None
    for t in q.scan().tasks:  # 0 and 1 end; 2 runs; 3 is held
        claim = q.claim(t, machine="m", jobid="1")
        assert claim is not None
        q.finish(claim, exit_code=0)
    assert (q.root / "todo/p.sh/.array").exists()
    q.finish(running, exit_code=0)
    assert (q.root / "todo/p.sh/.array").exists()  # 3 is held still
    admin.cancel("p.sh[3]")  # a person's move ends the last index
    assert not (q.root / "todo/p.sh").exists()
    assert sorted(os.listdir(q.root / "finished/todo/p.sh")) == [".array", ".script", "0", "1",
                                                                "2"]
    info = read_array(q.root, "todo/p.sh")
    assert info is not None and info.indices == (0, 1, 2, 3)
    assert [e.id for e in admin.select("p.sh[*]", states=("cancelled",))] == ["todo/p.sh/3"]
    # A retried index waits in a whole array again: the runner claims and runs it.
    admin.retry("p.sh[3]")
    assert sorted(os.listdir(q.root / "todo/p.sh")) == [".3.record", ".array", ".script", "3"]
    claim = q.claim(q.scan().tasks[0], machine="m", jobid="2")
    assert claim is not None and claim.program is not None
    assert claim.program.data == (q.root / "todo/p.sh/.script").read_bytes()


def test_an_index_claimed_as_its_array_leaves_still_reads_its_script(
        q: Queue, tmp_path: Path) -> None:
    from metaq_py.queue.campaign.arrays import move_home

    Submitter(q).submit(script(tmp_path / "p.sh", "print('hi')"), array="0")
    # The files moved while the claim was under way (their move races a claim's rename).
    move_home(q.root, "todo/p.sh", "finished/todo/p.sh")
    claim = q.claim(q.scan().tasks[0], machine="m", jobid="1")
    assert claim is not None and claim.program is not None
    assert b"print('hi')" in claim.program.data
    assert claim.program.source == str(q.root / "finished/todo/p.sh/.script")


_GROW = """
import sys
from metaq_py.errors import QueueError
from metaq_py.queue.layout import Layout
from metaq_py.queue.submit import Submitter
root, src, indices = sys.argv[1:]
q = Layout(root)
sys.stdin.readline()  # both start together, once both are ready
try:
    Submitter(q).submit(src, array=indices, again=False)
    print("ok")
except QueueError as e:
    print(e)
"""


@pytest.mark.parametrize("second", ["8-11", "6-9"])
def test_two_members_growing_one_array_lose_and_repeat_no_index(
        q: Queue, tmp_path: Path, second: str) -> None:
    src = script(tmp_path / "p.sh", "true")
    Submitter(q).submit(src, array="0-3")
    procs = [subprocess.Popen([sys.executable, "-c", _GROW, str(q.root), str(src), indices],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for indices in ("4-7", second)]
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    outs = [p.communicate(timeout=60)[0].strip() for p in procs]
    info = read_array(q.root, "todo/p.sh")
    assert info is not None
    files = sorted(int(n) for n in os.listdir(q.root / "todo/p.sh") if n.isdigit())
    assert sorted(info.indices) == files  # every index file listed, every listed one there
    if second == "8-11":  # disjoint: both grow it
        assert outs == ["ok", "ok"] and files == list(range(12))
    else:  # 6-7 in both: exactly one of them got them, the other wrote nothing
        assert "ok" in outs and any("already has the indices 6-7 (waiting)" in o
                                    for o in outs), outs
        assert files in (list(range(8)), [0, 1, 2, 3, 6, 7, 8, 9])
    assert not [n for n in os.listdir(q.root / "todo/p.sh") if n.endswith(".tmp")]
