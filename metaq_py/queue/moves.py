"""Moving a task from one folder to another, with the files that travel with it.

Every state change of a task, the runner's and the people's alike, is :func:`move_task`: one
``rename`` within one file system, so the task is always in exactly one place and, of two
processes racing to move it, exactly one succeeds. Its logbook follows it (rewritten when the
move adds to its history: staged first, and published only by the winner of the rename), a
``.reason`` is written beside it where asked, and what belonged to its old place (lease,
reason, cancel request) is removed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from metaq_py.queue.folders import CANCEL_SUFFIX, REASON_SUFFIX, companion, free_name
from metaq_py.queue.lease import LeaseFiles, lease_path
from metaq_py.queue.logbook import (
    Logbook,
    logbook_path,
    publish_logbook,
    read_logbook,
    stage_logbook,
)
from metaq_py.queue.premade import Spares

__all__ = ["history_entry", "inode_of", "logbook_of", "move_task", "rename_quietly"]


def move_task(src: Path, dst: Path, *, reason: str | None = None, logbook: Logbook | None = None,
              spares: Spares | None = None, lease_files: LeaseFiles | None = None
              ) -> Path | None:
    """Move the task at ``src`` to ``dst`` (or a free variant of it) with its companions:
    the logbook (``logbook`` if given, else the old one moves as it is) and, with ``reason``, a
    ``.reason`` file. The old lease, reason and cancel request are removed; the lease goes
    back to ``lease_files`` for reuse when given (see
    :class:`~metaq_py.queue.lease.LeaseFiles`). A new logbook is written into a file made ahead
    of time when ``spares`` has one. Returns where the task went, or ``None`` if ``src``
    vanished first: then nothing was changed."""
    dst = free_name(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    staged = None
    if logbook is not None:
        # Only the mover that wins the rename publishes its logbook.
        staged = stage_logbook(dst, logbook, spares=spares)
    try:
        os.rename(src, dst)
    except FileNotFoundError:
        if staged is not None:
            staged.unlink(missing_ok=True)
        return None
    if staged is not None:
        publish_logbook(staged, dst)
        logbook_path(src).unlink(missing_ok=True)
    else:
        rename_quietly(logbook_path(src), logbook_path(dst))
    if reason is not None:
        Path(str(dst) + REASON_SUFFIX).write_text(reason.rstrip() + "\n", encoding="utf-8")
    Path(str(src) + REASON_SUFFIX).unlink(missing_ok=True)
    if lease_files is not None:
        lease_files.retire(lease_path(src))
    else:
        lease_path(src).unlink(missing_ok=True)
    companion(src, CANCEL_SUFFIX).unlink(missing_ok=True)
    return dst


def logbook_of(path: Path, *, now: float) -> Logbook:
    """The logbook of the task at ``path``, or, for a task without one, a fresh logbook whose
    submit time is the file's modification time (``now`` if even that is gone)."""
    inode = inode_of(path)
    logbook = read_logbook(path, inode)
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
    """Rename ``src`` to ``dst`` if it exists; whether it did."""
    try:
        os.rename(src, dst)
    except FileNotFoundError:
        return False
    return True
