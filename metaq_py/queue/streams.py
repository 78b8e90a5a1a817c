"""Output streams: the stdout and stderr of a batch job's tasks, framed, in a few append-only
files in its job folder, ``jobs/<jobid>/streams/<n>.frames``, instead of a log file per task.

On Lustre or GPFS a file per task is an inode and several metadata round trips; a stream file
is one inode for thousands of tasks, and writing to it costs no metadata call at all. The
runner alone writes its job's streams (one ``write`` per frame, under a lock); ``metaq log``
reads them from any node that sees the queue.

A frame is a fixed header, the task's identity and the bytes the task wrote::

    magic "MQF1" | task length (u16) | stream (u8: 1 stdout, 2 stderr) | 0 (u8)
    | attempt (u32) | payload length (u32) | CRC-32 of all after the header's CRC (u32)
    | task (UTF-8) | payload

A payload is at most :data:`FRAME_LIMIT` bytes, so reading costs bounded memory whatever a
task prints (a gigabyte, binary bytes, no newline). A frame torn by a ``kill -9`` of the
runner, or garbage written into a stream file, fails its length or CRC: the reader reports it
as :class:`Torn` (``metaq doctor`` lists them), and resumes at the next magic after it, so
no whole frame before or after it is lost.
"""

from __future__ import annotations

import contextlib
import os
import struct
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from metaq_py.queue.disk.fileio import Refused, open_append, open_regular
from metaq_py.queue.disk.folders import make_folders, set_aside

__all__ = ["FRAME_LIMIT", "STDERR", "STDOUT", "STREAMS", "Frame", "StreamWriter", "Torn",
           "read_frames", "stream_files"]

MAGIC = b"MQF1"
HEADER = struct.Struct("<4sHBBIII")
"""magic, task length, stream, pad, attempt, payload length, CRC-32."""
FRAME_LIMIT = 1 << 20
"""The most bytes of output in one frame: what a reader holds at once."""
STDOUT, STDERR = 1, 2
STREAMS = "streams"
"""The folder of a job's stream files, in ``jobs/<jobid>/``."""
SUFFIX = ".frames"
TASK_LIMIT = 4096
"""The longest task identity (bytes) a frame carries."""


@dataclass(frozen=True, slots=True)
class Frame:
    """Bytes ``data`` that ``task`` wrote on ``stream`` in its ``attempt``; ``offset`` and
    ``end`` are where the frame starts and ends in its file."""

    task: str
    attempt: int
    stream: int
    data: bytes
    offset: int
    end: int


@dataclass(frozen=True, slots=True)
class Torn:
    """Bytes of a stream file that are no whole frame: ``size`` bytes from ``offset``."""

    path: Path
    offset: int
    size: int

    def sentence(self) -> str:
        return (f"{self.path}: {self.size} bytes at offset {self.offset} are no whole frame "
                f"(torn by a crash, or written by something else); skipped")


def encode(task: str, attempt: int, stream: int, data: bytes | memoryview
           ) -> list[bytes | memoryview]:
    """One frame (``data`` of at most :data:`FRAME_LIMIT` bytes), as its pieces: header,
    task, data (written together by one ``writev``, never copied into one buffer)."""
    name = task.encode("utf-8", "surrogateescape")[:TASK_LIMIT]
    head = HEADER.pack(MAGIC, len(name), stream, 0, attempt, len(data), 0)
    crc = zlib.crc32(data, zlib.crc32(name, zlib.crc32(head[:-4])))
    return [HEADER.pack(MAGIC, len(name), stream, 0, attempt, len(data), crc), name, data]


class StreamWriter:
    """A batch job's stream file, open for appending while its runner lives; threads share it
    (each frame is one ``write`` under a lock)."""

    def __init__(self, root: Path, job_dir: Path) -> None:
        self.root = root
        self.folder = job_dir / STREAMS
        self._fd: int | None = None
        self._lock = threading.Lock()
        self.path: Path | None = None

    def write(self, task: str, attempt: int, stream: int, data: bytes) -> None:
        """Append ``data`` as frames of ``task``'s ``attempt``; an :class:`OSError` (a full
        disk) is the caller's to report."""
        whole = memoryview(data)
        with self._lock:
            fd = self._open()
            for start in range(0, len(data), FRAME_LIMIT):
                pieces = encode(task, attempt, stream, whole[start:start + FRAME_LIMIT])
                done = os.writev(fd, pieces)
                size = sum(map(len, pieces))
                if done < size:  # a short write (a nearly full disk): the rest at once
                    rest = memoryview(b"".join(pieces))[done:]
                    while rest:
                        rest = rest[os.write(fd, rest):]

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                with contextlib.suppress(OSError):
                    os.close(self._fd)
                self._fd = None

    def _open(self) -> int:
        if self._fd is None:
            make_folders(self.root, self.folder)
            n = 1
            while True:  # a file of its own: never one another runner of this id left
                path = self.folder / f"{os.getpid()}-{n}{SUFFIX}"
                if not os.path.lexists(path):
                    break
                n += 1
            try:
                self._fd = open_append(path)
            except Refused as e:
                if not e.planted:
                    raise OSError(str(e)) from None
                set_aside(path)
                self._fd = open_append(path)
            self.path = path
        return self._fd


def stream_files(job_dir: Path) -> list[Path]:
    """A job's stream files, in the order written (by name)."""
    try:
        names = os.listdir(job_dir / STREAMS)
    except OSError:
        return []
    return [job_dir / STREAMS / n for n in sorted(names, key=_order) if n.endswith(SUFFIX)]


def _order(name: str) -> tuple[int, int, str]:
    stem = name[: -len(SUFFIX)] if name.endswith(SUFFIX) else name
    pid, _, n = stem.partition("-")
    return (int(pid) if pid.isdigit() else 0, int(n) if n.isdigit() else 0, name)


def read_frames(path: Path, *, task: str | None = None, start: int = 0,
                ended: bool = False) -> Iterator[Frame | Torn]:
    """The frames of the stream file at ``path`` from offset ``start`` (of ``task`` only, if
    given), and what is torn between them. Only the bytes the file had when opened are read;
    a last frame still being written (its bytes not all there) ends the reading without being
    reported torn, so ``--follow`` reads it next time, unless its writer has ``ended`` (then
    it is torn). A FIFO, a link or a folder at ``path`` raises
    :class:`~metaq_py.queue.disk.fileio.Refused`."""
    fd, st = open_regular(path)
    try:
        yield from _frames(fd, path, st.st_size, task, start, ended)
    finally:
        os.close(fd)


def _frames(fd: int, path: Path, size: int, task: str | None, pos: int, ended: bool
            ) -> Iterator[Frame | Torn]:
    """See :func:`read_frames`. The frames of other tasks than ``task`` are passed over by
    their length, unread and unchecked (``metaq doctor``, reading every frame, checks them)."""
    wanted = None if task is None else task.encode("utf-8", "surrogateescape")[:TASK_LIMIT]
    torn_at: int | None = None
    while pos < size:
        head = os.pread(fd, HEADER.size, pos)
        if len(head) < HEADER.size:
            if ended or torn_at is not None:
                start = torn_at if torn_at is not None else pos
                yield Torn(path, start, size - start)
            return
        magic, tlen, stream, _, attempt, dlen, crc = HEADER.unpack(head)
        good = magic == MAGIC and dlen <= FRAME_LIMIT and tlen <= TASK_LIMIT
        end = pos + HEADER.size + tlen + dlen
        if good and end > size and torn_at is None and not ended:
            return  # the last frame, still being written (or torn at the very end)
        good = good and end <= size
        name = os.pread(fd, tlen, pos + HEADER.size) if good else b""
        if good and wanted is not None and name != wanted and torn_at is None:
            pos = end  # another task's
            continue
        data = os.pread(fd, dlen, pos + HEADER.size + tlen) if good else b""
        if good and len(name) + len(data) == tlen + dlen \
                and zlib.crc32(data, zlib.crc32(name, zlib.crc32(head[:-4]))) == crc:
            if torn_at is not None:
                yield Torn(path, torn_at, pos - torn_at)
                torn_at = None
            if wanted is None or name == wanted:
                yield Frame(name.decode("utf-8", "surrogateescape"), attempt, stream, data,
                            pos, end)
            pos = end
            continue
        if torn_at is None:
            torn_at = pos
        pos = _next_magic(fd, pos + 1, size)
    if torn_at is not None:
        yield Torn(path, torn_at, size - torn_at)


def _next_magic(fd: int, pos: int, size: int) -> int:
    """The offset of the next :data:`MAGIC` at or after ``pos`` (``size`` if none), read in
    bounded pieces."""
    piece = 1 << 16
    while pos < size:
        chunk = os.pread(fd, min(piece + len(MAGIC) - 1, size - pos), pos)
        i = chunk.find(MAGIC)
        if i >= 0:
            return pos + i
        if len(chunk) < len(MAGIC):
            return size
        pos += len(chunk) - len(MAGIC) + 1
    return size
