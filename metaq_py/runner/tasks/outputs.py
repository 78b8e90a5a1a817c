"""Whether a claimed task's outputs exist already (``#METAQ CREATES``): then it is skipped.

Each ``CREATES`` line names one output: a path, absolute or relative to the queue root, whose
file name may hold wildcards (``*``, ``?``, ``[...]``, as :mod:`fnmatch`) and, in an array,
``{index}``. An output *exists* when the path is a regular file that is not empty; a glob
when it matches at least one such file. Every output must exist for the task to be skipped.

The look costs a few system calls per output and never opens an output: a plain path is one
``lstat``; a glob is one ``stat`` of its folder, a binary search in the folder's sorted
listing (kept while the folder's modification time and inode stay the same, so a folder of
10^5 files is listed once for a whole campaign) for the names that begin as the pattern
does, and ``lstat`` of the matches until one is a non-empty file. A listing missed by a
coarse timestamp only makes a task run rather than be skipped.

What cannot be looked at is said in one sentence naming the line, and the task then runs
(its outputs are not known to exist): a folder the runner may not read, a glob matching more
than :data:`MAX_MATCHES` names, an output that is a link (a member could plant one to make a
task look done) or not a regular file (a FIFO, a folder).
"""

from __future__ import annotations

import bisect
import fnmatch
import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from metaq_py.directive_keys import INDEX
from metaq_py.task_spec import TaskSpec

__all__ = ["MAX_MATCHES", "Look", "Outputs"]

MAX_MATCHES = 10_000
"""The most names one ``CREATES`` glob may match; more is a mistake in the glob."""

MAX_LISTING = 2_000_000
"""The largest folder a glob is matched in (entries); a larger one is said, never listed."""

_WILD = re.compile(r"[*?\[]")


@dataclass(frozen=True, slots=True)
class Look:
    """What a look at a task's outputs found: ``done`` when every output exists; else
    ``missing`` names the first output that does not, or ``problem`` says (one sentence,
    naming its line) why the outputs could not be looked at."""

    done: bool
    missing: str | None = None
    problem: str | None = None


class Outputs:
    """Looks at outputs, with each globbed folder's sorted listing kept while it is
    unchanged. ``root`` is what relative paths are relative to (the queue root)."""

    def __init__(self, root: Path) -> None:
        self.root = str(root)
        self._listings: dict[str, tuple[tuple[int, int], list[str]]] = {}

    def look(self, spec: TaskSpec, env: Mapping[str, str] | None = None) -> Look:
        """Whether every output ``spec`` names exists (``env`` gives an array index its
        ``METAQ_ARRAY_INDEX``, which ``{index}`` stands for)."""
        index = (env or {}).get("METAQ_ARRAY_INDEX")
        lines = [n for k, n in spec.lines if k == "CREATES"]
        for i, pattern in enumerate(spec.creates):
            line = lines[i] if i < len(lines) else None
            where = f"line {line}: CREATES {pattern}" if line else f"CREATES {pattern}"
            if INDEX in pattern:
                if index is None:
                    return Look(False, problem=f"{where} uses {INDEX}, but the task is no "
                                               f"array index")
                pattern = pattern.replace(INDEX, index)
            path = pattern if pattern.startswith("/") else os.path.join(self.root, pattern)
            try:
                found = self._exists(path)
            except _Unreadable as e:
                return Look(False, problem=f"{where}: {e}")
            if not found:
                return Look(False, missing=path)
        return Look(True)

    def _exists(self, path: str) -> bool:
        folder, name = os.path.split(path)
        if not _WILD.search(name):
            return _is_output(path)
        names = self._listing(folder)
        head = _WILD.split(name, maxsplit=1)[0]
        match = _matcher(name)
        matched = 0
        for i in range(bisect.bisect_left(names, head), len(names)):
            n = names[i]
            if not n.startswith(head):
                break
            if not match(n):
                continue
            matched += 1
            if matched > MAX_MATCHES:
                raise _Unreadable(f"the glob matches more than {MAX_MATCHES} files; name "
                                  f"the outputs more closely")
            if _is_output(os.path.join(folder, n), quiet=True):
                return True
        return False

    def _listing(self, folder: str) -> list[str]:
        try:
            st = os.stat(folder)
        except FileNotFoundError:
            return []
        except PermissionError:
            raise _Unreadable("the runner may not read its folder") from None
        except OSError as e:
            raise _Unreadable(f"its folder cannot be looked at ({e.strerror})") from None
        if not stat.S_ISDIR(st.st_mode):
            return []
        key = (st.st_ino, st.st_mtime_ns)
        kept = self._listings.get(folder)
        if kept is not None and kept[0] == key:
            return kept[1]
        if st.st_nlink > MAX_LISTING:  # a hint only: a file system may count links so
            raise _Unreadable(f"its folder holds more than {MAX_LISTING} entries")
        try:
            with os.scandir(folder) as it:
                names = []
                for entry in it:
                    names.append(entry.name)
                    if len(names) > MAX_LISTING:
                        raise _Unreadable(f"its folder holds more than {MAX_LISTING} entries")
        except PermissionError:
            raise _Unreadable("the runner may not read its folder") from None
        except OSError as e:
            raise _Unreadable(f"its folder cannot be listed ({e.strerror})") from None
        names.sort()
        self._listings[folder] = (key, names)
        return names


def _matcher(pattern: str) -> Callable[[str], bool]:
    """A test of a name against ``pattern``: the pieces between ``*`` found in order for a
    pattern of ``*`` alone (no compiling: each task's patterns differ, and compiling one
    costs more than the whole look), else :func:`fnmatch.fnmatchcase`."""
    if "?" in pattern or "[" in pattern:
        return lambda n: fnmatch.fnmatchcase(n, pattern)
    if "*" not in pattern:
        return lambda n: n == pattern
    first, *middle, last = pattern.split("*")

    def match(n: str) -> bool:
        if not (n.startswith(first) and n.endswith(last)
                and len(n) >= len(first) + len(last)):
            return False
        at, end = len(first), len(n) - len(last)
        for piece in middle:
            at = n.find(piece, at, end)
            if at < 0:
                return False
            at += len(piece)
        return True

    return match


class _Unreadable(Exception):
    """Outputs that cannot be looked at, and why."""


def _is_output(path: str, *, quiet: bool = False) -> bool:
    """Whether ``path`` is a non-empty regular file, never followed through a link nor
    opened; a link or another kind of file is said (``_Unreadable``) unless ``quiet``."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    except PermissionError:
        raise _Unreadable("the runner may not look at it") from None
    except OSError as e:
        if quiet:
            return False
        raise _Unreadable(f"it cannot be looked at ({e.strerror})") from None
    if stat.S_ISREG(st.st_mode):
        return st.st_size > 0
    if quiet:
        return False
    what = "a link" if stat.S_ISLNK(st.st_mode) else \
        "a FIFO" if stat.S_ISFIFO(st.st_mode) else \
        "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file"
    raise _Unreadable(f"it is {what}, which never counts as an output")
