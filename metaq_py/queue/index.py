"""The index of waiting tasks: every task file under the task folders, parsed once.

A scan walks the task folders with ``os.scandir``. Each file's parsed header is cached under
its path and keyed by (inode, size, mtime, mode, owner, group): when none of these changed,
the file is not opened again, so a rescan of an unchanged queue costs one ``stat`` per task.
The key includes the mode and owners because the trust check depends on them, and ``chmod``
does not change the mtime. Nor does it change its folder's: so invalid files (such as one a
METAQ generator has written and not yet made executable) are ``stat``-ed again, a few hundred
per folder at each scan in turn, and one that changed is judged again at once.

Hidden files and folders (names starting with a dot) are skipped; they hold logbooks, leases
and half-written submissions. A symlink to a task file is a task when both the link (its
owner) and its target are trusted; a symlink to a folder is never followed (it is rejected),
so no scan ever walks, or moves files out of, a folder outside the queue.
A file that vanishes during the scan (claimed by another job) is simply not listed. The walk
of one folder is :mod:`metaq_py.queue.walk`; each file read is judged by
:func:`~metaq_py.queue.judge.judge`.

The ordered list of waiting tasks is kept up to date incrementally: a folder listed again
contributes only the tasks that appeared in it or left it, each put in (or taken out of) its
place by bisection, so a claim on a queue of 100,000 tasks costs a listing of one folder, not
a sort of the whole queue. :meth:`Index.changes_since` hands the same differences on to a
reader that keeps its own view (the runner's policy jobs).

Over 500 lines by a few: the scan (listing, cache, order) is one mechanism. The values it
hands out (:class:`Task`, :class:`Invalid`, 90 lines) could have a module of their own, but
every command that scans would then load one more module (the counts
``tests/test_architecture.py`` bounds), which a few lines over do not pay for.
"""

from __future__ import annotations

import bisect
import errno
import os
import stat
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from metaq_py.clock import Clock, WallClock
from metaq_py.errors import TaskError, TaskVanished
from metaq_py.queue.disk.fileio import PATH_MAX
from metaq_py.queue.judge import judge
from metaq_py.queue.logbook import LOGBOOK_SUFFIX, read_logbook
from metaq_py.queue.settings.config import LARGEST_FIRST, QueueConfig
from metaq_py.queue.settings.trust import Trust
from metaq_py.queue.walk import (
    CachedFile,
    lstat_key,
    mtime_of,
    remembered,
    stat_key,
    walk_folder,
)
from metaq_py.task_spec import TaskSpec

__all__ = ["Index", "Invalid", "Scan", "Task", "order_key"]


@dataclass(frozen=True, slots=True)
class Task:
    """A task waiting in a task folder.

    ``folder`` is the task folder (``priority``, ``todo``, ...) and ``relpath`` the path below
    it, with ``/`` separators; together they are the task's identity, :attr:`id`. ``rank`` is
    the folder's position in the scan order. ``submit`` is the original submit time and
    ``attempts`` the runs that ended without success, both kept across requeues.
    ``walltime`` is ``MIN_WC_TIME``, or the queue's default when the task gives none.
    ``order`` is the task's key in the queue order (see :func:`order_key`): every scan, and so
    the runner, ``metaq ls`` and ``metaq explain``, lists waiting tasks sorted by it.
    ``id`` is ``<folder>/<relpath>``, the same in every state the task passes through; it is
    worked out once, when the task is made (a runner looks it up for every waiting task at
    every decision).
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
    logbook: bool = field(compare=False, repr=False, default=True)
    """Whether the scan saw a logbook beside it (``False`` spares a claim looking for one)."""
    not_before: float = 0.0
    """Before this time the task waits for its retry delay (0: it may run now)."""
    id: str = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "id", f"{self.folder}/{self.relpath}")

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
    file: str
    problem: TaskError | str
    """The error, or for junk by the thousand only its sentence (see :attr:`error`)."""
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
    def path(self) -> Path:
        """The file (made on demand: a scan of 100,000 junk files makes no ``Path``)."""
        return Path(self.file)

    @property
    def error(self) -> TaskError:
        """What is wrong with the file, made on demand from a bare sentence: a listing of
        100,000 junk files makes none."""
        if isinstance(self.problem, str):
            return TaskError(self.file, None, self.problem)
        return self.problem

    @property
    def reason(self) -> str:
        return str(self.error)


@dataclass(frozen=True, slots=True)
class Scan:
    """One look at the task folders: valid tasks in scheduling order, and invalid files."""

    tasks: tuple[Task, ...]
    invalid: tuple[Invalid, ...]


class _Dir:
    """What the cache remembers of one folder: its key and what was found directly in it."""

    __slots__ = ("invalid", "key", "next", "subdirs", "tasks", "watched")

    def __init__(self, key: tuple, tasks: dict[str, Task], invalid: list[Invalid],
                 subdirs: list[tuple[str, str, str | None]]) -> None:
        self.key: tuple | None = key
        """``None`` once forgotten: never equal to a real key, so the folder is listed again."""
        self.tasks = tasks
        """The valid tasks directly in the folder, by file: a claim takes one out in O(1)."""
        self.invalid = invalid
        self.subdirs = subdirs
        self.watched: list[tuple[str, tuple | None]] = [
            (bad.file, lstat_key(bad.file) if i < WATCH_EACH else _UNSEEN)
            for i, bad in enumerate(invalid)]
        """The invalid files and their stat keys when last looked at: a ``chmod`` in place
        changes no folder's key, so :data:`WATCH_EACH` of them are looked at again in turn
        at each scan (100,000 junk files cost no scan 100,000 ``lstat``)."""
        self.next = 0

    def changed(self) -> bool:
        """Whether an invalid file looked at in this scan changed since the last look."""
        watched = self.watched
        n = len(watched)
        for _ in range(min(n, WATCH_EACH)):
            i = self.next
            self.next = (i + 1) % n
            path, key = watched[i]
            now = lstat_key(path)
            if key is _UNSEEN:
                watched[i] = (path, now)
            elif now != key:
                return True
        return False


# Over 300 lines, because the scan, its cache of each file's verdict and the order it hands
# tasks out in are one state: a rescan must see the cache the last scan left, and split, each
# part would reach into the others' dictionaries.
class Index:
    """Scans the task folders of one queue, remembering parsed headers between scans.

    Two levels of cache make a rescan cheap. A folder whose modification time (and owner,
    mode and trust verdict) did not change has the same entries as before: adding, removing
    or renaming a file changes it, so its listing is reused without reading it again. Every
    ``verify_interval`` seconds a full pass also ``stat``-s each file, to notice files edited
    in place or whose permissions changed; a claim always re-reads and re-checks the file it
    takes, so a stale entry can never make the wrong code run.
    """

    FEED = 64
    """How many of the latest changes :meth:`changes_since` can still hand out."""

    def __init__(self, root: str | os.PathLike[str], config: QueueConfig, *,
                 clock: Clock | None = None, verify_interval: float = 60.0) -> None:
        self.root = Path(root)
        self.config = config
        self.clock: Clock = clock if clock is not None else WallClock()
        """Times the full verification passes (see :meth:`scan`)."""
        self.verify_interval = verify_interval
        self.largest_first = config.order == LARGEST_FIRST
        """``order: largest-first``: tasks of equal rank and priority go by size (see
        :func:`order_key`)."""
        self.trust = Trust(gid=config.gid, uids=config.trusted_uids)
        self._cache: dict[str, CachedFile] = {}
        self._dirs: dict[str, _Dir] = {}
        self._ordered: list[Task] = []
        self._order: tuple[Task, ...] | None = ()
        """``_ordered`` as handed out by scans; ``None`` when it must be made again."""
        self._feed: deque[tuple[int, tuple[Task, ...], tuple[Task, ...]]] = deque(
            maxlen=self.FEED)
        self._last_full = -float("inf")
        self.serial = 0
        """Goes up by one at every scan that found the waiting tasks changed."""
        self.parsed = 0
        """How many files the last scan had to open (0 when nothing changed)."""
        self.listed = 0
        """How many folders the last scan had to list again."""

    def forget(self, path: str | os.PathLike[str]) -> None:
        """Drop what is cached about the folder holding ``path``, so the next scan lists it."""
        cached = self._dirs.get(os.path.dirname(str(path)))
        if cached is not None:
            cached.key = None  # never equal to a real key: listed again, its tasks compared

    def claimed(self, task: Task, before: os.stat_result, after: os.stat_result) -> None:
        """Take ``task`` out at once: this process has just renamed it out of its folder,
        whose stat was ``before`` just before the rename and ``after`` just after it.

        If the folder had not changed since it was last listed, this rename is taken as its
        only change: the folder keeps its listing, minus ``task``, under its new key, and the
        next scan does not list it again (O(log n) in place of a stat per file). A file that
        someone else adds in the microseconds between the two stats is then seen at the
        folder's next change or the next full pass, as one added within the same timestamp
        tick already is. If the folder had changed, nothing is done: the next scan lists it.
        """
        folder = self._dirs.get(os.path.dirname(task.file))
        if folder is None or folder.key is None or folder.key[1:4] != (
                before.st_ino, before.st_mtime_ns, before.st_ctime_ns):
            return
        if folder.tasks.get(task.file) is not task:
            return
        if not self._take_out([task]):
            folder.key = None  # never expected: list it again, and rebuild the order
            return
        del folder.tasks[task.file]
        rank, _ino, _mtime, _ctime, problem = folder.key
        folder.key = (rank, after.st_ino, after.st_mtime_ns, after.st_ctime_ns, problem)
        self._cache.pop(task.file, None)
        self._order = None
        self.serial += 1
        self._feed.append((self.serial, (task,), ()))

    def rejected(self, folder_path: str, files: set[str], before: os.stat_result,
                 after: os.stat_result) -> None:
        """This process just moved the invalid ``files`` out of the folder at ``folder_path``
        (between its stats ``before`` and ``after``): as for :meth:`claimed`, the folder
        keeps its listing, without them, so junk rejected a few at a time costs no relist."""
        folder = self._dirs.get(folder_path)
        if folder is None or folder.key is None or folder.key[1:4] != (
                before.st_ino, before.st_mtime_ns, before.st_ctime_ns):
            return
        folder.invalid = [b for b in folder.invalid if b.file not in files]
        folder.watched = [w for w in folder.watched if w[0] not in files]
        folder.next = 0
        rank, _ino, _mtime, _ctime, problem = folder.key
        folder.key = (rank, after.st_ino, after.st_mtime_ns, after.st_ctime_ns, problem)

    def changes_since(self, serial: int) -> list[tuple[tuple[Task, ...], tuple[Task, ...]]] | None:
        """The changes to the waiting tasks since the scan that left :attr:`serial` at
        ``serial``, oldest first, as (removed, added) pairs of :class:`Task` values (an edited
        task is removed as it was and added as it is). ``None`` when they are no longer all
        remembered (more than :attr:`FEED` changed scans ago): read :meth:`scan` whole then."""
        if serial == self.serial:
            return []
        if serial > self.serial or not self._feed or self._feed[0][0] > serial + 1:
            return None
        return [(removed, added) for n, removed, added in self._feed if n > serial]

    def scan(self, *, full: bool | None = None) -> Scan:
        """Look at every task folder and return what is there now. ``full`` forces (or
        skips) the per-file verification pass; by default it runs every
        ``verify_interval`` seconds."""
        now = self.clock.now()
        if full is None:
            full = now - self._last_full >= self.verify_interval
        if full:
            self._last_full = now
        self.parsed = self.listed = 0
        old_dirs = self._dirs
        dirs: dict[str, _Dir] = {}
        relisted: list[tuple[_Dir | None, _Dir]] = []
        cache: dict[str, CachedFile] = {} if full else self._cache
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
                    st = os.lstat(path)  # a task folder that is a symlink is not walked
                except OSError as e:
                    if e.errno == errno.ENAMETOOLONG:  # never silently: every listing says
                        invalid.append(_too_deep(path, prefix, folder))
                    continue
                if not stat.S_ISDIR(st.st_mode):
                    continue
                ident = (st.st_dev, st.st_ino)
                if ident in seen:
                    continue  # a symlink back to a folder already walked
                seen.add(ident)
                problem = parent_problem or self.trust.problem(st, f"the folder {path}")
                key = (rank, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, problem)
                cached = old_dirs.get(path)
                if full or cached is None or cached.key != key or cached.changed():
                    fresh = self._list(path, prefix, folder, rank, problem, key, cache)
                    relisted.append((cached, fresh))
                    cached = fresh
                dirs[path] = cached
                invalid.extend(cached.invalid)
                stack.extend(cached.subdirs)
        gone = [d for p, d in old_dirs.items() if p not in dirs]
        self._update_order(relisted, gone, dirs)
        self._cache = cache
        self._dirs = dirs
        if self._order is None:
            self._order = tuple(self._ordered)
        return Scan(self._order, tuple(invalid))

    def _update_order(self, relisted: list[tuple[_Dir | None, _Dir]], gone: list[_Dir],
                      dirs: dict[str, _Dir]) -> None:
        """Bring the ordered list up to date with the folders listed again and those gone."""
        removed: list[Task] = [t for d in gone for t in d.tasks.values()]
        added: list[Task] = []
        for old, new in relisted:
            if old is None:
                added.extend(new.tasks.values())
                continue
            # An unchanged task is the very same object in both listings (see _task), and
            # both listings are alive here, so object ids identify tasks safely.
            before = {id(t) for t in old.tasks.values()}
            after = {id(t) for t in new.tasks.values()}
            removed.extend(t for t in old.tasks.values() if id(t) not in after)
            added.extend(t for t in new.tasks.values() if id(t) not in before)
        if not removed and not added:
            return
        if (len(removed) + len(added) > 64 + len(self._ordered) // 16
                or not self._take_out(removed)):
            self._rebuild(dirs)
        else:
            for task in added:
                bisect.insort(self._ordered, task, key=_order_key)
        self._order = None
        self.serial += 1
        self._feed.append((self.serial, tuple(removed), tuple(added)))

    def _take_out(self, removed: list[Task]) -> bool:
        """Remove ``removed`` from the ordered list; ``False`` (with the list in an unknown
        state) if one of them is not where its order says, so the list must be rebuilt."""
        ordered = self._ordered
        for task in removed:
            i = bisect.bisect_left(ordered, task.order, key=_order_key)
            if i == len(ordered) or ordered[i] is not task:
                return False
            del ordered[i]
        return True

    def _rebuild(self, dirs: dict[str, _Dir]) -> None:
        """Sort every task listed again (after many changes at once, or on a cold index)."""
        ordered = [t for d in dirs.values() for t in d.tasks.values()]
        ordered.sort(key=_order_key)
        self._ordered = ordered

    def _list(self, folder_path: str, prefix: str, folder: str, rank: int,
              problem: str | None, key: tuple, cache: dict[str, CachedFile]) -> _Dir:
        self.listed += 1
        tasks: dict[str, Task] = {}
        invalid: list[Invalid] = []
        subdirs: list[tuple[str, str, str | None]] = []
        for rel, path, st, error, has_logbook in walk_folder(folder_path, prefix, self.trust,
                                                          problem, subdirs, self._cache):
            if error is not None:
                mtime = st.st_mtime if isinstance(st, os.stat_result) else mtime_of(path)
                invalid.append(Invalid(folder, rel, path, error, mtime))
                continue
            if isinstance(st, CachedFile):
                entry = st  # unchanged since it was read (see _walk_one)
            elif st is None:
                # A file never seen: read it straight away; the read's fstat stands in for
                # the stat (one system call fewer per file on a cold index).
                first = self._first_look(path, problem)
                if first is None:
                    continue  # vanished between the listing and the read
                if isinstance(first, tuple):
                    invalid.append(Invalid(folder, rel, path, *first))
                    continue
                entry = first
            else:
                known = self._cache.get(path)
                if known is None or known.key != stat_key(st):
                    known = self._parse(path, st)
                    if known is None:
                        continue  # vanished between the listing and the read
                entry = known
            cache[path] = entry
            if isinstance(entry.result, TaskError):
                invalid.append(Invalid(folder, rel, path, entry.result, entry.mtime,
                                       content=True))
                continue
            task = self._task(entry, folder, rel, path, rank, has_logbook)
            entry.task = task
            tasks[path] = task
        return _Dir(key, tasks, invalid, subdirs)

    def _dir_problem(self, path: str, what: str) -> str | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return self.trust.problem(st, what)

    def _first_look(self, path: str, problem: str | None
                    ) -> CachedFile | tuple[TaskError, float] | None:
        """Judge a file never seen, its trust included (under a folder with a trust
        ``problem``, it is refused). ``None`` if it vanished; a :class:`TaskError` not worth
        remembering (the file could not be read, or is not trusted) with the file's mtime;
        else what the cache keeps, stamped with the read's own stat."""
        self.parsed += 1
        verdict = judge(path, root=self.root, config=self.config, trust=self.trust,
                        folder_problem=problem)
        if verdict.error is not None and not verdict.content:
            if isinstance(verdict.error, TaskVanished):
                return None
            opened = verdict.opened
            return verdict.error, opened.st_mtime if opened is not None else mtime_of(path)
        return remembered(verdict)

    def _parse(self, path: str, st: os.stat_result) -> CachedFile | None:
        """Judge a changed file whose trust the walk has checked on ``st``. ``None`` if it
        vanished; a file that cannot be read is remembered under ``st``."""
        self.parsed += 1
        verdict = judge(path, root=self.root, config=self.config)
        if verdict.opened is None:
            error = verdict.error
            assert error is not None
            return None if isinstance(error, TaskVanished) else CachedFile(st, error)
        return remembered(verdict)

    def _task(self, entry: CachedFile, folder: str, rel: str, path: str, rank: int,
              has_logbook: bool) -> Task:
        spec = entry.result
        assert isinstance(spec, TaskSpec)
        known = entry.task if isinstance(entry.task, Task) else None
        if not has_logbook:
            if known is not None and entry.lkey is None and known.rank == rank:
                return known
            lkey = None
            submit, attempts, not_before = entry.mtime, 0, 0.0
        else:
            submit, attempts, not_before = entry.mtime, 0, 0.0
            logbook_file = os.path.join(os.path.dirname(path),
                                       f".{os.path.basename(path)}{LOGBOOK_SUFFIX}")
            try:
                lst = os.stat(logbook_file)
                lkey = (lst.st_ino, lst.st_size, lst.st_mtime_ns)
            except OSError:
                lkey = None
            if known is not None and entry.lkey == lkey and known.rank == rank:
                return known
            if lkey is not None:
                # The inode of the file whose spec was read, not a fresh lstat: the file may
                # have moved since (another writer), and its logbook must match that read.
                rec = read_logbook(path, entry.key[0])
                if rec is not None:
                    submit, attempts, not_before = rec.submit, rec.attempts, rec.not_before
        entry.lkey = lkey
        wc = spec.min_wc_time if spec.min_wc_time is not None else self.config.defaults.min_wc_time
        return Task(folder=folder, relpath=rel, file=path, spec=spec, rank=rank,
                    submit=submit, attempts=attempts, walltime=wc,
                    order=order_key(rank, spec, submit, f"{folder}/{rel}",
                                    largest_first=self.largest_first),
                    logbook=lkey is not None, not_before=not_before)


def _too_deep(path: str, prefix: str, folder: str) -> Invalid:
    """A folder past ``PATH_MAX``: nothing below it can be named (run or moved)."""
    why = (f"the path is longer than the {PATH_MAX} bytes a path may have, so no task below "
           f"it can run; move its folders higher up")
    return Invalid(folder, prefix.rstrip("/"), path, TaskError(path, None, why))


WATCH_EACH = 256
"""Invalid files of one folder looked at again by each scan (see ``_Dir.watched``)."""

_UNSEEN: tuple = ("not looked at",)  # the key of an invalid file not looked at since listed


def order_key(rank: int, spec: TaskSpec, submit: float, task_id: str, *,
              largest_first: bool) -> tuple[int, int, int, float, str]:
    """The queue-order key of a waiting task: folder ``rank``, then higher ``PRIORITY``, then,
    with ``largest_first`` (``order: largest-first``), more nodes, then the earlier original
    ``submit`` time; the task's id last, so that no two tasks tie and a task can be found in
    the sorted list by bisection.

    The size is ``min_nodes``, the count EASY waits for when the task is at the head of the
    queue. With the default order the size term is 0 for every task, which leaves the order of
    (rank, priority, submit) untouched."""
    size = -spec.min_nodes if largest_first else 0
    return (rank, -spec.priority, size, submit, task_id)


def _order_key(task: Task) -> tuple:
    return task.order
