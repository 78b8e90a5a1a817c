"""The one reader and the safe writes every file of the queue goes through.

A queue folder is written by many people, one of them careless and one of them hostile, so
nothing the runner finds there is taken on trust:

- :func:`read_regular` is the one way a file is read (notices, leases, logbooks, cancel
  requests, ``metaq.yaml``): opened with ``O_NOFOLLOW | O_NONBLOCK`` so that neither a
  symlink (to ``/dev/zero``, to a private file) nor a FIFO is read, checked with ``fstat`` to
  be a regular file, and capped in size. It raises :class:`Refused`, one sentence.
  :func:`read_lines` opens the same way and reads a file of any length (an event log) line
  by line, in pieces of bounded size, never whole.
- :func:`create_new` and :func:`replace_file` are the writes: a new file is made with
  ``O_CREAT | O_EXCL | O_NOFOLLOW`` (never through a planted link, never over a file), and a
  replacement is written under a fresh name and renamed over the old one, which replaces a
  planted symlink itself rather than what it points to.
- :func:`name_problem` says whether a name the queue would make fits the kernel's limits.
- :func:`write_all` is the one low-level write.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

__all__ = ["COMPANION_ROOM", "LINE_LIMIT", "MAX_TASK_NAME", "NAME_MAX", "PATH_MAX", "PIECE",
           "Refused", "create_new", "name_problem", "open_append", "open_regular", "read_lines",
           "read_regular", "replace_file", "umask", "write_all"]

NAME_MAX = 255
"""The longest file name (in bytes) the kernel takes (Linux, every common file system)."""

PATH_MAX = 4096
"""The longest path (in bytes) the kernel takes."""

COMPANION_ROOM = 40
"""Bytes a task's name grows by in the longest name the queue makes from it: the staged
logbook ``.<name>.record.<pid>.<hex>.tmp`` (27 bytes with a 7-digit pid), with room left for a
``.<n>`` a move adds to keep two tasks apart."""

MAX_TASK_NAME = NAME_MAX - COMPANION_ROOM
"""The longest task file name (in bytes) the queue accepts: 215. ``metaq submit`` refuses a
longer one, and a scan rejects one found in a task folder."""

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class Refused(OSError):
    """A file that :func:`read_regular` will not read: ``str()`` is one sentence naming the
    file. ``vanished`` is set when it was simply not there (someone moved it)."""

    def __init__(self, path: str | os.PathLike[str], why: str, *, vanished: bool = False,
                 planted: bool = False) -> None:
        super().__init__(errno.ENOENT if vanished else errno.EPERM, why)
        self.path = str(path)
        self.why = why
        self.vanished = vanished
        self.planted = planted
        """Something other than a regular file stands there (a link, a FIFO, a folder):
        what the queue never made, to be set aside by a writer that needs the name."""

    def __str__(self) -> str:
        return f"{self.path}: {self.why}"


def read_regular(path: str | os.PathLike[str], *, limit: int,
                 dir_fd: int | None = None) -> tuple[bytes, os.stat_result]:
    """The whole content of the regular file at ``path`` and its ``fstat``.

    Refused (:class:`Refused`): a symlink, a FIFO, a device, a folder, a file larger than
    ``limit`` bytes, or one that cannot be opened. ``path`` is relative to ``dir_fd`` when
    given. The read never blocks and never reads more than ``limit + 1`` bytes."""
    fd, st = open_regular(path, dir_fd=dir_fd)
    try:
        if st.st_size > limit:
            raise Refused(path, f"the file is {st.st_size} bytes long, more than the "
                                f"{limit} bytes such a file may have")
        chunks = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:  # it grew while being read
            raise Refused(path, f"the file is more than the {limit} bytes such a file may have")
        return b"".join(chunks), st
    except OSError as e:
        if isinstance(e, Refused):
            raise
        raise Refused(path, f"the file cannot be read ({e.strerror})") from None
    finally:
        os.close(fd)


def open_regular(path: str | os.PathLike[str], *, dir_fd: int | None = None
                 ) -> tuple[int, os.stat_result]:
    """A read-only descriptor of the regular file at ``path`` and its ``fstat``, opened
    without following a symlink and without blocking on a FIFO; :class:`Refused` for
    anything else. The caller closes it; every read of the queue's files starts here."""
    try:
        fd = os.open(path, _READ_FLAGS, dir_fd=dir_fd)
    except OSError as e:
        raise _open_refusal(path, e) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Refused(path, f"this is {_kind(st.st_mode)}, not a regular file",
                          planted=True)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


_APPEND_FLAGS = (os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
                 | os.O_CLOEXEC)


def open_append(path: str | os.PathLike[str], *, mode: int = 0o644) -> int:
    """A descriptor appending to the regular file at ``path`` (made, of ``mode``, when it is
    not there). Never through a link, never waiting for a FIFO's reader: what is not a
    regular file raises :class:`Refused` (``vanished`` when its folder is gone), for the
    caller to set it aside."""
    try:
        fd = os.open(path, _APPEND_FLAGS, mode)
    except OSError as e:
        if e.errno == errno.ENXIO:  # a FIFO without a reader
            raise Refused(path, "this is a FIFO (named pipe), not a regular file",
                          planted=True) from None
        if e.errno == errno.EISDIR:
            raise Refused(path, "this is a folder, not a regular file", planted=True) from None
        raise _open_refusal(path, e) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise Refused(path, f"this is {_kind(st.st_mode)}, not a regular file", planted=True)
    return fd


PIECE = 1 << 20
"""Bytes :func:`read_lines` reads at a time: what a reader of an event log holds at once."""

LINE_LIMIT = 1 << 20
"""The longest line (bytes) :func:`read_lines` yields; a longer one is skipped."""


def read_lines(path: str | os.PathLike[str], *, piece: int = PIECE,
               line_limit: int = LINE_LIMIT) -> Iterator[tuple[bytes | None, bool]]:
    """The lines of the regular file at ``path`` (an event log), read in pieces of ``piece``
    bytes, never whole: ``(line, complete)`` for each, without its newline; ``complete`` is
    ``False`` only for a last line that has none. A line longer than ``line_limit`` comes as
    ``(None, complete)``. Only the bytes the file had when it was opened are read, so a file
    that keeps growing ends too. Opened as :func:`read_regular` opens: a symlink, a FIFO, a
    device or a folder raises :class:`Refused` (``vanished`` when it is not there)."""
    fd, st = open_regular(path)
    try:
        left = st.st_size
        held = b""
        skipping = False
        while left > 0:
            try:
                chunk = os.read(fd, min(piece, left))
            except OSError as e:
                raise Refused(path, f"the file cannot be read ({e.strerror})") from None
            if not chunk:
                break
            left -= len(chunk)
            *lines, held = (held + chunk).split(b"\n")
            for line in lines:
                yield (None if skipping or len(line) > line_limit else line), True
                skipping = False
            if len(held) > line_limit:
                held, skipping = b"", True
        if held or skipping:
            yield (None if skipping else held), False
    finally:
        os.close(fd)


def _open_refusal(path: str | os.PathLike[str], e: OSError) -> Refused:
    if e.errno == errno.ENOENT:
        return Refused(path, "the file is not there", vanished=True)
    if e.errno == errno.ELOOP:
        return Refused(path, "this is a symlink, which the queue never follows here",
                       planted=True)
    if e.errno == errno.ENAMETOOLONG:
        return Refused(path, "the name is too long for the file system")
    return Refused(path, f"the file cannot be opened ({e.strerror})")


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISLNK(mode):
        return "a symlink"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a plain file"


def create_new(path: str | os.PathLike[str], data: bytes, *, mode: int = 0o644) -> None:
    """Make a new file at ``path`` holding ``data``, of ``mode`` whatever the umask. Raises
    ``FileExistsError`` when anything is there already, a planted symlink included: nothing
    is ever written through a link."""
    fd = os.open(path, _NEW_FLAGS, mode)
    try:
        if mode & umask():
            os.fchmod(fd, mode)
        write_all(fd, data)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):  # half a file (a full disk) is no file
            os.unlink(path)
        raise
    os.close(fd)


_umask: int | None = None


def umask() -> int:
    """This process's umask, read once (from ``/proc``, which changes nothing): what the queue
    gives back with a ``chmod`` where it would take bits from a fixed mode."""
    global _umask
    if _umask is None:
        try:
            with open("/proc/self/status", "rb") as f:
                line = next(x for x in f if x.startswith(b"Umask:"))
            _umask = int(line.split()[1], 8)
        except (OSError, StopIteration, ValueError):
            _umask = os.umask(0o022)  # no /proc: read it by setting it, and put it back
            os.umask(_umask)
    return _umask


def replace_file(path: str | os.PathLike[str], data: bytes, *, mode: int = 0o644) -> None:
    """Put a file holding ``data`` at ``path``, atomically: written under a fresh hidden name
    in the same folder, then renamed over whatever is at ``path`` (a symlink there is replaced,
    never followed)."""
    p = Path(path)
    tmp = p.with_name(f".{p.name[:NAME_MAX - 24]}.{secrets.token_hex(4)}.tmp")
    create_new(tmp, data, mode=mode)
    try:
        os.replace(tmp, p)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


def name_problem(name: str, *, path: str | os.PathLike[str] | None = None) -> str | None:
    """Why the queue cannot keep a task file called ``name`` (at ``path``), or ``None``: its
    name with the longest companion the queue makes from it must fit ``NAME_MAX``, and its
    path ``PATH_MAX``."""
    size = len(os.fsencode(name))
    if size > MAX_TASK_NAME:
        return (f"the file name is {size} bytes long; the queue keeps names of at most "
                f"{MAX_TASK_NAME} bytes (it adds up to {COMPANION_ROOM} to make the names of "
                f"the files beside a task); rename it")
    if path is not None:
        where = os.fspath(path)
        if not where.startswith("/"):  # an absolute path is its own length (no normpath)
            where = os.path.abspath(where)
        full = len(os.fsencode(where)) + COMPANION_ROOM + 64
        if full > PATH_MAX:
            return (f"the path is too deep: with the folders the queue adds, it would be "
                    f"longer than the {PATH_MAX} bytes a path may have; use fewer or shorter "
                    f"folders")
    return None


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd``: a regular file takes it in one go, and a short write
    (a signal, a pipe) is resumed where it stopped."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
