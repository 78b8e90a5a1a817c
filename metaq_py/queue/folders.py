"""The files beside a task in the queue's folders, and how those folders are listed.

A task file never travels alone. Beside ``<relpath>`` may sit:

- ``<relpath>.reason``: why a failed, rejected or cancelled task is where it is (visible, so a
  person browsing ``failed/`` reads it next to the task);
- ``.<name>.record``: its logbook (:mod:`metaq_py.queue.logbook`);
- ``.<name>.lease``: while claimed, its lease (:mod:`metaq_py.queue.lease`);
- ``.<name>.cancel``: while claimed, a person's request to cancel it.

The task folders themselves are walked by the index (:mod:`metaq_py.queue.walk`); the helpers
here list the other folders (``hold/``, ``working/``, the done states), where every file
that is neither hidden nor a ``.reason`` beside its task is a task.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

__all__ = ["CANCEL_SUFFIX", "REASON_SUFFIX", "companion", "free_name", "read_reason",
           "subfolders", "task_files"]

REASON_SUFFIX = ".reason"
CANCEL_SUFFIX = ".cancel"


def companion(task: Path, suffix: str) -> Path:
    """The hidden file ``.<name><suffix>`` beside ``task``."""
    return task.with_name(f".{task.name}{suffix}")


def read_reason(task: Path) -> str | None:
    """The ``.reason`` written beside ``task``, or ``None`` if there is none (or it is
    unreadable)."""
    try:
        return Path(str(task) + REASON_SUFFIX).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None


def free_name(path: Path) -> Path:
    """``path`` if nothing is there, else ``path.1``, ``path.2``, ...: a move never overwrites
    another task (rename would silently replace it)."""
    if not os.path.lexists(path):
        return path
    n = 1
    while os.path.lexists(f"{path}.{n}"):
        n += 1
    return Path(f"{path}.{n}")


def subfolders(path: Path) -> list[str]:
    """The names of the folders directly in ``path`` that are not hidden, sorted; none if
    ``path`` is missing."""
    try:
        with os.scandir(path) as it:
            return sorted(e.name for e in it if e.name[0] != "." and e.is_dir())
    except (FileNotFoundError, NotADirectoryError):
        return []


def task_files(top: Path) -> Iterator[tuple[str, Path]]:
    """(relpath, path) of every task file below ``top``: hidden names and ``.reason`` files
    that sit beside their task are skipped."""
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
            if e.name.endswith(REASON_SUFFIX) and e.name[: -len(REASON_SUFFIX)] in names:
                continue
            if e.is_dir(follow_symlinks=False):
                stack.append((e.path, prefix + e.name + "/"))
            else:
                yield prefix + e.name, Path(e.path)
