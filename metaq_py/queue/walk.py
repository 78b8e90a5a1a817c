"""The walk of one task folder, and what the index remembers of each file in it.

:func:`walk_folder` lists one folder and says, for each file in it, whether it can be a task
at all (a regular file the queue trusts) and whether the index must read it again: a file
whose stat still matches what the index remembers of it (:class:`CachedFile`) is not opened.
It never parses a header; the index judges the files it hands back
(:func:`~metaq_py.queue.judge.judge`).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable

from metaq_py.directives import not_executable
from metaq_py.errors import TaskError
from metaq_py.queue.disk.fileio import COMPANION_ROOM, MAX_TASK_NAME, PATH_MAX, name_problem
from metaq_py.queue.judge import Verdict
from metaq_py.queue.logbook import LOGBOOK_SUFFIX
from metaq_py.queue.settings.trust import Trust
from metaq_py.task_spec import TaskSpec

__all__ = ["BIG_FOLDER", "CachedFile", "lstat_key", "mtime_of", "remembered", "stat_key",
           "walk_folder"]


class CachedFile:
    """What the cache remembers of one file; ``mtime`` is that of the stat ``key`` came from.
    ``task`` is the task last made from it (a :class:`~metaq_py.queue.index.Task`, which the
    walk never looks at), and ``lkey`` the stat of its logbook then (see ``Index._task``):
    while neither changes, the task is the same object."""

    __slots__ = ("key", "lkey", "mtime", "result", "task")

    def __init__(self, st: os.stat_result, result: TaskSpec | TaskError) -> None:
        self.key = stat_key(st)
        self.mtime = st.st_mtime
        self.result = result
        self.task: object | None = None
        self.lkey: tuple | None = None


def remembered(verdict: Verdict) -> CachedFile:
    """What the cache keeps of a file that was read: its spec or the error in its content."""
    assert verdict.opened is not None
    if verdict.error is not None:
        return CachedFile(verdict.opened, verdict.error)
    assert verdict.spec is not None
    return CachedFile(verdict.opened, verdict.spec)


def stat_key(st: os.stat_result) -> tuple:
    """What must not change for a file's remembered verdict to hold: inode, size, mtime, and
    the mode and owners its trust depends on (``chmod`` does not change the mtime)."""
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_mode, st.st_uid, st.st_gid)


def lstat_key(path: str | os.PathLike[str]) -> tuple | None:
    """:func:`stat_key` of ``path`` itself, or ``None`` if it is gone."""
    try:
        return stat_key(os.lstat(path))
    except OSError:
        return None


def mtime_of(path: str) -> float:
    """When ``path`` itself last changed; 0 if it is gone."""
    try:
        return os.lstat(path).st_mtime
    except OSError:
        return 0.0


BIG_FOLDER = 4096
"""Entries past which a folder's never-seen files are first told apart by their ``lstat``
(see :func:`walk_folder`): below it, each is opened at once, which spares that call."""


def walk_folder(folder: str, prefix: str, trust: Trust, problem: str | None,
                subdirs: list[tuple[str, str, str | None]], known: dict[str, CachedFile]
                ) -> Iterable[tuple[str, str, os.stat_result | CachedFile | None,
                                    TaskError | str | None, bool]]:
    """Yield (relpath, path, stat, error, has_logbook) for every non-hidden file directly in
    ``folder``; ``error`` is set, and ``stat`` is ``None`` (but see below), for a file that
    cannot be a task: a :class:`TaskError`, or for junk by the thousand only the sentence
    (its error is made when someone asks, see :class:`~metaq_py.queue.index.Invalid`).
    A plain file not in ``known`` comes with neither (the caller reads it at once), except in
    a folder of more than :data:`BIG_FOLDER` entries, where one that is not executable comes
    with its stat and its error: junk by the thousand is never opened. A plain
    file whose stat matches its ``known`` entry comes with that entry in place of the stat
    (same mode and owners: the same trust verdict, and nothing more to check).
    Sub-folders are appended to ``subdirs`` as (path, prefix, inherited problem)."""
    # Listed through a descriptor, so that each stat resolves one name in this folder rather
    # than the whole path from the root (a fifth cheaper on a queue of 100,000 tasks).
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as e:
        yield (prefix.rstrip("/") or ".", folder, None,
               TaskError(folder, None, f"the folder cannot be read ({e.strerror})"), False)
        return
    try:
        yield from _walk_fd(fd, folder, prefix, trust, problem, subdirs, known)
    finally:
        os.close(fd)


def _walk_fd(fd: int, folder: str, prefix: str, trust: Trust, problem: str | None,
             subdirs: list[tuple[str, str, str | None]], known: dict[str, CachedFile]
             ) -> Iterable[tuple[str, str, os.stat_result | CachedFile | None,
                                 TaskError | str | None, bool]]:
    """:func:`walk_folder` over the open folder ``fd`` (whose path is ``folder``)."""
    try:
        with os.scandir(fd) as it:
            entries = list(it)
    except OSError as err:
        yield (prefix.rstrip("/") or ".", folder, None,
               TaskError(folder, None, f"the folder cannot be read ({err.strerror})"), False)
        return
    base = os.path.join(folder, "")
    big = len(entries) > BIG_FOLDER
    # Names up to this many characters fit NAME_MAX and PATH_MAX in any encoding (UTF-8
    # takes at most 4 bytes a character), so only longer ones are measured.
    short = (min(MAX_TASK_NAME, PATH_MAX - COMPANION_ROOM - 64 - 4 * len(base)) // 4
             if base.startswith("/") else -1)
    # Which tasks here have a logbook, known from the listing without another stat.
    logbooks = {e.name[1:-len(LOGBOOK_SUFFIX)] for e in entries
               if e.name[0] == "." and e.name.endswith(LOGBOOK_SUFFIX)}
    for e in entries:
        name = e.name
        if name[0] == ".":
            continue
        rel = prefix + name
        path = base + name  # e.path is the bare name when listing a descriptor
        try:
            is_dir = e.is_dir(follow_symlinks=False)
        except OSError:
            is_dir = False
        if is_dir:
            subdirs.append((path, rel + "/", problem))
            continue
        if len(name) > short:
            too_long = name_problem(name, path=path)
            if too_long is not None:
                yield rel, path, None, TaskError(path, None, too_long), False
                continue
        link = e.is_symlink()
        if link:
            # Trust is judged on the link as found (its owner, who chose where it points),
            # and on what it points to; a link to a folder is never followed.
            why = _link_problem(e, path, trust, problem)
            if why is not None:
                yield rel, path, None, TaskError(path, None, why), False
                continue
        if path not in known and not link:
            if big:
                # Junk by the thousand: a plain file that is not executable is told by its
                # lstat alone, never opened (a task is opened once, as below).
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue  # vanished: claimed or moved by someone else
                if stat.S_ISREG(st.st_mode) and not st.st_mode & 0o111:
                    yield rel, path, st, not_executable(path), False
                    continue
            yield rel, path, None, None, name in logbooks
            continue
        try:
            st = e.stat()
        except OSError as err:
            if err.errno == errno.ENOENT and not e.is_symlink():
                continue  # vanished: claimed or moved by someone else
            yield rel, path, None, TaskError(path, None, _stat_problem(err)), False
            continue
        if problem is None and not e.is_symlink():
            entry = known.get(path)
            if entry is not None and entry.key == stat_key(st):
                yield rel, path, entry, None, name in logbooks  # the common case, made short
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
        yield rel, path, st, None, name in logbooks


def _link_problem(e: os.DirEntry, path: str, trust: Trust, problem: str | None) -> str | None:
    """Why the symlink ``e`` in a task folder cannot be a task, judged before its target."""
    try:
        lst = e.stat(follow_symlinks=False)
    except OSError:
        return None  # gone: the stat below says so
    why = problem or trust.problem(lst, "the symlink")
    if why is not None:
        return why
    try:
        if stat.S_ISDIR(os.stat(path).st_mode):
            return ("this is a symlink to a folder, which the queue never follows; submit "
                    "the tasks themselves, or link each script")
    except OSError:
        return None
    return None


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

