"""Copying a task's stdout and stderr into its batch job's stream file as frames
(:mod:`metaq_py.queue.streams`), without a file of its own.

The task writes into two pipes; a thread reads what arrives, at most
:data:`~metaq_py.launch.tee.CHUNK` bytes at a time, and appends it at once as frames of the
task's attempt and stream: memory stays bounded whatever the task prints, and what it wrote
before a crash is on disk. A write that fails (a full disk) is said once, and the copying goes
on discarding, so that the task never blocks on a full pipe. As with
:class:`~metaq_py.launch.tee.OutputTee`, the copier drains for at most
:data:`~metaq_py.launch.tee.DRAIN_SECONDS` once the task is over.
"""

from __future__ import annotations

import contextlib
import os
import select
import time
from pathlib import Path

from metaq_py.launch.tee import CHUNK, DRAIN_SECONDS, Copier
from metaq_py.queue.disk.fileio import write_all
from metaq_py.queue.streams import STDERR, STDOUT, StreamWriter

__all__ = ["StreamCopier"]


class StreamCopier(Copier):
    """A thread copying the pipes ``out_fd`` and ``err_fd`` of ``task``'s ``attempt`` into
    ``writer``. It owns both descriptors and closes them when it stops."""

    def __init__(self, out_fd: int, err_fd: int, writer: StreamWriter, *, task: str,
                 attempt: int, also: tuple[Path, int] | None = None) -> None:
        self._fds = {out_fd: STDOUT, err_fd: STDERR}
        self._writer: StreamWriter | None = writer
        self._also = also
        """The task's ``LOG`` (its path and open descriptor), which gets both streams as
        they come, unframed, as METAQ writes it."""
        self._task, self._attempt = task, attempt
        super().__init__(f"streams {task}")

    def _close(self) -> None:
        for fd in (*self._fds, *([self._also[1]] if self._also else [])):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds = {}
        self._also = None

    def _copy(self) -> None:
        poller = select.poll()
        for fd in self._fds:
            poller.register(fd, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        open_fds = set(self._fds)
        deadline: float | None = None
        try:
            while open_fds:
                timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
                ready = poller.poll(None if timeout is None else timeout * 1000)
                if not ready:
                    self.errors.append(
                        f"output still arriving {DRAIN_SECONDS:g} s after the task ended was "
                        "not recorded (a process outside the task's session holds its output)")
                    return
                for fd, _ in ready:
                    if fd == self._wake_r:
                        if deadline is None:
                            poller.unregister(self._wake_r)
                            deadline = time.monotonic() + DRAIN_SECONDS
                        continue
                    data = os.read(fd, CHUNK)
                    if not data:
                        poller.unregister(fd)
                        open_fds.discard(fd)
                        continue
                    self._write(self._fds[fd], data)
        finally:
            self._close()

    def _write(self, stream: int, data: bytes) -> None:
        """Write ``data`` where it goes; a place that fails is said once and given up, and
        what is read is still drained, never blocking the task."""
        if self._writer is not None:
            try:
                self._writer.write(self._task, self._attempt, stream, data)
            except OSError as e:
                where = self._writer.path or self._writer.folder
                self.errors.append(f"writing the output to the stream file {where} failed: "
                                   f"{e.strerror or e}; the rest of it is lost")
                self._writer = None
        if self._also is not None:
            path, fd = self._also
            try:
                write_all(fd, data)
            except OSError as e:
                self.errors.append(f"writing the output to {path} failed: {e.strerror}")
                self._also = None
                os.close(fd)
