"""A task's logbook: how often it has run without success, when it was first submitted, and
every state change it went through.

The logbook lives in a hidden file beside the task, ``.<name>.record`` (hidden, so no scan
mistakes it for a task; the suffix is the one queues have always used), and moves with it
from folder to folder. It stores the task file's inode: a rename keeps the inode, so a logbook
whose inode differs from the task beside it is left over from an earlier task of the same
name and is ignored.

A task without a logbook has made no attempt, and its submit time is its file's modification
time (which every rename in the queue keeps).
"""

from __future__ import annotations

import json
import math
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metaq_py.queue.disk.fileio import Refused, read_regular, write_all

__all__ = [
    "LOGBOOK_SUFFIX",
    "USAGE_FIELDS",
    "Logbook",
    "logbook_path",
    "publish_logbook",
    "read_logbook",
    "stage_logbook",
]


LOGBOOK_LIMIT = 4 * 1024 * 1024
"""The largest logbook (bytes) that is read: thousands of state changes."""

USAGE_FIELDS = ("cpu_user_seconds", "cpu_system_seconds", "max_rss_bytes", "usage_from")
"""The fields of a history entry that say what the run it ends used: CPU seconds in user and
system mode, the peak resident memory in bytes, and where the figures come from (``wait4``:
the kernel, when the runner reaped the script; ``sacct``: SLURM's accounting of the task's
own step). See :mod:`metaq_py.launch.usage`."""

LOGBOOK_SUFFIX = ".record"
"""The suffix of a logbook's file name, unchanged since logbooks were called records, so that
the logbooks of existing queues are still found."""


@dataclass(frozen=True, slots=True)
class Logbook:
    """``attempts``: runs that ended without success (a failure, a lost job, a stale lease);
    a preemption is not one. ``submit``: the original submit time, kept across every move.
    ``history``: one entry per state change, newest last, each with ``time``, ``event`` and
    where known ``job``, ``reason`` and ``exit_code``; an entry that ends a run carries what
    the run used, where it is known (:data:`USAGE_FIELDS`). ``not_before``: the time (on the
    queue's clock, seconds since the epoch) before which a task sent back after a failure may
    not run again, its retry delay (0: none)."""

    inode: int
    submit: float
    attempts: int = 0
    history: tuple[dict[str, Any], ...] = ()
    not_before: float = 0.0


def logbook_path(task: str | os.PathLike[str]) -> Path:
    """Where the logbook of the task at ``task`` is kept."""
    p = task if isinstance(task, Path) else Path(task)
    return p.with_name(f".{p.name}{LOGBOOK_SUFFIX}")


def read_logbook(task: str | os.PathLike[str], inode: int) -> Logbook | None:
    """The logbook beside ``task`` if it belongs to the file with ``inode``, else ``None``.
    A damaged logbook counts as none: it holds bookkeeping, never the task itself."""
    try:
        data = json.loads(read_regular(logbook_path(task), limit=LOGBOOK_LIMIT)[0])
        if data.get("inode") != inode:
            return None
        submit = float(data["submit"])
        attempts = int(data.get("attempts", 0))
        not_before = float(data.get("not_before", 0.0))
        if not (math.isfinite(submit) and 0 <= attempts < 2**31 and math.isfinite(not_before)):
            return None
        return Logbook(
            inode=inode,
            submit=submit,
            attempts=attempts,
            history=tuple(h for h in data.get("history", ()) if isinstance(h, dict)),
            not_before=not_before,
        )
    except (Refused, ValueError, TypeError, KeyError, AttributeError, RecursionError,
            OverflowError):
        return None


def stage_logbook(task: str | os.PathLike[str], logbook: Logbook) -> Path:
    """Write ``logbook`` for a task that will be at ``task``, under a private temporary name
    beside it; :func:`publish_logbook` makes it the task's logbook. Staging lets only the
    process that wins a race for the task publish its logbook."""
    data = json.dumps({"inode": logbook.inode, "submit": logbook.submit,
                       "attempts": logbook.attempts, "history": list(logbook.history),
                       **({"not_before": logbook.not_before} if logbook.not_before else {})
                       }).encode()
    path = logbook_path(task)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{secrets.token_hex(3)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o666)
    try:
        write_all(fd, data)
    except OSError:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    return tmp


def publish_logbook(staged: Path, task: str | os.PathLike[str]) -> Path:
    """Atomically make the staged logbook the logbook of ``task``."""
    path = logbook_path(task)
    os.replace(staged, path)
    return path
