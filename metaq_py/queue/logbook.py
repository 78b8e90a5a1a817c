"""A task's logbook: how often it has run without success, when it was first submitted, and
every state change it went through.

The logbook lives in a hidden file beside the task, ``.<name>.record`` (hidden, so no scan
mistakes it for a task; the suffix is the one queues have always used), and moves with it
from folder to folder. It stores the task file's inode: a rename keeps the inode, so a logbook
whose inode differs from the task beside it is left over from an earlier task of the same
name and is ignored.

A task without a logbook has made no attempt, and its submit time is its file's modification
time (which every rename in the queue keeps).

**Packs.** The logbooks of done tasks are packed into one file per batch job,
``jobs/<jobid>/logbooks.jsonl``. A task that a runner moves to ``finished/``, ``failed/`` or
``cancelled/`` keeps one inode in the queue, its script, as in METAQ: its logbook is not
written beside it (``.<name>.record``) but appended, as one JSON line, to its runner's pack,
a file the runner holds open and alone writes (one ``write`` per line, so a crash tears at
most the last line, which readers skip).
A line is::

    {"task": "finished/todo/a.sh", "inode": 1234, "submit": ..., "attempts": 0,
     "history": [...]}

``task`` is the task file's path in the queue after the move, ``inode`` its inode (a rename
keeps it): a line matches a task only when both agree, so a line left from an earlier task
of the same name is never taken for a later one's.

Reading: :class:`PackedLogbooks` looks for a done task's logbook in the packs, first in those
written to since the task's last change (its ``ctime``, which the move that made it done set),
the oldest of those first: the runner that moved it wrote its line then, so one pack is
usually read. Each pack read is kept, so listing a whole folder reads each pack once.

A logbook beside a done task (an older queue's, or one written by a runner of another job that
reclaimed the task) is still read first (:func:`~metaq_py.queue.logbook.read_logbook`).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metaq_py.queue.disk.fileio import Refused, open_append, read_lines, read_regular, write_all
from metaq_py.queue.disk.folders import make_folders, set_aside

__all__ = [
    "LOGBOOK_SUFFIX",
    "PACK_NAME",
    "USAGE_FIELDS",
    "Logbook",
    "LogbookPack",
    "PackedLogbooks",
    "find_logbook",
    "logbook_path",
    "parse_logbook",
    "publish_logbook",
    "read_logbook",
    "stage_logbook",
]


LOGBOOK_LIMIT = 4 * 1024 * 1024
"""The largest logbook (bytes) that is read: thousands of state changes."""

USAGE_FIELDS = ("cpu_user_seconds", "cpu_system_seconds", "max_rss_bytes", "usage_from",
                "memory_peak_bytes")
"""The fields of a history entry that say what the run it ends used: CPU seconds in user and
system mode, the peak resident memory in bytes, and where the figures come from (``wait4``:
the kernel, when the runner reaped the script; ``sacct``: SLURM's accounting of the task's
own step), and, for a task its cgroup held to its ``MEM``, the peak of the whole task's
memory. See :mod:`metaq_py.launch.usage`."""

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
    except (Refused, ValueError, RecursionError):
        return None
    return parse_logbook(data, inode)


def parse_logbook(data: object, inode: int) -> Logbook | None:
    """The logbook a decoded JSON object holds if it belongs to the file with ``inode``, else
    ``None`` (also for anything malformed)."""
    try:
        if not isinstance(data, dict) or data.get("inode") != inode:
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
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError):
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


# --- the packs of done tasks' logbooks ------------------------------------------------------


PACK_NAME = "logbooks.jsonl"
"""The name of a batch job's pack of logbooks, in its folder ``jobs/<jobid>/``."""

JOBS = "jobs"


class LogbookPack:
    """The pack of one batch job, open for appending while its runner lives."""

    __slots__ = ("_fd", "path", "root")

    def __init__(self, root: Path, job_dir: Path) -> None:
        self.root = root
        self.path = job_dir / PACK_NAME
        self._fd: int | None = None

    def add(self, task: Path, logbook: Logbook) -> None:
        """Append ``logbook`` as the logbook of the done task about to be moved to ``task``
        (written before the move, so that a logbook that cannot be kept stops the move: a
        line whose move then fails matches no file, as it names the task's inode). Where the
        pack cannot be written (a full disk), the logbook goes beside the task as before;
        failing that too, ``OSError``: the move must wait, as any move that cannot write."""
        line = json.dumps({"task": os.path.relpath(task, self.root), "inode": logbook.inode,
                           "submit": logbook.submit, "attempts": logbook.attempts,
                           "history": list(logbook.history)}, separators=(",", ":"))
        try:
            write_all(self._open(), (line + "\n").encode())
        except OSError:
            publish_logbook(stage_logbook(task, logbook), task)

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def _open(self) -> int:
        if self._fd is None:
            make_folders(self.root, self.path.parent)
            try:
                self._fd = open_append(self.path)
            except Refused as e:
                if not e.planted:
                    raise OSError(str(e)) from None
                set_aside(self.path)  # a link, a FIFO or a folder planted at its name
                self._fd = open_append(self.path)
        return self._fd


class PackedLogbooks:
    """The packs of a queue's batch jobs, read as needed (see the module's text). A miss
    lists the packs again, so a long-lived reader also finds what jobs packed since."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._known: dict[tuple[str, int], Logbook] = {}
        """Every logbook of the packs read so far, by (task, inode)."""
        self._read: dict[Path, int] = {}
        """The packs read, with the size each had when listed."""
        self._listing: list[tuple[float, int, Path]] = []
        """The packs as last listed (:meth:`_all_packs`)."""

    def find(self, path: Path, inode: int) -> Logbook | None:
        """The packed logbook of the done task at ``path`` with ``inode``, or ``None``."""
        key = (os.path.relpath(path, self.root), inode)
        found = self._known.get(key)
        if found is not None:
            return found
        packs = [pack for pack in self._listing if self._read.get(pack[2]) != pack[1]]
        if not packs:  # all read as last listed: list them again
            self._listing = self._all_packs()
            packs = [pack for pack in self._listing if self._read.get(pack[2]) != pack[1]]
        if not packs:
            return None
        try:
            changed = os.lstat(path).st_ctime
        except OSError:
            changed = math.inf
        after = [(size, p) for mtime, size, p in packs if mtime >= changed - 1.0]
        before = [(size, p) for mtime, size, p in reversed(packs) if mtime < changed - 1.0]
        for size, pack_path in (*after, *before):
            self._read[pack_path] = size
            for k, book in _read_pack(pack_path).items():
                self._known.setdefault(k, book)
            if key in self._known:
                return self._known[key]
        return None

    def _all_packs(self) -> list[tuple[float, int, Path]]:
        """Every job's pack with its modification time and size, oldest first."""
        found = []
        with contextlib.suppress(OSError), os.scandir(self.root / JOBS) as jobs:
            for job in jobs:
                path = Path(job.path) / PACK_NAME
                with contextlib.suppress(OSError):
                    st = os.lstat(path)
                    found.append((st.st_mtime, st.st_size, path))
        return sorted(found)


def find_logbook(task: Path, inode: int, packed: PackedLogbooks | None) -> Logbook | None:
    """The logbook of the task at ``task`` with ``inode``: the one beside it, else (for a done
    task, with ``packed``) its packed one."""
    beside = read_logbook(task, inode)
    if beside is not None or packed is None:
        return beside
    return packed.find(task, inode)


def _read_pack(path: Path) -> dict[tuple[str, int], Logbook]:
    """The logbooks of one pack by (task, inode); the later of two lines wins. Torn or
    malformed lines are skipped (bookkeeping, never a task)."""
    out: dict[tuple[str, int], Logbook] = {}
    try:
        for raw, complete in read_lines(path):
            if raw is None or not complete:
                continue
            book = _logbook_line(raw)
            if book is not None:
                out[book[0]] = book[1]
    except Refused:
        pass
    return out


def _logbook_line(raw: bytes) -> tuple[tuple[str, int], Logbook] | None:
    try:
        data: Any = json.loads(raw)
        task, inode = data["task"], data["inode"]
    except (ValueError, TypeError, KeyError, RecursionError):
        return None
    if not isinstance(task, str) or not isinstance(inode, int):
        return None
    book = parse_logbook(data, inode)
    return None if book is None else ((task, inode), book)
