"""A start's working files: its run folder and its log, made where nothing else is.

Both live under the batch job's folder, which collaborators can write to. Whatever is found
at their names that is not what the runner makes there (a symlink, a FIFO, a folder where the
log goes, a file where the run folder goes) is handed to ``aside`` (the runner renames it to
``<name>.planted-<hex>``, where ``metaq doctor`` lists it), and the real thing is made in its
place; without ``aside`` the start fails with one sentence. Nothing is ever followed or written
through, and opening a planted FIFO never blocks.

Each is *made first and looked at only when something is there already*: ``mkdir`` and an
exclusive ``open`` succeed at once for a task's first start, which is nearly every start, so
that costs one system call each; looking first (an ``lstat``) cost another two per start, which
showed for short tasks. A resumed task finds its run folder and log from before and keeps
them.
"""

from __future__ import annotations

import fcntl
import os
import stat
from collections.abc import Callable
from pathlib import Path

from metaq_py.launch.spec import LaunchError

__all__ = ["Aside", "make_run_folder", "open_task_log"]

Aside = Callable[[Path], object]
"""Moves what was found at a path out of the way (see the module text)."""

_NEW = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
_OLD = os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK


def make_run_folder(path: Path, task: str, *, aside: Aside | None) -> bool:
    """Make the run folder ``path`` (and its parents); whether it was made now, and so is
    empty (``False``: an earlier attempt's is kept)."""
    for _ in range(3):  # a rename aside races at most a planter who plants again and again
        try:
            os.mkdir(path)
            return True
        except FileNotFoundError:
            os.makedirs(path.parent, exist_ok=True)
            continue
        except FileExistsError:
            pass
        st = os.lstat(path)
        if stat.S_ISDIR(st.st_mode):  # lstat: a link to a folder is not one
            return False
        _planted(path, task, "run folder", aside)
    raise LaunchError(f"task {task!r}: something keeps appearing at its run folder {path}")


def open_task_log(path: Path, task: str, *, aside: Aside | None) -> int:
    """Open the log ``path`` to append the task's output, making it (and its folder) if
    missing."""
    for _ in range(3):
        try:
            return os.open(path, _NEW, 0o644)
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
            continue
        except FileExistsError:
            pass
        try:
            fd = os.open(path, _OLD)
        except FileNotFoundError:
            continue  # gone again: make it
        except OSError:  # a link (ELOOP), a FIFO with no reader (ENXIO), a folder...
            fd = -1
        if fd >= 0:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                fcntl.fcntl(fd, fcntl.F_SETFL, os.O_APPEND)  # blocking again: the task's stdout
                return fd
            os.close(fd)
        _planted(path, task, "log", aside)
    raise LaunchError(f"task {task!r}: something keeps appearing at its log {path}")


def _planted(path: Path, task: str, what: str, aside: Aside | None) -> None:
    if aside is None:
        raise LaunchError(f"task {task!r}: something other than its {what} is at {path}")
    aside(path)
