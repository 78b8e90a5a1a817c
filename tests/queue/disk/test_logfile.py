"""The walk that checks and opens a task's ``LOG``: the owner's right to write, links made
by others, and a link planted after the check (the open itself never follows it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from metaq_py.queue.disk.logfile import LogRefused, log_problem, log_target, open_log

NOBODY = 65534


def test_missing_folders_are_made_where_the_owner_may_write(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    os.chown(home, NOBODY, NOBODY)
    target = home / "a/b/c.log"
    assert log_problem(target, NOBODY) is None
    assert not (home / "a").exists()  # asking makes nothing
    fd = open_log(target, NOBODY)
    os.write(fd, b"x")
    os.close(fd)
    assert target.read_bytes() == b"x"
    assert log_problem(tmp_path / "c.log", NOBODY) is not None  # root's folder, mode 755


def test_a_link_planted_after_the_check_is_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "logs/t.log"
    assert log_problem(target, 0) is None
    (tmp_path / "logs").mkdir()
    (tmp_path / "secret").write_text("keep")
    target.symlink_to(tmp_path / "secret")
    with pytest.raises(LogRefused, match="symlink"):
        open_log(target, 0)
    assert (tmp_path / "secret").read_text() == "keep"


def test_folder_links_of_the_owner_or_root_are_followed(tmp_path: Path) -> None:
    real = tmp_path / "lustre/proj"
    real.mkdir(parents=True)
    (tmp_path / "scratch").symlink_to("lustre/proj")  # relative, made by root
    fd = open_log(tmp_path / "scratch/run/x.log", 0)
    os.close(fd)
    assert (real / "run/x.log").is_file()
    os.lchown(tmp_path / "scratch", NOBODY, NOBODY)
    assert "symlink made by nobody" in (log_problem(tmp_path / "scratch/y.log", 0) or "")


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "f.log")
    assert "not a regular file" in (log_problem(tmp_path / "f.log", 0) or "")
    with pytest.raises(LogRefused):
        open_log(tmp_path / "f.log", 0)


def test_log_target_is_relative_to_the_queue_root(tmp_path: Path) -> None:
    assert log_target("log/x.log", tmp_path) == tmp_path.absolute() / "log/x.log"
    assert log_target("jobs/../../x.log", tmp_path) == tmp_path.absolute().parent / "x.log"


def test_an_absolute_folder_link_is_followed_from_the_root(tmp_path: Path) -> None:
    real = tmp_path / "lustre/proj"
    real.mkdir(parents=True)
    (tmp_path / "scratch").symlink_to(real)  # absolute, made by root
    assert log_problem(tmp_path / "scratch/x.log", 0) is None
    os.close(open_log(tmp_path / "scratch/run/x.log", 0))
    assert (real / "run/x.log").is_file()


def test_forty_folder_links_on_a_path_are_followed_and_one_more_is_refused(
        tmp_path: Path) -> None:
    (tmp_path / "l0").mkdir()
    for i in range(1, 42):
        (tmp_path / f"l{i}").symlink_to(f"l{i - 1}")
    assert log_problem(tmp_path / "l40/x.log", 0) is None
    assert "too many symlinks" in (log_problem(tmp_path / "l41/x.log", 0) or "")


def test_made_folders_are_755_and_every_descriptor_is_closed(tmp_path: Path) -> None:
    fds = len(os.listdir("/proc/self/fd"))
    old = os.umask(0)
    try:
        for i in range(3):
            os.close(open_log(tmp_path / f"a{i}/b/c.log", 0))
    finally:
        os.umask(old)
    assert len(os.listdir("/proc/self/fd")) == fds
    assert (tmp_path / "a0").stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "a0/b").stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "a0/b/c.log").is_file() and not (tmp_path / "b").exists()


def test_an_existing_log_must_be_one_its_owner_may_write(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir(mode=0o777)
    logs.chmod(0o777)
    theirs = logs / "root.log"
    theirs.write_text("root's\n")
    theirs.chmod(0o644)
    assert "may not write it" in (log_problem(theirs, NOBODY) or "")
    with pytest.raises(LogRefused, match="may not write it"):
        open_log(theirs, NOBODY)
    mine = logs / "mine.log"
    mine.write_text("")
    os.chown(mine, NOBODY, NOBODY)
    assert log_problem(mine, NOBODY) is None
    fd = open_log(mine, NOBODY)
    os.write(fd, b"appended\n")
    os.close(fd)
    assert mine.read_text() == "appended\n" and theirs.read_text() == "root's\n"


def test_the_owners_file_without_its_write_bit_is_refused(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    os.chown(logs, NOBODY, NOBODY)
    mine = logs / "mine.log"
    mine.write_text("")
    os.chown(mine, NOBODY, NOBODY)
    mine.chmod(0o444)
    assert "may not write it" in (log_problem(mine, NOBODY) or "")


def test_a_new_log_is_644_blocking_and_refusals_name_the_absolute_folder(tmp_path: Path
                                                                          ) -> None:
    old = os.umask(0)
    try:
        fd = open_log(tmp_path / "new.log", 0)
    finally:
        os.umask(old)
    try:
        assert os.get_blocking(fd)  # a task's writes wait rather than fail
    finally:
        os.close(fd)
    assert (tmp_path / "new.log").stat().st_mode & 0o777 == 0o644
    said = log_problem(tmp_path / "c.log", NOBODY) or ""
    assert f"the LOG's folder {tmp_path} belongs to root" in said


def test_a_link_as_the_log_file_is_refused_when_asked_and_when_opened(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import metaq_py.queue.disk.logfile as logfile

    (tmp_path / "secret").write_text("keep")
    (tmp_path / "t.log").symlink_to(tmp_path / "secret")
    assert "is a symlink" in (log_problem(tmp_path / "t.log", 0) or "")
    # Planted between the walk's check and the open: the open itself never follows it.
    real = logfile._check_last

    def check_then_plant(fd: int, here: Path, name: str, owner: int) -> None:
        real(fd, here, name, owner)
        (here / name).symlink_to(tmp_path / "secret")

    monkeypatch.setattr(logfile, "_check_last", check_then_plant)
    with pytest.raises(LogRefused, match="symlink"):
        open_log(tmp_path / "u.log", 0)
    assert (tmp_path / "secret").read_text() == "keep"


def test_a_path_that_cannot_be_reached_leaks_no_descriptor(tmp_path: Path) -> None:
    fds = len(os.listdir("/proc/self/fd"))
    for _ in range(3):
        assert "cannot be reached" in (log_problem(tmp_path / ("n" * 300) / "x.log", 0) or "")
    assert len(os.listdir("/proc/self/fd")) == fds
