"""Moving a task from one folder to another, with the files that travel with it.

Every state change of a task, the runner's and the people's alike, is :func:`move_task`: one
``rename`` within one file system, so the task is always in exactly one place and, of two
processes racing to move it, exactly one succeeds. Its logbook follows it (rewritten when the
move adds to its history: staged first, and published only by the winner of the rename), a
``.reason`` is written beside it where asked, and what belonged to its old place (lease,
reason, cancel request) is removed.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from metaq_py.queue.disk.fileio import create_new
from metaq_py.queue.disk.folders import (
    CANCEL_SUFFIX,
    REASON_SUFFIX,
    MadeFolders,
    companion,
    free_name,
    make_folders,
    set_aside,
)
from metaq_py.queue.lease import lease_path
from metaq_py.queue.logbook import (
    Logbook,
    PackedLogbooks,
    find_logbook,
    logbook_path,
    publish_logbook,
    stage_logbook,
)

__all__ = ["Pack", "history_entry", "inode_of", "logbook_of", "move_task", "rename_quietly"]

Pack = Callable[[Path, Logbook], None]
"""Where a move hands the logbook of a task it made done: the task's new path and logbook."""


def move_task(src: Path, dst: Path, *, root: Path, reason: str | None = None,
              logbook: Logbook | None = None, old_reason: bool = True,
              made: MadeFolders | None = None, pack: Pack | None = None,
              src_logbook: bool = True) -> Path | None:
    """Move the task at ``src`` to ``dst`` (or a free variant of it) with its companions:
    the logbook (``logbook`` if given, else the old one moves as it is) and, with ``reason``, a
    ``.reason`` file. The old lease, reason and cancel request are removed. Returns where the
    task went, or ``None`` if ``src`` vanished first: then nothing was changed.

    ``root`` is the queue's: the folders on the way to ``dst`` are made as real folders below
    it (:func:`~metaq_py.queue.disk.folders.make_folders`), so a move never leaves the queue. The
    ``.reason`` beside ``src`` is removed only with ``old_reason`` (``src`` is in a done state:
    in a task folder, ``<src>.reason`` may be another task). Nothing is written through a
    symlink: a ``.reason`` is a new file or not written at all. ``made`` remembers the folders
    made before (:class:`~metaq_py.queue.disk.folders.MadeFolders`, for ``root``).

    With ``pack``, ``logbook`` is not written beside ``dst`` but handed to ``pack`` before
    the rename (a runner's pack of the logbooks of done tasks,
    :mod:`~metaq_py.queue.logbook`): when it cannot be kept anywhere, the ``OSError`` leaves
    the task where it is. ``src_logbook=False`` says that ``src`` has no
    logbook beside it (a claim that never ran before), which spares looking for one."""
    dst = free_name(dst, reason=reason is not None)
    if made is not None:
        made.make(dst.parent)
    else:
        make_folders(root, dst.parent)
    staged = None
    if logbook is not None and pack is None:
        # Only the mover that wins the rename publishes its logbook.
        staged = stage_logbook(dst, logbook)
    elif logbook is not None and pack is not None:
        pack(dst, logbook)  # before the rename: a logbook that cannot be kept stops the move
    try:
        os.rename(src, dst)
    except (FileNotFoundError, NotADirectoryError):  # gone, or its folder is a file now
        if staged is not None:
            staged.unlink(missing_ok=True)
        return None
    if staged is not None:
        publish_logbook(staged, dst)
        _unlink_quietly(logbook_path(src))
    elif pack is not None and logbook is not None:
        if src_logbook:
            _unlink_quietly(logbook_path(src))
    elif src_logbook:
        rename_quietly(logbook_path(src), logbook_path(dst))
    if old_reason:
        _unlink_quietly(Path(str(src) + REASON_SUFFIX))
    if reason is not None:
        with contextlib.suppress(FileExistsError):  # taken in the instant since free_name
            create_new(str(dst) + REASON_SUFFIX, (reason.rstrip() + "\n").encode())
    _unlink_quietly(lease_path(src))
    _unlink_quietly(companion(src, CANCEL_SUFFIX))
    return dst


def _unlink_quietly(path: Path) -> None:
    """Remove ``path`` if it is there (a name too long to exist is not there). A folder
    planted at a companion's name is set aside, never emptied."""
    try:
        path.unlink()
    except (FileNotFoundError, NotADirectoryError):
        pass
    except OSError as e:
        if e.errno in (errno.EISDIR, errno.EPERM):
            with contextlib.suppress(FileNotFoundError):
                set_aside(path)
        elif e.errno != errno.ENAMETOOLONG:
            raise


def logbook_of(path: Path, *, now: float, packed: PackedLogbooks | None = None) -> Logbook:
    """The logbook of the task at ``path`` (beside it, or for a done task in ``packed``), or,
    for a task without one, a fresh logbook whose submit time is the file's modification time
    (``now`` if even that is gone)."""
    inode = inode_of(path)
    logbook = find_logbook(path, inode, packed)
    if logbook is None:
        try:
            submit = os.lstat(path).st_mtime
        except OSError:
            submit = now
        logbook = Logbook(inode=inode, submit=submit)
    return logbook


def history_entry(event: str, *, now: float, **fields: Any) -> dict[str, Any]:
    """One entry of a logbook's history, stamped ``now``; fields that are ``None`` are left
    out."""
    return {"time": now, "event": event, **{k: v for k, v in fields.items() if v is not None}}


def inode_of(path: Path) -> int:
    """The inode of ``path`` itself (not of a link's target), or -1 if it is gone."""
    try:
        return os.lstat(path).st_ino
    except OSError:
        return -1


def rename_quietly(src: Path, dst: Path) -> bool:
    """Rename ``src`` to ``dst`` if it exists; whether it did. A companion whose name is too
    long to exist (beside a task whose own name is) is not there."""
    try:
        os.rename(src, dst)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as e:
        if e.errno == errno.ENAMETOOLONG:
            return False
        raise
    return True
