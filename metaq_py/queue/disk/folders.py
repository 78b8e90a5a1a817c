"""The files beside a task in the queue's folders, and how those folders are listed.

A task file never travels alone. Beside ``<relpath>`` may sit:

- ``<relpath>.reason``: why a failed, rejected or cancelled task is where it is (visible, so a
  person browsing ``failed/`` reads it next to the task);
- ``.<name>.record``: its logbook (:mod:`metaq_py.queue.logbook`);
- ``.<name>.lease``: while claimed, its lease (:mod:`metaq_py.queue.lease`);
- ``.<name>.cancel``: while claimed, a person's request to cancel it.

A folder below a task folder holding an ``.array`` is an array (:data:`ARRAY_FILE`,
:mod:`metaq_py.queue.campaign.arrays`), its index ``13`` the task ``todo/prop.sh/13``, which
people write ``todo/prop.sh[13]`` (:class:`PeopleIds`, for every line a person reads: the
commands', the runner's, ``status``'s).

The task folders themselves are walked by the index (:mod:`metaq_py.queue.walk`); the helpers
here list the other folders (``hold/``, ``working/``, the done states), where every file
that is neither hidden nor a ``.reason`` beside its task is a task (in ``working/``, which
never holds a ``.reason``, every file that is not hidden).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

from metaq_py.queue.disk.fileio import Refused, read_regular, umask

__all__ = [
    "ARRAY_FILE",
    "CANCEL_SUFFIX",
    "ENDED_ARRAYS",
    "PLANTED",
    "REASON_LIMIT",
    "REASON_SUFFIX",
    "SCRIPT_FILE",
    "MadeFolders",
    "PeopleIds",
    "array_home",
    "companion",
    "free_name",
    "is_array",
    "make_folders",
    "own_folder",
    "read_reason",
    "set_aside",
    "shared_mode",
    "subfolders",
    "task_files",
]

PLANTED = ".planted-"
"""What a thing found where the queue keeps one of its own is renamed with, aside in its own
folder: ``<name>.planted-<6 hex digits>`` (see :func:`set_aside`)."""

REASON_LIMIT = 64 * 1024
"""The largest ``.reason`` or cancel request (bytes) that is read."""

REASON_SUFFIX = ".reason"
CANCEL_SUFFIX = ".cancel"

ARRAY_FILE = ".array"
"""The file that makes a folder below a task folder an array (what the array is, as JSON)."""

SCRIPT_FILE = ".script"
"""An array's script, beside its :data:`ARRAY_FILE`: read once for all its indices."""


ENDED_ARRAYS = "finished"
"""Where an array's own files (:data:`ARRAY_FILE`, :data:`SCRIPT_FILE`) go once its last
index has ended: ``finished/<folder>/<array>/``, beside its finished indices (the name of
the state ``finished``, :data:`~metaq_py.queue.layout.FINISHED`)."""


def array_home(root: Path | str, ident: str) -> str | None:
    """Where the array ``ident`` (``todo/prop.sh``) keeps its ``.array`` and ``.script``,
    relative to the queue at ``root``: ``ident`` itself while an index of it waits, is held
    or runs, ``finished/<ident>`` once its last index has ended; ``None`` if ``ident`` is no
    array (an ``.array`` is never followed if it is a link)."""
    for home in (ident, f"{ENDED_ARRAYS}/{ident}"):
        if os.path.lexists(os.path.join(root, home, ARRAY_FILE)):
            return home
    return None


def is_array(root: Path, ident: str) -> bool:
    """Whether ``ident`` (``todo/prop.sh``) names an array of the queue at ``root``, waiting
    or ended (see :func:`array_home`)."""
    return array_home(root, ident) is not None


class PeopleIds:
    """Task identities as people write them and every command takes them: an index of an
    array as ``todo/prop.sh[13]``, not the ``todo/prop.sh/13`` of its file; any other task as
    its identity. Called with an identity, gives its people's form. An array found is
    remembered (a long-lived runner asks about the same arrays again); a folder that is not
    one is asked again, as an array may be submitted there later."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._arrays: set[str] = set()

    def array_of(self, ident: str) -> str:
        """The array ``ident`` is an index of, or ``""``."""
        parent, _, last = ident.rpartition("/")
        if not last.isdigit() or "/" not in parent:
            return ""
        if parent not in self._arrays:
            if not is_array(self.root, parent):
                return ""
            self._arrays.add(parent)
        return parent

    def __call__(self, ident: str) -> str:
        array = self.array_of(ident)
        return f"{array}[{ident.rpartition('/')[2]}]" if array else ident


def companion(task: Path, suffix: str) -> Path:
    """The hidden file ``.<name><suffix>`` beside ``task``."""
    return task.with_name(f".{task.name}{suffix}")


def read_reason(task: Path) -> str | None:
    """The ``.reason`` written beside ``task``, or ``None`` if there is none (or it is
    unreadable)."""
    try:
        data, _ = read_regular(str(task) + REASON_SUFFIX, limit=REASON_LIMIT)
        return data.decode("utf-8").strip()
    except (Refused, UnicodeDecodeError):
        return None


def free_name(path: Path, *, reason: bool = False) -> Path:
    """``path`` if nothing is there, else ``path.1``, ``path.2``, ...: a move never overwrites
    another task (rename would silently replace it). With ``reason``, ``<path>.reason`` must be
    free too (a task may be called ``foo.sh.reason``)."""
    def taken(p: str) -> bool:
        return os.path.lexists(p) or (reason and os.path.lexists(p + REASON_SUFFIX))

    if not taken(str(path)):
        return path
    n = 1
    while taken(f"{path}.{n}"):
        n += 1
    return Path(f"{path}.{n}")


class MadeFolders:
    """:func:`make_folders` for one process that makes the same few folders again and again
    (a runner's claims and moves): a folder made or checked before is only ``stat``-ed, and
    taken as it is when it is still the very folder (device and inode) it was then. A path
    that now leads elsewhere (a folder on the way replaced by a link to another place) is
    made again by :func:`make_folders`, so a move still never lands outside the queue; one
    that leads to the same folder by another way lands where it would have anyway."""

    LIMIT = 4096
    """At most this many folders are remembered (a runner uses a handful)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._seen: dict[str, tuple[int, int]] = {}

    def make(self, folder: Path) -> None:
        """Make ``folder`` as :func:`make_folders` does."""
        key = os.fspath(folder)
        seen = self._seen.get(key)
        if seen is not None:
            try:
                st = os.stat(key)
            except OSError:
                pass
            else:
                if (st.st_dev, st.st_ino) == seen and stat.S_ISDIR(st.st_mode):
                    return
        make_folders(self.root, folder)
        st = os.lstat(key)  # make_folders left a real folder here
        if len(self._seen) >= self.LIMIT:
            self._seen.clear()
        self._seen[key] = (st.st_dev, st.st_ino)

    def identity(self, folder: Path) -> tuple[int, int] | None:
        """The device and inode ``folder`` had when :meth:`make` last made or checked it."""
        return self._seen.get(os.fspath(folder))


def relative_parts(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> list[str]:
    """``os.path.relpath(path, root)`` split into its names. A path spelled under ``root``, as
    the queue's own paths are, is cut by comparing the strings; ``relpath`` itself (which
    makes both paths absolute and normal at each call) only for any other: it ran three times
    for every task a runner settles."""
    p, r = os.fspath(path), os.fspath(root)
    n = len(r)
    if p.startswith(r) and p[n:n + 1] == os.sep:
        parts = p[n + 1:].split(os.sep)
        if "" not in parts and "." not in parts and ".." not in parts:
            return parts
    return os.path.relpath(p, r).split(os.sep)


def make_folders(root: Path, folder: Path) -> None:
    """Make ``folder`` and every folder between the queue ``root`` and it, as real folders,
    each of its parent's mode (:func:`shared_mode`).

    Nothing on the way is followed: a symlink, file or FIFO found where a folder belongs (put
    there by a careless or hostile hand) is renamed aside, within its own folder, to
    ``<name>.planted-<hex>`` (where ``metaq doctor`` lists it), and a real folder made in its
    place. So a move never lands outside the queue."""
    parts = relative_parts(folder, root)
    if parts == ["."]:
        return
    if parts[0] == "..":
        raise ValueError(f"{folder} is not inside the queue {root}")
    here = str(root)
    for part in parts:
        above, here = here, os.path.join(here, part)
        mode = shared_mode(above)
        try:
            _mkdir(here, mode)
            continue
        except FileExistsError:
            pass
        try:
            if stat.S_ISDIR(os.lstat(here).st_mode):
                continue
        except FileNotFoundError:
            pass
        else:
            set_aside(here)
        # Not makedirs: the folder above was there a moment ago, and if it is gone now (the
        # queue removed), nothing of the queue is made again.
        with contextlib.suppress(FileExistsError):
            _mkdir(here, mode)
        if not stat.S_ISDIR(os.lstat(here).st_mode):
            raise OSError(f"{here} is not a folder")


def shared_mode(parent: str | os.PathLike[str]) -> int:
    """The fixed mode of a folder the queue makes in ``parent``, whatever the umask of
    whoever makes it first: its parent's own (``2770`` in a queue of ``metaq init --group``,
    ``755`` in a private one, ``2750`` in a runner's own folder), without the sticky bit."""
    return stat.S_IMODE(os.stat(parent).st_mode) & ~stat.S_ISVTX


def _mkdir(path: str, mode: int) -> None:
    os.mkdir(path, mode)
    if mode & umask() or mode & 0o7000:  # mkdir takes the umask and leaves out setgid
        os.chmod(path, mode)


def own_folder(root: Path, folder: Path) -> Path:
    """Make ``folder`` (below the queue ``root``) this process's own: a real folder of its
    uid that no one else may write (the mode of :func:`shared_mode` without write for group
    and others). What stands there already and is not such a folder (a link, a file, a
    folder someone else made, or one others may write, where they could have planted
    anything) is set aside first: a folder a runner did not make is not its own."""
    make_folders(root, folder.parent)
    mode = (shared_mode(folder.parent) & ~0o022) | 0o700
    for _ in range(3):  # a set-aside races at most a planter who plants again and again
        try:
            _mkdir(str(folder), mode)
            return folder
        except FileExistsError:
            pass
        with contextlib.suppress(FileNotFoundError):
            st = os.lstat(folder)
            if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and \
                    not st.st_mode & 0o022:
                return folder
            set_aside(folder)
    raise OSError(f"{folder} is taken again and again by something not the runner's own")


def set_aside(path: str | os.PathLike[str]) -> str:
    """Rename what is at ``path`` (a planted folder, link or FIFO where the queue keeps a file
    or folder of its own) to ``<path>.planted-<hex>`` beside it, where ``metaq doctor`` lists
    it; nothing in it is opened, followed or deleted. Returns the new name."""
    aside = f"{os.fspath(path)}{PLANTED}{secrets.token_hex(3)}"
    os.rename(path, aside)
    return aside


def subfolders(path: Path) -> list[str]:
    """The names of the folders directly in ``path`` that are not hidden, sorted; none if
    ``path`` is missing. A link to a folder is not one: the queue never follows a link
    someone planted (``working/<machine>/<job> -> ../../finished`` would make every finished
    task look claimed, and lost)."""
    try:
        with os.scandir(path) as it:
            return sorted(e.name for e in it
                          if e.name[0] != "." and e.is_dir(follow_symlinks=False))
    except (FileNotFoundError, NotADirectoryError):
        return []


def task_files(top: Path, *, reasons: bool = True) -> Iterator[tuple[str, Path]]:
    """(relpath, path) of every task file below ``top``: hidden names are skipped, and so,
    where the folder may hold ``reasons``, are ``.reason`` files that sit beside their task
    (``working/`` holds none, so there ``x.reason`` beside ``x`` is a task of its own)."""
    stack = [(str(top), "")]
    while stack:
        folder, prefix = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError):
            continue
        names = {e.name for e in entries}
        for e in entries:
            if e.name[0] == ".":
                continue
            if reasons and e.name.endswith(REASON_SUFFIX) and \
                    e.name[: -len(REASON_SUFFIX)] in names:
                continue
            if e.is_dir(follow_symlinks=False):
                stack.append((e.path, prefix + e.name + "/"))
            else:
                yield prefix + e.name, Path(e.path)
