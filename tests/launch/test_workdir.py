"""A task's run folder and log: made where nothing is, kept from an earlier attempt, and
anything planted at their names moved aside, never followed, never blocking."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from metaq_py.launch import LaunchError, launch
from metaq_py.launch.workdir import make_run_folder, open_task_log
from tests.launch.test_launch import script, spec_for


def aside_to(moved: list[Path]) -> Callable[[Path], None]:
    """An ``aside`` that renames as the runner does and remembers what it moved."""
    def aside(path: Path) -> None:
        moved.append(path)
        os.rename(path, f"{path}.planted-test")
    return aside


def plant(kind: str, path: Path, outside: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "link to a folder":
        outside.mkdir()
        path.symlink_to(outside)
    elif kind == "link to a file":
        outside.write_text("not yours\n")
        path.symlink_to(outside)
    elif kind == "dangling link":
        path.symlink_to(outside)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "file":
        path.write_text("x")


KINDS = ["link to a folder", "link to a file", "dangling link", "fifo", "folder", "file"]


def test_a_first_start_makes_both_and_a_later_one_keeps_them(tmp_path: Path) -> None:
    folder, log = tmp_path / "runs" / "t.sh", tmp_path / "logs" / "t.sh.log"
    assert make_run_folder(folder, "t", aside=None) is True
    (folder / "checkpoint").write_text("1")
    assert make_run_folder(folder, "t", aside=None) is False  # kept, with what it holds
    assert (folder / "checkpoint").read_text() == "1"
    for line in (b"first\n", b"second\n"):
        fd = open_task_log(log, "t", aside=None)
        os.write(fd, line)
        assert not os.get_inheritable(fd)
        assert os.get_blocking(fd)  # blocking, as a task's stdout should be
        os.close(fd)
    assert log.read_bytes() == b"first\nsecond\n"


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "folder"])
def test_what_is_planted_at_the_run_folder_is_moved_aside(tmp_path: Path, kind: str) -> None:
    folder, outside = tmp_path / "runs" / "t.sh", tmp_path / "outside"
    plant(kind, folder, outside)
    moved: list[Path] = []
    assert make_run_folder(folder, "t", aside=aside_to(moved)) is True
    assert moved == [folder]
    assert stat.S_ISDIR(os.lstat(folder).st_mode)
    assert not outside.is_dir() or not any(outside.iterdir())
    plant(kind, tmp_path / "runs" / "u.sh", tmp_path / "outside2")
    with pytest.raises(LaunchError, match="something other than its run folder"):
        make_run_folder(tmp_path / "runs" / "u.sh", "u", aside=None)


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "file"])
def test_what_is_planted_at_the_log_is_moved_aside_without_blocking(tmp_path: Path,
                                                                     kind: str) -> None:
    log, outside = tmp_path / "logs" / "t.sh.log", tmp_path / "outside"
    plant(kind, log, outside)
    moved: list[Path] = []
    fd = open_task_log(log, "t", aside=aside_to(moved))  # a FIFO here would block an open
    try:
        os.write(fd, b"mine\n")
    finally:
        os.close(fd)
    assert moved == [log]
    assert stat.S_ISREG(os.lstat(log).st_mode) and log.read_bytes() == b"mine\n"
    if outside.is_file():
        assert outside.read_text() == "not yours\n"  # never written through


def test_a_runner_start_moves_a_planted_link_aside_and_runs(tmp_path: Path) -> None:
    path = script(tmp_path, "t.sh", "#!/bin/sh\necho ran\n")
    spec = spec_for(tmp_path, path)
    outside = tmp_path / "outside.log"
    outside.write_text("not yours\n")
    spec.log.parent.mkdir(parents=True)
    spec.log.symlink_to(outside)
    moved: list[Path] = []
    proc = launch(spec, aside=aside_to(moved))
    status = proc.wait(10)
    assert status is not None and status.ok
    assert moved == [spec.log] and spec.log.read_text() == "ran\n"
    assert outside.read_text() == "not yours\n"
    # Without a way to move it aside the start is refused, in one sentence.
    spec.log.unlink()
    spec.log.symlink_to(outside)
    with pytest.raises(LaunchError) as refused:
        launch(spec)
    assert "something other than its log" in str(refused.value)


def test_names_at_the_length_limit_are_made_and_one_byte_more_is_refused(
        tmp_path: Path) -> None:
    limit = os.pathconf(tmp_path, "PC_NAME_MAX")
    folder, log = tmp_path / ("r" * limit), tmp_path / ("l" * limit)
    assert make_run_folder(folder, "t", aside=None) is True and folder.is_dir()
    os.close(open_task_log(log, "t", aside=None))
    assert log.is_file()
    for make in (lambda: make_run_folder(tmp_path / ("r" * (limit + 1)), "t", aside=None),
                 lambda: open_task_log(tmp_path / ("l" * (limit + 1)), "t", aside=None)):
        with pytest.raises(OSError) as refused:  # launch says it in one sentence
            make()
        assert refused.value.errno == errno.ENAMETOOLONG
