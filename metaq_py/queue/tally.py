"""The tally: how many tasks are in each done state (finished, failed, rejected, cancelled),
per task folder, campaign folder and project, kept up to date as tasks move, so that
``metaq status`` never walks the queue's history.

Every move of a task goes through :meth:`~metaq_py.queue.claiming.ClaimingQueue.move`, which calls
:func:`note_move`: a move into a done state adds one to its key, a move out of one (``retry``)
takes one away. A key is (state, task folder, campaign folder, project): the campaign folder
is the task's sub-folder inside its task folder (``alice/run7`` for ``todo/alice/run7/x.sh``,
``""`` at the top), the project its ``PROJECT`` or ``-``.

On disk, in the hidden folder ``jobs/.summary/`` (beside the batch jobs' logs, which no job id
can name: job ids never start with a dot)::

    tally/<writer>.<generation>.jsonl   one per writing process, appended to by it alone
    base.json                           the counts of writers that have ended, and which
    base.lock                           (the lock for changing base.json)

Several runners on several hosts end tasks at once, so no file is shared by two writers:
each process appends to its own file, with one ``write`` per move, lines of changes
(``{"d": [[state, folder, campaign, project, delta], ...]}``) and, every
:data:`SNAPSHOT_EVERY` lines and at the start of each file, the writer's whole count so far
(``{"s": [...]}``). A reader reads each file from its last snapshot on. A file past
:data:`ROTATE_BYTES` is replaced by a new generation starting with a snapshot; a reader takes
each writer's newest generation. When a writer's process exits, it adds its count to
``base.json`` under the lock, names itself there as folded, and removes its files.

The tally is *established* once ``base.json`` exists. Before that (a queue made before the
tally, or never yet read), :func:`rebuild` counts the done folders from scratch and writes
``base.json`` as that count minus what the writers' files already hold; ``metaq status``
does it when it finds the queue writable, and ``metaq doctor`` can at any time. A rebuild
that overlaps moves retries until the writers' files are the same before and after its walk.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import secrets
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

from metaq_py.queue.disk.fileio import Refused, open_append, open_regular, read_regular
from metaq_py.queue.disk.folders import (
    make_folders,
    relative_parts,
    set_aside,
    subfolders,
    task_files,
)
from metaq_py.queue.disk.lock import FolderLock
from metaq_py.queue.judge import judge
from metaq_py.task_spec import TaskSpec

__all__ = ["Key", "close_writers", "count_files", "note", "note_move", "read_tally",
           "rebuild", "summary_dir"]

DONE = ("finished", "failed", "rejected", "cancelled")
"""The done states (the same as :data:`~metaq_py.queue.store.DONE_STATES`, which imports
this module's users)."""

SUMMARY = ("jobs", ".summary")
SNAPSHOT_EVERY = 256
"""Lines of changes between two snapshots: a reader parses at most this many per writer."""
ROTATE_BYTES = 4 * 1024 * 1024
FOLDED_KEEP = 86400.0
"""Seconds a folded writer's name stays in ``base.json`` (its files are gone long before)."""
LOCK_TIMEOUT = 60.0
WINDOW_MOST = 64 * 1024 * 1024
"""The most (bytes) read back from a writer's file to find its last snapshot."""
BASE_LIMIT = 64 * 1024 * 1024
"""The largest ``base.json`` (bytes) that is read."""


class Key(NamedTuple):
    """What the tally counts by."""

    state: str
    folder: str
    campaign: str
    project: str


Counts = Counter[Key]


def summary_dir(root: str | os.PathLike[str]) -> Path:
    """``<root>/jobs/.summary``: the tally and the caches of ``metaq status``."""
    return Path(root).joinpath(*SUMMARY)


def project_of(spec: TaskSpec | None) -> str:
    """The project a task is counted under: its ``PROJECT``, or ``-``."""
    return (spec.project if spec is not None else None) or "-"


def key_of(root: Path, path: str | os.PathLike[str]) -> tuple[str, str, str] | None:
    """(done state, task folder, campaign folder) of the task file at ``path``, or ``None``
    when it is not in a done state."""
    parts = relative_parts(path, root)
    if len(parts) < 3 or parts[0] not in DONE:
        return None
    return parts[0], parts[1], "/".join(parts[2:-1])


# --- writing ---------------------------------------------------------------------------------


def note_move(root: Path, src: Path, dst: Path, *, spec: TaskSpec | None = None) -> None:
    """Count the move of a task from ``src`` to ``dst`` (its file, now there). ``spec`` is the
    task's, when the mover has it; else the file's header is read (only for moves into or out
    of a done state)."""
    old, new = key_of(root, src), key_of(root, dst)
    if old is None and new is None:
        return
    project = project_of(spec if spec is not None else judge(dst).spec)
    changes: list[tuple[Key, int]] = []
    if old is not None:
        changes.append((Key(*old, project), -1))
    if new is not None:
        changes.append((Key(*new, project), 1))
    try:
        _writer(root).add(changes)
    except OSError:
        # The move is done and must stand. A tally that cannot be written is no longer
        # trusted: without base.json the next reader rebuilds it from the files.
        with contextlib.suppress(OSError):
            (summary_dir(root) / "base.json").unlink()


def note(root: str | os.PathLike[str], src: Path | None, dst: Path | None, *,
         project: str | None) -> None:
    """Count a task that left ``src`` and is now at ``dst`` (either may be ``None``), with its
    ``project`` (``None``: none)."""
    root = Path(root)
    changes = []
    for path, delta in ((src, -1), (dst, 1)):
        k = key_of(root, path) if path is not None else None
        if k is not None:
            changes.append((Key(*k, project or "-"), delta))
    if changes:
        _writer(root).add(changes)


class _Writer:
    """This process's tally file for one queue (see the module's description)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.name = f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
        self.counts: Counts = Counter()
        self.generation = 0
        self.fd: int | None = None
        self.size = 0
        self.since_snapshot = 0
        self.lock = threading.Lock()

    def path(self, generation: int) -> Path:
        return summary_dir(self.root) / "tally" / f"{self.name}.{generation:06d}.jsonl"

    def add(self, changes: list[tuple[Key, int]]) -> None:
        with self.lock:
            for k, d in changes:
                self.counts[k] += d
            if self.fd is None or self.size > ROTATE_BYTES:
                self._open_next()
            elif self.since_snapshot >= SNAPSHOT_EVERY:
                self._write({"s": _rows(self.counts)})
            else:
                self._write({"d": [[*k, d] for k, d in changes]})

    def _open_next(self) -> None:
        """Start a new generation with a snapshot, then drop the previous one."""
        old = self.fd, self.generation
        self.generation += 1 if self.fd is not None else 0
        path = self.path(self.generation)
        make_folders(self.root, path.parent)
        try:
            self.fd = open_append(path, mode=0o664)
        except Refused as e:
            if not e.planted:
                raise
            set_aside(path)  # planted where this writer's file goes
            self.fd = open_append(path, mode=0o664)
        self.size = 0
        self._write({"s": _rows(self.counts)})
        if old[0] is not None:
            os.close(old[0])
            with contextlib.suppress(FileNotFoundError):
                self.path(old[1]).unlink()

    def _write(self, record: dict[str, Any]) -> None:
        assert self.fd is not None
        line = (json.dumps(record, separators=(",", ":")) + "\n").encode()
        os.write(self.fd, line)  # one write: a reader sees the line whole or not at all
        self.size += len(line)
        self.since_snapshot = 0 if "s" in record else self.since_snapshot + 1

    def fold(self) -> None:
        """Add this writer's count to ``base.json`` and remove its file (when the tally is
        established; otherwise the file stays for :func:`rebuild` to take into account)."""
        with self.lock:
            if self.fd is None:
                return
            base_path = summary_dir(self.root) / "base.json"
            with _base_lock(self.root):
                base = _read_base(self.root)
                if base is None:
                    return
                counts, folded = base
                counts.update(self.counts)
                now = time.time()
                folded[self.name] = now
                _prune(self.root, folded, now)
                _write_base(base_path, counts, folded)
                os.close(self.fd)
                self.fd = None
                with contextlib.suppress(FileNotFoundError):
                    self.path(self.generation).unlink()
                # Anything noted after this starts a new writer, from zero.
                self.name = f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
                self.counts = Counter()
                self.generation = 0


_WRITERS: dict[tuple[int, str], _Writer] = {}
_WRITERS_LOCK = threading.Lock()


def _writer(root: Path) -> _Writer:
    """This process's writer for the queue at ``root`` (a forked child gets its own)."""
    key = (os.getpid(), os.path.abspath(root))
    with _WRITERS_LOCK:
        w = _WRITERS.get(key)
        if w is None:
            if not _WRITERS:
                atexit.register(close_writers)
            w = _WRITERS[key] = _Writer(Path(key[1]))
        return w


def close_writers() -> None:
    """Fold every tally this process wrote into its queue's ``base.json`` (see
    :meth:`_Writer.fold`); run at exit. A queue that is gone or read-only is skipped."""
    with _WRITERS_LOCK:
        mine = [w for (pid, _), w in _WRITERS.items() if pid == os.getpid()]
        for (pid, root) in [k for k in _WRITERS if k[0] == os.getpid()]:
            del _WRITERS[pid, root]
    for w in mine:
        with contextlib.suppress(OSError, TimeoutError):
            w.fold()


# --- reading ---------------------------------------------------------------------------------


def read_tally(root: str | os.PathLike[str]) -> Counts | None:
    """The done tasks per key, from the summary; ``None`` when it is not established. Keys
    with a count of zero are left out."""
    root = Path(root)
    for _ in range(5):
        names = _tally_files(root)
        base = _read_base(root)
        if base is None:
            return None
        counts, folded = base
        try:
            counts.update(_writers_sum(root, names, folded))
        except FileNotFoundError:
            continue  # a writer folded or rotated meanwhile: look again
        return Counter({k: n for k, n in counts.items() if n})
    return None


def _tally_files(root: Path) -> dict[str, Path]:
    """Each writer's newest tally file, by writer name."""
    folder = summary_dir(root) / "tally"
    newest: dict[str, tuple[str, Path]] = {}
    try:
        with os.scandir(folder) as it:
            for e in it:
                if e.name[0] == "." or not e.name.endswith(".jsonl"):
                    continue
                writer, _, gen = e.name[:-len(".jsonl")].rpartition(".")
                if writer and (writer not in newest or gen > newest[writer][0]):
                    newest[writer] = (gen, Path(e.path))
    except (FileNotFoundError, NotADirectoryError):
        return {}
    return {w: p for w, (_, p) in newest.items()}


def _writers_sum(root: Path, files: dict[str, Path], folded: dict[str, float]) -> Counts:
    total: Counts = Counter()
    for writer, path in files.items():
        if writer not in folded:
            total.update(_read_writer(path))
    return total


def _read_writer(path: Path) -> Counts:
    """One writer's count: its last snapshot and the changes after it. A line cut short (the
    writer is writing it now) is left for the next read."""
    try:
        fd, st = open_regular(path)
    except Refused:
        return Counter()  # gone, or planted (a FIFO, a link): no count of a writer's
    try:
        size = st.st_size
        window = 65536
        while True:
            start = max(0, size - window)
            data = os.pread(fd, size - start, start)
            lines = data.split(b"\n")[:-1] if not data.endswith(b"\n") else data.split(b"\n")
            if start > 0:
                lines = lines[1:]  # the first may be a part of a line
            snap = next((i for i in range(len(lines) - 1, -1, -1)
                         if lines[i].startswith(b'{"s":')), None)
            if snap is not None or start == 0 or window >= WINDOW_MOST:
                break  # a writer snapshots often: one without, so far back, is not one
            window *= 4
    finally:
        os.close(fd)
    counts: Counts = Counter()
    for raw in lines[snap if snap is not None else 0:]:
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
            if "s" in record:
                counts = Counter({Key(*r[:4]): int(r[4]) for r in record["s"]})
            for r in record.get("d", ()):
                counts[Key(*r[:4])] += int(r[4])
        except (ValueError, TypeError, AttributeError, IndexError, RecursionError):
            continue  # not a writer's record (garbage planted in jobs/.summary/)
    return counts


# --- the base and rebuilding ------------------------------------------------------------------


def _base_lock(root: Path) -> FolderLock:
    folder = summary_dir(root)
    make_folders(root, folder)
    return FolderLock(folder / "base.lock", timeout=LOCK_TIMEOUT)


def _read_base(root: Path) -> tuple[Counts, dict[str, float]] | None:
    try:
        raw, _ = read_regular(summary_dir(root) / "base.json", limit=BASE_LIMIT)
        data = json.loads(raw)
        counts: Counts = Counter({Key(*r[:4]): int(r[4]) for r in data["counts"]})
        folded = {str(k): float(v) for k, v in data.get("folded", {}).items()}
    except (OSError, ValueError, TypeError, KeyError, AttributeError, IndexError,
            RecursionError):
        return None  # missing or damaged: as if never established; the next reader rebuilds
    return counts, folded


def _write_base(path: Path, counts: Counts, folded: dict[str, float]) -> None:
    data = json.dumps({"version": 1, "counts": _rows(counts), "folded": folded}).encode()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(3)}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _prune(root: Path, folded: dict[str, float], now: float) -> None:
    """Forget writers folded long ago, removing any file of theirs left by a crash between
    the fold and the removal."""
    for writer, when in list(folded.items()):
        if now - when > FOLDED_KEEP:
            for path in (summary_dir(root) / "tally").glob(f"{writer}.*.jsonl"):
                path.unlink(missing_ok=True)
            del folded[writer]


def count_files(root: str | os.PathLike[str]) -> Counts:
    """The done tasks per key, counted from the files (every header read: slow on a long
    history; this is what the tally spares)."""
    root = Path(root)
    counts: Counts = Counter()
    for state in DONE:
        base = root / state
        for folder in subfolders(base):
            for rel, path in task_files(base / folder):
                campaign = rel.rpartition("/")[0]
                counts[Key(state, folder, campaign, project_of(judge(path).spec))] += 1
    return counts


def rebuild(root: str | os.PathLike[str], *, tries: int = 5) -> Counts:
    """Count the done tasks from the files and make the summary agree with that count: what
    ``metaq doctor`` calls, and ``metaq status`` on a queue whose tally is not yet
    established. Returns the count. Raises ``OSError`` when the queue is not writable."""
    root = Path(root)
    with _base_lock(root):
        base = _read_base(root)
        folded = base[1] if base is not None else {}
        for _ in range(tries):
            before = _settled_sum(root, folded)
            scratch = count_files(root)
            after = _settled_sum(root, folded)
            if before == after:
                break
        base_counts = Counter(scratch)
        base_counts.subtract(after)
        _write_base(summary_dir(root) / "base.json", base_counts, folded)
    return Counter({k: n for k, n in scratch.items() if n})


def _settled_sum(root: Path, folded: dict[str, float]) -> Counts:
    for _ in range(5):
        try:
            return _writers_sum(root, _tally_files(root), folded)
        except FileNotFoundError:
            continue
    return _writers_sum(root, _tally_files(root), folded)


def _rows(counts: Counts | Iterable[tuple[Key, int]]) -> list[list[Any]]:
    items = counts.items() if isinstance(counts, Counter) else counts
    return [[*k, n] for k, n in sorted(items) if n]
