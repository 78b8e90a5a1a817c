"""Copying a task's output into two files at once, without a shell or a ``tee`` process.

When a task has a ``#METAQ LOG`` path, its stdout and stderr go into one pipe, and a thread
copies what arrives into the task's own log and into the ``LOG`` file. A write that fails
(a full disk, a vanished directory) is recorded, that file is given up, and the copying goes
on into the other one, so the task never blocks on a full pipe.

The pipe normally ends when every process of the task has exited. A process that escaped the
task's session could keep it open for ever, so once the task is over the copier drains what
is left for at most :data:`DRAIN_SECONDS` and then stops.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import threading
import time
from abc import ABC, abstractmethod
from pathlib import Path

from metaq_py.queue.disk.fileio import write_all

__all__ = ["CHUNK", "DRAIN_SECONDS", "Copier", "OutputTee", "make_pipe"]

CHUNK = 1 << 20
"""Bytes read from the pipe at a time; large, so that a gigabyte of output costs little."""

DRAIN_SECONDS = 2.0
"""How long the copier keeps reading after the task has ended."""


class Copier(ABC):
    """A thread copying a task's output until told the task is over (:meth:`finish`), then
    closing what it owns (:meth:`_close`); :attr:`errors` lists what went wrong, one sentence
    each. The tee of a task's log and the copier of its stream frames are its two kinds."""

    def __init__(self, name: str) -> None:
        self._wake_r, self._wake_w = os.pipe()
        self.errors: list[str] = []
        self._thread = threading.Thread(target=self._copy, name=name, daemon=True)

    def start(self) -> None:
        """Start copying."""
        self._thread.start()

    def finish(self) -> list[str]:
        """Tell the copier that the task is over, wait for it to stop, and return its errors."""
        # The wake-up pipe is closed only here, after the thread is done with it, so that its
        # descriptor numbers cannot be reused by another file while the thread still polls.
        os.write(self._wake_w, b"x")
        self._thread.join()
        os.close(self._wake_r)
        os.close(self._wake_w)
        return self.errors

    def abandon(self) -> None:
        """Close everything without ever starting (the task could not be started)."""
        self._close()
        os.close(self._wake_r)
        os.close(self._wake_w)

    @abstractmethod
    def _copy(self) -> None:
        """Copy until the task is over (run on the copier's thread)."""

    @abstractmethod
    def _close(self) -> None:
        """Close what the copier owns."""


class OutputTee(Copier):
    """A thread copying everything read from ``read_fd`` into the files ``sinks``.

    The sinks are open file descriptors with the paths they belong to (for messages). The tee
    owns all of them and closes them when it stops. :meth:`finish` tells it the task has
    ended and waits until it has stopped; :attr:`errors` then lists what went wrong, one
    sentence per file.
    """

    def __init__(self, read_fd: int, sinks: list[tuple[Path, int]], *, name: str) -> None:
        self._fd = read_fd
        self._sinks = list(sinks)
        super().__init__(f"tee {name}")

    def _close(self) -> None:
        for fd in (self._fd, *(fd for _, fd in self._sinks)):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._sinks.clear()

    def _copy(self) -> None:
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        deadline: float | None = None
        try:
            while True:
                timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
                ready = poller.poll(None if timeout is None else timeout * 1000)
                if not ready:
                    # Still open after the task ended: an escaped process holds the pipe.
                    self.errors.append(
                        f"output still arriving {DRAIN_SECONDS:g} s after the task ended was "
                        "not recorded (a process outside the task's session holds its output)"
                    )
                    return
                fds = {fd for fd, _ in ready}
                if self._wake_r in fds and deadline is None:
                    poller.unregister(self._wake_r)
                    deadline = time.monotonic() + DRAIN_SECONDS
                if self._fd in fds:
                    data = os.read(self._fd, CHUNK)
                    if not data:
                        return
                    self._write(data)
        finally:
            self._close()

    def _write(self, data: bytes) -> None:
        for entry in list(self._sinks):
            path, fd = entry
            try:
                write_all(fd, data)
            except OSError as e:
                self.errors.append(f"writing the output to {path} failed: {e.strerror}")
                self._sinks.remove(entry)
                os.close(fd)


def make_pipe() -> tuple[int, int]:
    """A pipe for a task's output, enlarged (where Linux allows) to cut thread wake-ups."""
    read_fd, write_fd = os.pipe()
    # Not Linux, or above /proc/sys/fs/pipe-max-size: the default size works too.
    with contextlib.suppress(AttributeError, OSError):
        fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, CHUNK)
    return read_fd, write_fd
