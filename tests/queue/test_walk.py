"""One task folder's walk (metaq_py/queue/walk.py): what it hands back for each file, a
file that vanishes between the listing and its stat, and what the index remembers."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metaq_py.errors import TaskError
from metaq_py.queue.disk.fileio import COMPANION_ROOM, MAX_TASK_NAME, PATH_MAX, name_problem
from metaq_py.queue.settings.trust import Trust
from metaq_py.queue.walk import CachedFile, stat_key, walk_folder
from tests.capability import missing, stranger

TRUST = Trust(gid=None, uids=frozenset())


def _walk(folder: Path, known: dict | None = None, problem: str | None = None) -> list:
    subdirs: list = []
    return [*walk_folder(str(folder), "p/", TRUST, problem, subdirs, known or {})], subdirs


def _task(path: Path) -> Path:
    path.write_text("#!/bin/sh\ntrue\n")
    path.chmod(0o755)
    return path


def test_each_file_comes_with_what_the_index_needs(tmp_path: Path) -> None:
    new = _task(tmp_path / "new.sh")
    seen = _task(tmp_path / "seen.sh")
    (tmp_path / ".seen.sh.record").write_text("{}")  # a logbook, known from the listing
    (tmp_path / ".hidden.sh").write_text("x")
    (tmp_path / "sub").mkdir()
    (tmp_path / "dir-link").symlink_to(tmp_path / "sub")
    known = {str(seen): CachedFile(seen.stat(), TaskError(str(seen), None, "remembered"))}
    walked, subdirs = _walk(tmp_path, known)
    got = {rel: (st, err, book) for rel, _path, st, err, book in walked}
    assert set(got) == {"p/new.sh", "p/seen.sh", "p/dir-link"}
    assert got["p/new.sh"] == (None, None, False)  # not known: the caller reads it
    assert got["p/seen.sh"] == (known[str(seen)], None, True)  # unchanged: its memory
    assert "never follows" in str(got["p/dir-link"][1])
    assert subdirs == [(str(tmp_path / "sub"), "p/sub/", None)]
    seen.chmod(0o700)  # a change of mode alone: no longer the same file for the index
    walked, _ = _walk(tmp_path, known)
    [(_, _, st, err, book)] = [w for w in walked if w[0] == "p/seen.sh"]
    assert isinstance(st, os.stat_result) and stat_key(st) != known[str(seen)].key
    assert err is None and book is True
    del new


def test_a_known_file_that_vanishes_before_its_stat_is_skipped_and_the_walk_goes_on(
        tmp_path: Path) -> None:
    paths = [_task(tmp_path / f"t{i}.sh") for i in range(3)]
    known = {str(p): CachedFile(p.stat(), TaskError(str(p), None, "old")) for p in paths}
    for p in paths:  # changed since: each is stat-ed again
        p.write_text("#!/bin/sh\necho changed\n")
    order = os.listdir(tmp_path)  # the order the walk lists them in
    walk = walk_folder(str(tmp_path), "", TRUST, None, [], known)
    first = next(walk)
    assert first[0] == order[0]
    os.unlink(tmp_path / order[1])  # claimed by someone else in the meantime
    rest = list(walk)
    assert [r[0] for r in rest] == [order[2]] and rest[0][3] is None


def test_links_are_judged_as_found_and_by_what_they_point_to(tmp_path: Path) -> None:
    real = _task(tmp_path / "real.sh")
    (tmp_path / "good.sh").symlink_to(real)
    (tmp_path / "dangling.sh").symlink_to(tmp_path / "nowhere")
    (tmp_path / "loop.sh").symlink_to(tmp_path / "loop.sh")
    walked, _ = _walk(tmp_path)
    got = {rel: (st, err) for rel, _path, st, err, _book in walked}
    assert got["p/good.sh"][1] is None and isinstance(got["p/good.sh"][0], os.stat_result)
    assert "does not exist" in str(got["p/dangling.sh"][1])
    assert "symlink loop" in str(got["p/loop.sh"][1])
    # A problem inherited from the folder above is a link's too, judged before its target.
    walked, _ = _walk(tmp_path, problem="the folder is writable by all")
    got = {rel: err for rel, _path, _st, err, _book in walked}
    assert str(got["p/good.sh"]).endswith(": the folder is writable by all.")


def test_a_file_that_is_no_regular_file_cannot_be_a_task(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.sh")
    known = {str(tmp_path / "pipe.sh"): None}  # known by name: stat-ed, not opened
    walked, _ = _walk(tmp_path, known)
    [(rel, _path, st, err, book)] = walked
    assert rel == "p/pipe.sh" and st is None and book is False
    assert "not a regular file" in str(err)


def test_a_missing_folder_yields_nothing_and_a_long_name_is_refused(tmp_path: Path) -> None:
    assert _walk(tmp_path / "gone")[0] == []
    _task(tmp_path / ("n" * 230))
    [(_rel, _path, st, err, book)] = _walk(tmp_path)[0]
    assert st is None and "bytes long" in str(err) and book is False


def test_an_untrusted_file_is_refused_and_the_walk_goes_on_with_no_descriptor_left(
        tmp_path: Path) -> None:
    bad = _task(tmp_path / "a-bad.sh")
    bad.chmod(0o777)  # writable by anyone: not trusted
    _task(tmp_path / "b-good.sh")
    known = {str(p): None for p in tmp_path.iterdir()}  # stat-ed, so judged here
    fds = len(os.listdir("/proc/self/fd"))
    walked, _ = _walk(tmp_path, known)
    assert len(os.listdir("/proc/self/fd")) == fds
    got = {rel: err for rel, _path, _st, err, _book in walked}
    assert set(got) == {"p/a-bad.sh", "p/b-good.sh"}
    assert "writable" in str(got["p/a-bad.sh"]) and got["p/b-good.sh"] is None


CHARS = st.sampled_from(["n", "é", "€", "😀"])  # 1 to 4 bytes in UTF-8


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(char=CHARS, size=st.one_of(st.integers(1, 255),
                                  st.integers(MAX_TASK_NAME - 8, MAX_TASK_NAME + 8)),
       fchar=CHARS, room=st.one_of(st.integers(1, 8), st.integers(1, 600),
                                   st.integers(3000, 3800)))
def test_a_name_is_refused_by_the_walk_exactly_when_the_queue_cannot_keep_it(
        tmp_path: Path, char: str, size: int, fchar: str, room: int) -> None:
    """The walk measures only names past its short bound; whatever the encoding of the name
    (about ``size`` bytes) and of its folders (``fchar``), and however little room the folder
    leaves under ``PATH_MAX`` (``room`` bytes), it refuses the same names as
    :func:`name_problem` does."""
    name = char * max(1, size // len(char.encode()))  # at most NAME_MAX (255) bytes
    width = len(fchar.encode())
    depth = max(1, PATH_MAX - COMPANION_ROOM - 64 - room - len(os.fsencode(tmp_path)) - 1)
    parts = [fchar * (250 // width)] * (depth // (250 // width * width + 1))
    rest = depth - len(parts) * (250 // width * width + 1)
    folder = Path(tmp_path, *parts, "e" * max(1, rest))
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:  # made beside the folder's descriptor: its whole path may pass PATH_MAX
        for old in os.listdir(fd):
            os.unlink(old, dir_fd=fd)
        os.close(os.open(name, os.O_WRONLY | os.O_CREAT, 0o755, dir_fd=fd))
    finally:
        os.close(fd)
    [(_rel, path, _st, err, _book)] = _walk(folder)[0]
    expected = name_problem(name, path=path)
    assert (err is None) == (expected is None), (len(name.encode()), room)
    assert expected is None or expected in str(err)


def test_a_task_folder_that_became_a_file_has_nothing_to_walk(tmp_path: Path) -> None:
    """A folder replaced by a file between the listing of its parent and its walk is gone:
    the walk yields nothing for it, and never reads the file as a folder."""
    became = _task(tmp_path / "sub")
    assert _walk(became) == ([], [])


def test_a_symlink_a_stranger_made_is_refused_though_its_target_is_trusted(
        tmp_path: Path) -> None:
    """With trusted_users, a link's own owner decides (whoever made it chose where it points),
    not its target's."""
    user = stranger()
    if os.geteuid() != 0:
        missing("root, to give a symlink to another user (lchown)")
    target = _task(tmp_path / "real.sh")
    link = tmp_path / "link.sh"
    link.symlink_to(target)
    os.lchown(link, user.pw_uid, user.pw_gid)
    trust = Trust(gid=None, uids=frozenset({os.getuid()}))
    got = {rel: err for rel, _, _, err, _ in walk_folder(str(tmp_path), "p/", trust, None, [],
                                                         {})}
    assert got["p/real.sh"] is None
    assert got["p/link.sh"] is not None and "the symlink belongs to" in str(got["p/link.sh"])
