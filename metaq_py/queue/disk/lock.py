"""The lock two processes share for a multi-file update of a folder everyone may write
(``metaq alloc``'s pass, the tally's base): an exclusive ``flock`` on a lock file.

The lock file is opened as every file of the queue is written: never through a link, never
blocking on a FIFO, never truncated. Whatever a careless or hostile hand put at its name (a
link to someone's file, a FIFO, a folder) is set aside and a lock file made in its place.
``filelock`` opens its file with ``O_TRUNC`` through any link, which empties the file a
planted link points to.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import time
from pathlib import Path
from types import TracebackType

from metaq_py.queue.disk.folders import set_aside

__all__ = ["FolderLock", "LockTimeout"]

_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_POLL = 0.05
"""Seconds between two tries for a lock another process holds."""


class LockTimeout(OSError):
    """The lock stayed held by another process for the whole timeout."""


class FolderLock:
    """An exclusive lock on the file ``path``, waited for at most ``timeout`` seconds
    (:class:`LockTimeout`). A context manager; not reentrant."""

    def __init__(self, path: str | os.PathLike[str], *, timeout: float) -> None:
        self.path = Path(path)
        self.timeout = timeout
        self._fd: int | None = None

    def __enter__(self) -> FolderLock:
        deadline = time.monotonic() + self.timeout
        fd = self._open()
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise LockTimeout(f"{self.path} stayed locked for {self.timeout:g} s") \
                        from None
                time.sleep(_POLL)
                continue
            self._fd = fd
            return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None

    def _open(self) -> int:
        for _ in range(3):  # a set-aside races at most a planter who plants again and again
            try:
                fd = os.open(self.path, _FLAGS, 0o664)
            except OSError as e:
                if e.errno in (errno.ENOENT, errno.EACCES):
                    raise
                set_aside(self.path)  # a link (ELOOP), a FIFO without reader, a folder
                continue
            if stat.S_ISREG(os.fstat(fd).st_mode):
                return fd
            os.close(fd)
            set_aside(self.path)
        raise OSError(f"{self.path} is taken again and again by something not a lock file")
