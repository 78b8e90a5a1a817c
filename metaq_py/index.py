"""The index of waiting tasks: every task file under the task folders, parsed once.

A scan walks the task folders with ``os.scandir``. Each file's parsed header is cached under
its path and keyed by (inode, size, mtime, mode, owner, group): when none of these changed,
the file is not opened again, so a rescan of an unchanged queue costs one ``stat`` per task.
The key includes the mode and owners because the trust check depends on them, and ``chmod``
does not change the mtime.

Hidden files and folders (names starting with a dot) are skipped; they hold records, leases
and half-written submissions. Symlinked tasks and folders are followed, with loops detected.
A file that vanishes during the scan (claimed by another job) is simply not listed.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from metaq_py.admission import admit
from metaq_py.config import QueueConfig
from metaq_py.directives import TaskSpec, parse_header, read_head
from metaq_py.errors import TaskError, TaskVanished
from metaq_py.record import RECORD_SUFFIX, read_record
from metaq_py.security import Trust

__all__ = ["Index", "Invalid", "Scan", "Task", "first_fit"]


@dataclass(frozen=True, slots=True)
class Task:
    """A task waiting in a task folder.

    ``folder`` is the task folder (``priority``, ``todo``, ...) and ``relpath`` the path below
    it, with ``/`` separators; together they are the task's identity, :attr:`id`. ``rank`` is
    the folder's position in the scan order. ``submit`` is the original submit time and
    ``attempts`` the runs that ended without success, both kept across requeues.
    ``walltime`` is ``MIN_WC_TIME``, or the queue's default when the task gives none.
    """

    folder: str
    relpath: str
    file: str
    spec: TaskSpec
    rank: int
    submit: float
    attempts: int
    walltime: float
    order: tuple = field(compare=False, repr=False, default=())

    @property
    def id(self) -> str:
        """``<folder>/<relpath>``: the same in every state the task passes through."""
        return f"{self.folder}/{self.relpath}"

    @property
    def path(self) -> Path:
        """The task file (``file`` as a ``Path``; a scan keeps plain strings, which are
        cheaper by the hundred thousand)."""
        return Path(self.file)


@dataclass(frozen=True, slots=True)
class Invalid:
    """A file in a task folder that cannot run, and why (``error``, one sentence)."""

    folder: str
    relpath: str
    path: Path
    error: TaskError
    mtime: float = 0.0
    """When the file (or link) last changed: a file still being copied in is not rejected
    until it has been left alone for a moment (see ``Queue.pending``)."""
    content: bool = False
    """Whether the problem is in the file's content (which may still be being written), as
    opposed to its permissions, its folder or a broken link."""

    @property
    def id(self) -> str:
        return f"{self.folder}/{self.relpath}"

    @property
    def reason(self) -> str:
        return str(self.error)


@dataclass(frozen=True, slots=True)
class Scan:
    """One look at the task folders: valid tasks in scheduling order, and invalid files."""

    tasks: tuple[Task, ...]
    invalid: tuple[Invalid, ...]


class _Entry:
    """What the cache remembers of one file."""

    __slots__ = ("key", "result", "rkey", "task")

    def __init__(self, key: tuple, result: TaskSpec | TaskError) -> None:
        self.key = key
        self.result = result
        self.task: Task | None = None
        self.rkey: tuple | None = None


def _stat_key(st: os.stat_result) -> tuple:
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_mode, st.st_uid, st.st_gid)


class _Dir:
    """What the cache remembers of one folder: its key and what was found directly in it."""

    __slots__ = ("invalid", "key", "subdirs", "tasks")

    def __init__(self, key: tuple, tasks: list[Task], invalid: list[Invalid],
                 subdirs: list[tuple[str, str, str | None]]) -> None:
        self.key = key
        self.tasks = tasks
        self.invalid = invalid
        self.subdirs = subdirs


class Index:
    """Scans the task folders of one queue, remembering parsed headers between scans.

    Two levels of cache make a rescan cheap. A folder whose modification time (and owner,
    mode and trust verdict) did not change has the same entries as before: adding, removing
    or renaming a file changes it, so its listing is reused without reading it again. Every
    ``verify_interval`` seconds a full pass also ``stat``-s each file, to notice files edited
    in place or whose permissions changed; a claim always re-reads and re-checks the file it
    takes, so a stale entry can never make the wrong code run.
    """

    def __init__(self, root: str | os.PathLike[str], config: QueueConfig, *,
                 verify_interval: float = 60.0) -> None:
        self.root = Path(root)
        self.config = config
        self.verify_interval = verify_interval
        self.trust = Trust(gid=config.gid, uids=config.trusted_uids)
        self._cache: dict[str, _Entry] = {}
        self._dirs: dict[str, _Dir] = {}
        self._order: tuple[Task, ...] = ()
        self._last_full = -float("inf")
        self._changed = False
        self.parsed = 0
        """How many files the last scan had to open (0 when nothing changed)."""
        self.listed = 0
        """How many folders the last scan had to list again."""

    def forget(self, path: str | os.PathLike[str]) -> None:
        """Drop what is cached about the folder holding ``path``, so the next scan lists it."""
        self._dirs.pop(os.path.dirname(str(path)), None)

    def scan(self, *, full: bool | None = None) -> Scan:
        """Look at every task folder and return what is there now. ``full`` forces (or
        skips) the per-file verification pass; by default it runs every
        ``verify_interval`` seconds."""
        now = time.monotonic()
        if full is None:
            full = now - self._last_full >= self.verify_interval
        if full:
            self._last_full = now
        self.parsed = self.listed = 0
        self._changed = False
        dirs: dict[str, _Dir] = {}
        cache: dict[str, _Entry] = {} if full else self._cache
        tasks: list[Task] = []
        invalid: list[Invalid] = []
        root = str(self.root)
        root_problem = self._dir_problem(root, "the queue folder")
        for rank, folder in enumerate(self.config.folders):
            seen: set[tuple[int, int]] = set()
            stack: list[tuple[str, str, str | None]] = [
                (os.path.join(root, folder), "", root_problem)]
            while stack:
                path, prefix, parent_problem = stack.pop()
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                ident = (st.st_dev, st.st_ino)
                if ident in seen:
                    continue  # a symlink back to a folder already walked
                seen.add(ident)
                problem = parent_problem or self.trust.problem(st, f"the folder {path}")
                key = (rank, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, problem)
                cached = self._dirs.get(path)
                if full or cached is None or cached.key != key:
                    cached = self._list(path, prefix, folder, rank, problem, key, cache)
                    self._changed = True
                dirs[path] = cached
                tasks.extend(cached.tasks)
                invalid.extend(cached.invalid)
                stack.extend(cached.subdirs)
        if self._changed or len(tasks) != len(self._order):
            tasks.sort(key=_order_key)
            self._order = tuple(tasks)
        self._cache = cache
        self._dirs = dirs
        return Scan(self._order, tuple(invalid))

    def _list(self, folder_path: str, prefix: str, folder: str, rank: int,
              problem: str | None, key: tuple, cache: dict[str, _Entry]) -> _Dir:
        self.listed += 1
        tasks: list[Task] = []
        invalid: list[Invalid] = []
        subdirs: list[tuple[str, str, str | None]] = []
        for rel, path, st, error, has_record in _walk_one(folder_path, prefix, self.trust,
                                                          problem, subdirs, self._cache):
            if error is not None:
                invalid.append(Invalid(folder, rel, Path(path), error, _mtime(path)))
                continue
            if st is None:
                # A file never seen: read it straight away; the read's fstat stands in for
                # the stat (one system call fewer per file on a cold index).
                first = self._first_look(path, problem)
                if first is None:
                    continue  # vanished between the listing and the read
                if isinstance(first, TaskError):
                    invalid.append(Invalid(folder, rel, Path(path), first, _mtime(path)))
                    continue
                entry, st = first
                self._changed = True
            else:
                entry = self._cache.get(path)
                if entry is None or entry.key != _stat_key(st):
                    entry = self._parse(path, st)
                    if entry is None:
                        continue  # vanished between the listing and the read
            cache[path] = entry
            if isinstance(entry.result, TaskError):
                invalid.append(Invalid(folder, rel, Path(path), entry.result, st.st_mtime,
                                       content=True))
                continue
            task = self._task(entry, folder, rel, path, rank, st, has_record)
            if task is not entry.task:
                entry.task = task
                self._changed = True
            tasks.append(task)
        return _Dir(key, tasks, invalid, subdirs)

    def _dir_problem(self, path: str, what: str) -> str | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return self.trust.problem(st, what)

    def _first_look(self, path: str, problem: str | None
                    ) -> tuple[_Entry, os.stat_result] | TaskError | None:
        self.parsed += 1
        try:
            data, truncated, opened = read_head(path)
        except TaskVanished:
            return None
        except TaskError as e:
            return e
        why = problem or self.trust.problem(opened, "the task file")
        if why is not None:
            return TaskError(path, None, why)
        try:
            spec = parse_header(data, path=path, truncated=truncated)
            admit(spec, root=self.root, config=self.config)
            return _Entry(_stat_key(opened), spec), opened
        except TaskError as e:
            return _Entry(_stat_key(opened), e), opened

    def _parse(self, path: str, st: os.stat_result) -> _Entry | None:
        self.parsed += 1
        try:
            data, truncated, opened = read_head(path)
        except TaskVanished:
            return None
        except TaskError as e:
            return _Entry(_stat_key(st), e)
        try:
            spec = parse_header(data, path=path, truncated=truncated)
            admit(spec, root=self.root, config=self.config)
            return _Entry(_stat_key(opened), spec)
        except TaskError as e:
            return _Entry(_stat_key(opened), e)

    def _task(self, entry: _Entry, folder: str, rel: str, path: str, rank: int,
              st: os.stat_result, has_record: bool) -> Task:
        spec = entry.result
        assert isinstance(spec, TaskSpec)
        known = entry.task
        if not has_record:
            if known is not None and entry.rkey is None and known.rank == rank:
                return known
            rkey = None
            submit, attempts = st.st_mtime, 0
        else:
            submit, attempts = st.st_mtime, 0
            record_file = os.path.join(os.path.dirname(path),
                                       f".{os.path.basename(path)}{RECORD_SUFFIX}")
            try:
                rst = os.stat(record_file)
                rkey = (rst.st_ino, rst.st_size, rst.st_mtime_ns)
            except OSError:
                rkey = None
            if known is not None and entry.rkey == rkey and known.rank == rank:
                return known
            if rkey is not None:
                rec = read_record(path, os.lstat(path).st_ino)
                if rec is not None:
                    submit, attempts = rec.submit, rec.attempts
        entry.rkey = rkey
        wc = spec.min_wc_time if spec.min_wc_time is not None else self.config.defaults.min_wc_time
        return Task(folder=folder, relpath=rel, file=path, spec=spec, rank=rank,
                    submit=submit, attempts=attempts, walltime=wc,
                    order=(rank, -spec.priority, submit, f"{folder}/{rel}"))


def _mtime(path: str) -> float:
    try:
        return os.lstat(path).st_mtime
    except OSError:
        return 0.0


def _order_key(task: Task) -> tuple:
    return task.order


def _walk_one(folder: str, prefix: str, trust: Trust, problem: str | None,
              subdirs: list[tuple[str, str, str | None]], known: dict[str, _Entry]
              ) -> Iterable[tuple[str, str, os.stat_result | None, TaskError | None, bool]]:
    """Yield (relpath, path, stat, error, has_record) for every non-hidden file directly in
    ``folder``; ``error`` is set, and ``stat`` is ``None``, for a file that cannot be a task.
    A plain file not in ``known`` comes with neither (the caller reads it at once).
    Sub-folders are appended to ``subdirs`` as (path, prefix, inherited problem)."""
    try:
        with os.scandir(folder) as it:
            entries = list(it)
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as e:
        yield (prefix.rstrip("/") or ".", folder, None,
               TaskError(folder, None, f"the folder cannot be read ({e.strerror})"), False)
        return
    # Which tasks here have a record, known from the listing without another stat.
    records = {e.name[1:-len(RECORD_SUFFIX)] for e in entries
               if e.name[0] == "." and e.name.endswith(RECORD_SUFFIX)}
    for e in entries:
        name = e.name
        if name[0] == ".":
            continue
        rel = prefix + name
        path = e.path
        try:
            is_dir = e.is_dir()
        except OSError:
            is_dir = False
        if is_dir:
            subdirs.append((path, rel + "/", problem))
            continue
        if path not in known and not e.is_symlink():
            yield rel, path, None, None, name in records
            continue
        try:
            st = e.stat()
        except OSError as err:
            if err.errno == errno.ENOENT and not e.is_symlink():
                continue  # vanished: claimed or moved by someone else
            yield rel, path, None, TaskError(path, None, _stat_problem(err)), False
            continue
        if not stat.S_ISREG(st.st_mode):
            yield rel, path, None, TaskError(path, None, "this is not a regular file, so "
                                                         "it cannot be a task"), False
            continue
        why = problem or trust.problem(st, "the task file")
        if why is None and e.is_symlink():
            why = _target_dir_problem(path, trust)
        if why is not None:
            yield rel, path, None, TaskError(path, None, why), False
            continue
        yield rel, path, st, None, name in records


def _stat_problem(err: OSError) -> str:
    if err.errno == errno.ELOOP:
        return "the path is a symlink loop; point the link at a real script"
    if err.errno == errno.ENOENT:
        return "the symlink points to a file that does not exist"
    return f"the file cannot be read ({err.strerror})"


def _target_dir_problem(path: str, trust: Trust) -> str | None:
    real = os.path.realpath(path)
    try:
        st = os.stat(os.path.dirname(real))
    except OSError:
        return None
    return trust.problem(st, f"the folder of the link's target {os.path.dirname(real)}")


def first_fit(tasks: Sequence[Task], *, nodes: int, gpus: int, seconds: float,
              machine: str | None = None) -> Task | None:
    """The first task, in the given (scheduling) order, that fits in ``nodes`` free nodes,
    ``gpus`` free GPUs and ``seconds`` of wall clock, and may run on ``machine``.
    A malleable task fits when its ``min_nodes`` do."""
    for task in tasks:
        spec = task.spec
        if (spec.min_nodes <= nodes and spec.gpus <= gpus and task.walltime <= seconds
                and (spec.machine is None or spec.machine == machine)):
            return task
    return None

