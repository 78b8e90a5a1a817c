"""The errors metaq reports to people.

Each one turns into exactly one sentence that says what is wrong and where, so that the CLI
can print ``str(error)`` and nothing else. All of them derive from :class:`MetaqError`, which
is what the command line catches.
"""

from __future__ import annotations

__all__ = ["ConfigError", "MetaqError", "QueueError", "TaskError", "TaskVanished"]


class MetaqError(Exception):
    """Something a person must fix; ``str()`` is one actionable sentence."""


class TaskError(MetaqError):
    """A task script that cannot be accepted.

    ``path`` is the script as the user named it (or as found in the queue), ``line`` the
    1-based line the problem is on (``None`` when it concerns the whole file: empty, binary,
    not executable, unsafe permissions, vanished) and ``message`` the problem itself, written
    so that it reads well after ``"<path>, line <n>: "``.
    """

    def __init__(self, path: str, line: int | None, message: str) -> None:
        super().__init__(path, line, message)
        self.path = str(path)
        self.line = line
        self.message = message

    def __str__(self) -> str:
        where = f"{self.path}, line {self.line}" if self.line is not None else self.path
        return f"{where}: {_sentence(self.message)}"


class TaskVanished(TaskError):
    """The task file went away while it was being read: another job claimed it, or its owner
    moved it. Scans skip such a file; a person submitting it is told."""


class ConfigError(MetaqError):
    """A bad setting in a queue's ``metaq.yaml``, with the key and line it is on."""

    def __init__(self, path: str, line: int | None, key: str | None, message: str) -> None:
        super().__init__(path, line, key, message)
        self.path = str(path)
        self.line = line
        self.key = key
        self.message = message

    def __str__(self) -> str:
        where = f"{self.path}, line {self.line}" if self.line is not None else self.path
        what = f"setting {self.key!r} " if self.key else ""
        return f"{where}: {what}{_sentence(self.message)}"


class QueueError(MetaqError):
    """A queue that cannot be used as asked: missing, on two file systems, unknown task."""

    def __str__(self) -> str:
        return _sentence(str(self.args[0]) if self.args else "queue error")


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "?", "!")) else text + "."
