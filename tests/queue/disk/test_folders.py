"""MadeFolders: a folder made before is taken again only while it is the very same folder;
one replaced by a link to somewhere else is made again, so a claim never lands outside."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from metaq_py.queue.disk.folders import (
    ARRAY_FILE,
    PLANTED,
    REASON_LIMIT,
    MadeFolders,
    PeopleIds,
    make_folders,
    read_reason,
    relative_parts,
)
from metaq_py.queue.store import Queue


def test_a_folder_made_before_is_kept_and_one_replaced_by_a_link_is_made_again(
    tmp_path: Path,
) -> None:
    root = tmp_path / "q"
    root.mkdir()
    made = MadeFolders(root)
    folder = root / "working" / "m" / "7" / "todo"
    made.make(folder)
    assert folder.is_dir() and not folder.is_symlink()
    (folder / "x").write_text("kept")
    made.make(folder)  # the same folder: nothing changes
    assert (folder / "x").read_text() == "kept"

    outside = tmp_path / "elsewhere"
    (outside / "7" / "todo").mkdir(parents=True)
    os.rename(root / "working" / "m", tmp_path / "old-m")
    os.symlink(outside, root / "working" / "m")
    made.make(folder)
    assert not (root / "working" / "m").is_symlink()  # made again as a real folder
    assert [p.name.startswith("m" + PLANTED) for p in (root / "working").iterdir()].count(True) == 1
    assert (root / "working" / "m" / "7" / "todo").is_dir()
    assert not (root / "working" / "m" / "7" / "todo" / "x").exists()


def test_claims_land_inside_the_queue_after_a_job_folder_is_swapped(tmp_path: Path) -> None:
    Queue.init(tmp_path / "q")
    q = Queue(tmp_path / "q")
    for name in ("a.sh", "b.sh"):
        path = q.root / "todo" / name
        path.write_text("#!/bin/sh\ntrue\n")
        path.chmod(0o755)
    first, second = q.scan().tasks
    assert q.claim(first, machine="m", jobid="7") is not None
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    job = q.root / "working" / "m" / "7"
    os.rename(job, tmp_path / "moved-job")
    os.symlink(outside, job)
    claim = q.claim(second, machine="m", jobid="7")
    assert claim is not None
    assert not list(outside.rglob("*.sh"))
    assert claim.path.is_file() and not (q.root / "working" / "m" / "7").is_symlink()


NAMES = st.sampled_from(["q", "todo", "a", "..", ".", "", ".hidden", "x y", "finished", "é"])


@given(root=st.lists(NAMES, min_size=0, max_size=4), rest=st.lists(NAMES, max_size=5),
       absolute=st.booleans())
def test_relative_parts_agrees_with_relpath(root: list[str], rest: list[str],
                                            absolute: bool) -> None:
    # Any spelling, normal or not: "..", ".", "//" and trailing slashes included.
    top = ("/" if absolute else "") + "/".join(root)
    path = top + "/" + "/".join(rest)
    if not top:
        top = "."
    assert relative_parts(path, top) == os.path.relpath(path, top).split(os.sep)
    assert relative_parts(Path(path), Path(top)) == os.path.relpath(path, top).split(os.sep)


def test_a_removed_queue_is_never_made_again(tmp_path: Path) -> None:
    root = tmp_path / "q"
    with pytest.raises(FileNotFoundError):
        make_folders(root, root / "finished" / "campaign")
    assert not root.exists()


def test_a_reason_is_read_whole_up_to_its_limit_and_never_through_a_link(tmp_path: Path
                                                                          ) -> None:
    task = tmp_path / "t.sh"
    reason = tmp_path / "t.sh.reason"
    assert read_reason(task) is None  # none written
    reason.write_text("  it failed\n")
    assert read_reason(task) == "it failed"
    reason.write_bytes(b"x" * REASON_LIMIT)
    assert read_reason(task) == "x" * 65536
    reason.write_bytes(b"x" * (REASON_LIMIT + 1))
    assert read_reason(task) is None  # too long to be a reason
    reason.write_bytes(b"\xff\xfe")
    assert read_reason(task) is None  # not text
    reason.unlink()
    (tmp_path / "private").write_text("secret")
    reason.symlink_to(tmp_path / "private")
    assert read_reason(task) is None


def test_a_folder_made_before_costs_a_stat_not_a_make(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import metaq_py.queue.disk.folders as folders

    made_again: list[Path] = []
    real = folders.make_folders
    monkeypatch.setattr(folders, "make_folders",
                        lambda root, folder: (made_again.append(folder), real(root, folder)))
    root = tmp_path / "q"
    root.mkdir()
    made = MadeFolders(root)
    for _ in range(3):
        made.make(root / "working" / "m" / "1")
    assert made_again == [root / "working" / "m" / "1"]  # once, then only looked at
    monkeypatch.setattr(MadeFolders, "LIMIT", 2)
    for i in range(5):
        made.make(root / "jobs" / str(i))
    assert 1 <= len(made._seen) <= 2  # the memory is bounded
    assert all((root / "jobs" / str(i)).is_dir() for i in range(5))


def test_relative_parts_of_a_path_below_the_root_are_its_names() -> None:
    assert relative_parts("/q/todo/sub/x.sh", "/q") == ["todo", "sub", "x.sh"]
    assert relative_parts("/q/todo", "/q") == ["todo"]
    assert relative_parts("/qq/todo", "/q") == ["..", "qq", "todo"]


def test_people_name_an_index_of_an_array_with_brackets_and_nothing_else(tmp_path: Path) -> None:
    """``todo/prop.sh/13`` is ``todo/prop.sh[13]`` once ``todo/prop.sh`` holds an
    ``.array``, asked again until then; a task named ``13`` in a plain folder keeps its name."""
    (tmp_path / "todo" / "prop.sh").mkdir(parents=True)
    (tmp_path / "todo" / "plain").mkdir()
    named = PeopleIds(tmp_path)
    assert named("todo/prop.sh/13") == "todo/prop.sh/13"
    (tmp_path / "todo" / "prop.sh" / ARRAY_FILE).write_text("{}")
    assert named("todo/prop.sh/13") == "todo/prop.sh[13]"
    assert named("todo/batch2/prop.sh/7") == "todo/batch2/prop.sh/7"
    assert named("todo/plain/13") == "todo/plain/13"
    assert named("todo/prop.sh/x13") == "todo/prop.sh/x13"
    assert named("todo/13") == "todo/13"
    assert named.array_of("todo/prop.sh/0") == "todo/prop.sh"
