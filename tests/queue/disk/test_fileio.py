"""The one safe reader and the one low-level write.

read_regular never follows a link, whatever it points to: a link to a private regular file,
which the regular-file check alone would let through, is refused before it is opened; a
stranger who plants such a link in a folder of the queue learns nothing of the file, not even
through the reason a refused notice is set aside with. write_all: every byte reaches the file,
even when the kernel takes them in pieces.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from metaq_py.queue.disk.fileio import (
    COMPANION_ROOM,
    MAX_TASK_NAME,
    NAME_MAX,
    PATH_MAX,
    Refused,
    create_new,
    name_problem,
    read_regular,
    replace_file,
    write_all,
)
from metaq_py.queue.notices import load_notices
from metaq_py.queue.store import Queue
from tests.capability import as_user, stranger

SECRET = (b'{"name": "s3cr3t-of-the-owner", "nodes": 1, "arrival": 1, "walltime": 1, '
          b'"issued": 1}\n')
"""The owner's private file: shaped as a notice, so that a reader which followed the link would
quote its name in the reason it gives."""


def _private_file(folder: Path) -> Path:
    """A regular file only its owner may read, in a folder only its owner may enter."""
    folder.mkdir(mode=0o700)
    secret = folder / "key.json"
    secret.write_bytes(SECRET)
    secret.chmod(0o600)
    return secret


def test_a_link_to_a_private_regular_file_is_refused_not_followed(tmp_path: Path) -> None:
    secret = _private_file(tmp_path / "private")
    assert read_regular(secret, limit=4096)[0] == SECRET  # readable: only the link is refused
    link = tmp_path / "lease"
    link.symlink_to(secret)
    with pytest.raises(Refused) as refused:
        read_regular(link, limit=4096)
    assert "symlink" in str(refused.value) and not refused.value.vanished
    folder = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:  # the same through a folder's descriptor, as the walks read
        with pytest.raises(Refused, match="symlink"):
            read_regular("lease", limit=4096, dir_fd=folder)
    finally:
        os.close(folder)
    assert secret.read_bytes() == SECRET


def test_a_file_grown_past_its_limit_is_refused_and_one_at_the_limit_read(tmp_path: Path
                                                                          ) -> None:
    exact = tmp_path / "exact"
    exact.write_bytes(b"x" * 100)
    assert read_regular(exact, limit=100)[0] == b"x" * 100
    with pytest.raises(Refused, match="101 bytes long, more than the 100 bytes"):
        exact.write_bytes(b"x" * 101)
        read_regular(exact, limit=100)
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    data, st = read_regular(empty, limit=0)
    assert data == b"" and st.st_size == 0


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A folder another user may pass through (a test's tmp_path is root's alone)."""
    top = Path(tempfile.mkdtemp(prefix="metaq-two-uids-"))
    top.chmod(0o755)
    yield top
    shutil.rmtree(top, ignore_errors=True)


def test_a_strangers_link_to_the_owners_private_file_tells_the_stranger_nothing(
        open_tmp: Path) -> None:
    """Two real uids: the owner runs the queue; a stranger who may write its notices plants
    ``notices/beam.json``, a link to the owner's private file (which the stranger cannot read).
    The owner's runner refuses the link, sets it aside with a reason that names the link only,
    and nothing the stranger can read afterwards holds a byte of the file."""
    user = stranger()
    secret = _private_file(open_tmp / "owner-only")
    q = Queue.init(open_tmp / "q")
    notices = q.root / "notices"
    os.chown(notices, user.pw_uid, user.pw_gid)  # the stranger may announce work

    def plant() -> None:
        with pytest.raises(PermissionError):  # private: the link is the stranger's only way
            secret.read_bytes()
        (notices / "beam.json").symlink_to(secret)

    as_user(user, plant)
    told: list[str] = []
    assert load_notices(q.root, now=time.time() + 60, report=told.append) == []
    assert not (notices / "beam.json").exists()

    def look() -> list[bytes]:
        return [path.read_bytes() for path in notices.rglob("*")
                if not path.is_symlink() and path.is_file()]  # the link: refused to them too

    seen = as_user(user, look)  # what the stranger can read once the owner's runner has been
    assert not any(b"s3cr3t" in text for text in seen), seen
    assert len(told) == 1 and "symlink" in told[0] and "s3cr3t" not in told[0]
    reasons = list(notices.rglob("*.reason"))
    assert len(reasons) == 1 and b"symlink" in reasons[0].read_bytes()
    assert reasons[0].read_bytes() in seen
    assert secret.read_bytes() == SECRET


def test_a_pipe_takes_more_than_its_buffer_in_pieces() -> None:
    data = bytes(range(256)) * 4096  # 1 MiB: a pipe buffer holds 64 KiB, so writes are short
    r, w = os.pipe()
    got = bytearray()

    def drain() -> None:
        while chunk := os.read(r, 1 << 16):
            got.extend(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    write_all(w, data)
    os.close(w)
    reader.join(10)
    os.close(r)
    assert bytes(got) == data


def test_a_regular_file_gets_it_all(tmp_path: Path) -> None:
    path = tmp_path / "f"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        write_all(fd, b"abc" * 1000)
        write_all(fd, b"")
    finally:
        os.close(fd)
    assert path.read_bytes() == b"abc" * 1000


def test_task_names_fit_the_kernels_limits_with_the_longest_companion() -> None:
    assert MAX_TASK_NAME == NAME_MAX - COMPANION_ROOM == 215
    assert name_problem("a" * 215) is None
    assert "216 bytes long" in str(name_problem("a" * 216))
    assert "at most 215 bytes" in str(name_problem("é" * 108))  # bytes, not characters
    assert name_problem("t.sh", path="/q/todo/t.sh") is None
    deep = "/" + "/".join(["d" * 200] * 20) + "/t.sh"  # 4,025 bytes: with the room, too deep
    assert "the path is too deep" in str(name_problem("t.sh", path=deep))
    # The longest companion, a staged logbook, of the longest name still fits NAME_MAX.
    assert len(f".{'a' * 215}.record.1234567.{'f' * 8}.tmp") <= NAME_MAX


def test_a_replacement_replaces_a_planted_link_not_its_target(tmp_path: Path) -> None:
    target = tmp_path / "victim"
    target.write_bytes(b"keep")
    link = tmp_path / "lease"
    link.symlink_to(target)
    replace_file(link, b"new", mode=0o600)
    assert not link.is_symlink() and link.read_bytes() == b"new"
    assert link.stat().st_mode & 0o777 == 0o600
    assert target.read_bytes() == b"keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lease", "victim"]  # no temporary


def test_a_new_file_is_never_made_through_a_link_or_over_a_file(tmp_path: Path) -> None:
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(FileExistsError):
        create_new(tmp_path / "dangling", b"x")
    assert not (tmp_path / "nowhere").exists()
    create_new(tmp_path / "fresh", b"abc", mode=0o640)
    assert (tmp_path / "fresh").read_bytes() == b"abc"
    with pytest.raises(FileExistsError):
        create_new(tmp_path / "fresh", b"other")
    assert (tmp_path / "fresh").read_bytes() == b"abc"


def test_a_fifo_a_folder_and_a_missing_file_are_refused_each_saying_what_it_is(
        tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(Refused, match="FIFO"):  # and the read never blocks on it
        read_regular(tmp_path / "fifo", limit=10)
    with pytest.raises(Refused, match="a folder, not a regular file"):
        read_regular(tmp_path, limit=10)
    with pytest.raises(Refused, match="a device") as device:
        read_regular("/dev/null", limit=10)
    assert not device.value.vanished
    with pytest.raises(Refused, match="not there") as gone:
        read_regular(tmp_path / "gone", limit=10)
    assert gone.value.vanished
    with pytest.raises(Refused, match="name is too long"):
        read_regular(tmp_path / ("n" * 300), limit=10)


def test_a_file_that_grows_past_its_limit_while_read_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import metaq_py.queue.disk.fileio as fileio

    path = tmp_path / "grows"
    path.write_bytes(b"x" * 100)
    real = os.fstat

    def fstat_then_grow(fd: int) -> os.stat_result:
        st = real(fd)  # 100 bytes when looked at, more when read
        with path.open("ab") as f:
            f.write(b"y" * 50)
        return st

    monkeypatch.setattr(fileio.os, "fstat", fstat_then_grow)
    with pytest.raises(Refused, match="more than the 100 bytes"):
        read_regular(path, limit=100)


def test_a_path_fits_with_the_room_the_queue_adds_up_to_path_max_exactly() -> None:
    room = COMPANION_ROOM + 64  # what name_problem adds to a path for the queue's own names
    fits = "/" + "d" * (PATH_MAX - room - 1)
    assert len(fits) + room == PATH_MAX and name_problem("t.sh", path=fits) is None
    assert "too deep" in str(name_problem("t.sh", path=fits + "d"))


def test_a_file_at_its_limit_that_grows_between_two_reads_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import metaq_py.queue.disk.fileio as fileio

    path = tmp_path / "grows"
    path.write_bytes(b"x" * 100)
    real = os.read
    reads: list[int] = []

    def read_then_grow(fd: int, n: int) -> bytes:
        data = real(fd, n)
        reads.append(len(data))
        if len(reads) == 1:  # all 100 bytes read: one more read must see the end
            with path.open("ab") as f:
                f.write(b"y")
        return data

    monkeypatch.setattr(fileio.os, "read", read_then_grow)
    with pytest.raises(Refused, match="more than the 100 bytes"):
        read_regular(path, limit=100)
    assert reads == [100, 1]
