"""Where a task's ``#METAQ LOG`` may go, and opening it without following a link.

METAQ lets a task log wherever its owner may write: its queue's ``log/`` folder, or the
owner's own folders, making missing parent folders on the way. metaq-py allows the same and
adds no way to write where the task's owner could not (the runner may run under another
account than the task's owner on a shared queue):

- the folder the log lands in (the deepest one that exists; missing ones below it are made)
  must be writable by the task's owner, judged on its mode, owner and group, and an existing
  log file must be a regular file the owner may write;
- a symlinked folder on the way is followed only when the owner or root made it (``/scratch``
  pointing at a file system); one made by someone else is refused, and a link as the log file
  itself is never followed (``O_NOFOLLOW``).

:func:`log_problem` asks this without changing anything (at submit and when a task is
scanned); :func:`open_log` asks it again just before the task starts, walking the path one
folder at a time with ``openat``, so that what is checked is what is opened.
"""

from __future__ import annotations

import errno
import os
import pwd
import stat
from functools import lru_cache
from pathlib import Path

__all__ = ["LogRefused", "log_problem", "log_target", "open_log"]

_HOPS = 40
"""Symlinked folders followed at most on one path (the kernel's own limit)."""


class LogRefused(Exception):
    """A ``LOG`` path the task's owner may not write, with the reason as one sentence."""


def log_target(log: str, root: Path) -> Path:
    """The absolute path a ``LOG`` value names, relative ones relative to the queue root,
    with ``.`` and ``..`` taken away as written (links are judged by the walk, not here)."""
    p = Path(log)
    return Path(os.path.normpath(p if p.is_absolute() else root.absolute() / p))


@lru_cache(maxsize=256)
def _groups(uid: int) -> frozenset[int]:
    try:
        user = pwd.getpwuid(uid)
    except KeyError:
        return frozenset()
    return frozenset(os.getgrouplist(user.pw_name, user.pw_gid))


def _may_write(st: os.stat_result, uid: int) -> bool:
    """Whether the user ``uid`` may write the file or folder with status ``st``."""
    if uid == 0:
        return True
    if st.st_uid == uid:
        return bool(st.st_mode & stat.S_IWUSR)
    if st.st_gid in _groups(uid):
        return bool(st.st_mode & stat.S_IWGRP)
    return bool(st.st_mode & stat.S_IWOTH)


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def log_problem(path: Path, owner: int) -> str | None:
    """Why the user ``owner`` may not have a task log at ``path`` (absolute), or ``None``.
    Nothing is made or opened."""
    try:
        fd = _walk(path, owner, make=False)
    except LogRefused as e:
        return str(e)
    if fd is not None:
        os.close(fd)
    return None


def open_log(path: Path, owner: int) -> int:
    """Open the log ``path`` (absolute) of a task owned by ``owner`` for appending, making
    the missing folders above it; the open descriptor, or :class:`LogRefused`."""
    parent = _walk(path, owner, make=True)
    assert parent is not None  # made when missing
    flags = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    created = True
    try:
        try:
            fd = os.open(path.name, flags | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=parent)
        except FileExistsError:
            created = False
            fd = os.open(path.name, flags, dir_fd=parent)
    except OSError as e:
        why = "it is a symlink, which is never followed" if e.errno == errno.ELOOP \
            else "nothing is reading that FIFO" if e.errno == errno.ENXIO else e.strerror
        raise LogRefused(f"the LOG file {path} cannot be opened: {why}") from None
    finally:
        os.close(parent)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise LogRefused(f"the LOG file {path} is not a regular file")
        if not created and not _may_write(st, owner):
            raise LogRefused(f"the LOG file {path} belongs to {_user(st.st_uid)} and the "
                             f"task's owner {_user(owner)} may not write it")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _walk(path: Path, owner: int, *, make: bool) -> int | None:
    """The open folder ``path`` goes into, reached one name at a time from ``/`` without
    following a link made by anyone but ``owner`` or root; ``None`` when a folder is missing
    and ``make`` is false (after checking that the owner may make it). An existing log file
    is checked too."""
    parts = list(path.parts[1:])
    if not parts:
        raise LogRefused(f"the LOG {path} names no file")
    name = parts.pop()
    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    here, hops, made = Path("/"), 0, False
    try:
        while parts:
            part = parts.pop(0)
            try:
                st = os.stat(part, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                # The owner must be able to make it where it is missing; below a folder made
                # here, the runner's own, nothing more is asked.
                folder = os.fstat(fd)
                if not made and not _may_write(folder, owner):
                    raise _not_writable(here, folder, owner) from None
                if not make:
                    return None
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                    made = True
                except FileExistsError:
                    pass
                except OSError as e:
                    raise LogRefused(f"the folder {here / part} of the LOG file {path} cannot "
                                     f"be made: {e.strerror}") from None
                parts.insert(0, part)  # look at what is there now, made or raced
                continue
            if stat.S_ISLNK(st.st_mode):
                if st.st_uid not in (owner, 0):
                    raise LogRefused(f"the LOG's folder {here / part} is a symlink made by "
                                     f"{_user(st.st_uid)}, which is never followed")
                hops += 1
                if hops > _HOPS:
                    raise LogRefused(f"the LOG's folder {here / part} has too many symlinks")
                target = os.readlink(part, dir_fd=fd)
                parts[:0] = [p for p in Path(target).parts if p != "/"]
                if os.path.isabs(target):
                    os.close(fd)
                    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                    here = Path("/")
                continue
            if not stat.S_ISDIR(st.st_mode):
                raise LogRefused(f"the LOG's folder {here / part} is not a folder")
            sub = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                          dir_fd=fd)
            os.close(fd)
            fd, here = sub, Path(os.path.normpath(here / part))
        if not made:
            _check_last(fd, here, name, owner)
    except OSError as e:
        os.close(fd)
        raise LogRefused(f"the LOG file {path} cannot be reached: {e.strerror}") from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_last(fd: int, here: Path, name: str, owner: int) -> None:
    """Check the folder ``fd`` (``here``) the log goes into, and the log file ``name`` in it
    if it exists."""
    try:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        folder = os.fstat(fd)
        if not _may_write(folder, owner):
            raise _not_writable(here, folder, owner) from None
        return
    if stat.S_ISLNK(st.st_mode):
        raise LogRefused(f"the LOG file {here / name} is a symlink, which is never followed")
    if not stat.S_ISREG(st.st_mode):
        raise LogRefused(f"the LOG file {here / name} is not a regular file")
    if not _may_write(st, owner):
        raise LogRefused(f"the LOG file {here / name} belongs to {_user(st.st_uid)} and the "
                         f"task's owner {_user(owner)} may not write it")


def _not_writable(folder: Path, st: os.stat_result, owner: int) -> LogRefused:
    return LogRefused(f"the LOG's folder {folder} belongs to {_user(st.st_uid)} and the task's "
                      f"owner {_user(owner)} may not write in it")
