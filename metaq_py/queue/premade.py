"""Files and folders made ahead of need, on a helper thread, for the runner to rename into place.

Every task a runner starts needs a few new inodes: its run folder, its log, and the logbook
that goes with it to ``finished/``. On a local ext4 disk allocating one costs the kernel half a
millisecond or more (and a metadata-server round trip on a parallel file system), while
renaming or linking an existing file costs a few microseconds. On the runner's one loop that
allocation was the largest part of a launch. So a helper thread keeps a few empty spares of
each kind ready in a hidden folder of the batch job, ``jobs/<jobid>/.spares/ready/`` (made in
``.spares/making/`` and then moved there, so that the loop never waits for the folder lock an
allocation holds), and the loop moves one to where it is needed:

- a *folder* (a run folder) with ``rename``, only where nothing is yet;
- an *empty file* (a log) with ``link`` and ``unlink``, which never replaces a file that is
  there already (a resumed task appends to its earlier log);
- a *block file* (a logbook about to be written), a file holding one block of filler that the
  caller overwrites in place, cuts to length and then renames where it belongs: writing into a
  new file allocates its first data block, which costs nearly as much as the inode.

Every spare is created with the mode the file made in place would have had, inside the queue
(so on its file system, in its group), in a hidden folder that no scan reads. When no
spare is ready the caller simply makes the file itself, as before: spares change what a file
costs, never what it is. The helper stops and the leftovers are removed when the runner stops
(:meth:`Spares.close`); a runner killed outright leaves them in its job's folder, where they
harm nothing.

On a machine whose other core is busy too, making the spares costs the same CPU time as making
the files in place: it is a gain where the helper runs alongside the loop, not less work.

**Only where a new file is dear.** Handing work to a helper thread is not free either: the loop
and the helper take turns at the interpreter lock, and each turn costs the loop about as much
as a few fast creates. Measured on the development machine's ext4 (10,000 no-op tasks, 4 at a
time): the spares cost 0.2 ms a task more than making the files in place (2.07 against 1.86
ms), where a create took 10 to 50 µs. So :class:`Spares` times the creates: the helper makes
spares only while the running average of a create's *wait* (its wall time beyond the CPU time
of the thread making it and the time that thread waited for a CPU, which on a busy node another
thread would only lengthen) is at least :data:`SLOW_CREATE`, and stops once it falls below half
of that; while the helper rests, the loop itself makes one spare, timed, every :data:`PROBE_EVERY`
takes. Only the wait can be hidden behind the loop's work: the CPU time the kernel spends on a
create is spent by whichever thread makes it, and since the launch agent took the process work
off the runner the CPUs of a small node are the limit, not the loop (on the 2-core development
machine, with ext4 creates of 70-170 µs of CPU, 10,000 no-op tasks ran at 1.19-1.24 ms a task
with the helper resting against 1.33-1.40 with it making spares). A metadata server's round
trip (a millisecond on a busy parallel file system), or an ext4 folder whose creates wait for
the disk, turns the helper on; a local disk whose creates are only CPU leaves it resting and
the callers make their own files.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import shutil
import threading
import time
from collections import deque
from enum import Enum
from pathlib import Path

__all__ = ["BLOCK", "PROBE_EVERY", "SLOW_CREATE", "Kind", "Spares"]

BLOCK = 4096
"""Bytes of filler in a block file: the first data block of a small file on most file
systems."""

SLOW_CREATE = 100e-6
"""Seconds a create (an inode, and a block for a block file) may wait on average, beyond its
CPU time, before the helper makes spares: about what a turn of the helper at the interpreter
lock costs the loop."""

PROBE_EVERY = 256
"""Spares taken, or asked for when none was ready, between two timed creates made by the loop
itself while the helper rests."""

_FILLER = b"\n" * BLOCK

_SMOOTHING = 0.2
"""The weight of the last create in the running average of the create times."""

_FILE_MODE = 0o666  # what open(..., "w") and os.open(..., 0o666) give, less the umask
_LOG_MODE = 0o644  # what the launch layer gives a log
_DIR_MODE = 0o777  # what mkdir gives, less the umask


def _clocks() -> tuple[float, float, float]:
    """Now: wall time, this thread's CPU time, and the time it has waited for a CPU
    (seconds)."""
    return time.perf_counter(), time.thread_time(), _run_delay()


def _waited(began: tuple[float, float, float], ended: tuple[float, float, float]) -> float:
    """The time between two :func:`_clocks` spent waiting, neither running nor waiting for a
    CPU. Only such a wait can be hidden behind the loop's work: the kernel's CPU time for a
    create (an ext4 inode) is spent by whichever thread makes it, and time spent waiting for a
    CPU on a busy machine would only grow with a helper thread more."""
    wall, cpu, queued = (e - b for b, e in zip(began, ended, strict=True))
    return max(0.0, wall - cpu - queued)


def _run_delay() -> float:
    """Seconds this thread has waited on a CPU's run queue since it began (Linux's
    ``/proc/thread-self/schedstat``, second field); 0 where the kernel does not say. Read
    afresh each time (three system calls): only timed creates ask, a few hundred µs each
    while the helper runs, and one in :data:`PROBE_EVERY` takes while it rests."""
    try:
        fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY | os.O_CLOEXEC)
        try:
            return int(os.read(fd, 64).split()[1]) / 1e9
        finally:
            os.close(fd)
    except (OSError, IndexError, ValueError):
        return 0.0  # not Linux, or no scheduler statistics: no run-queue wait is counted


class Kind(str, Enum):
    """The kinds of spares."""

    DIR = "dir"
    EMPTY = "empty"
    BLOCK = "block"


class Spares:
    """Keeps ``depth`` spares of each kind ready in ``home``, made by a helper thread while a
    create waits long (at least ``slow`` seconds on average; see the module text).

    The taking methods (:meth:`folder`, :meth:`empty_file`, :meth:`block_file`) are for one
    thread, the runner's loop; the helper only adds to the pools.
    """

    def __init__(self, home: str | os.PathLike[str], *, depth: int = 8,
                 slow: float = SLOW_CREATE) -> None:
        self.home = Path(home)
        self.depth = depth
        self.slow = slow
        """The average create time from which the helper makes spares (0: always; infinite:
        never)."""
        self.create_time = 0.0
        """The running average of the waits of the creates timed so far (seconds; see the
        module text)."""
        self.ahead = False
        """Whether the helper is making spares now (else the callers make their own files)."""
        self._pools: dict[Kind, deque[str]] = {k: deque() for k in Kind}
        self._wanted = threading.Event()
        self._closing = False
        self._serial = itertools.count(1)  # next() is atomic: the loop and the helper share it
        self._timed = 0
        self._asked = 0
        # Spares are made in one folder and then moved to another, from which they are taken:
        # making one holds its folder's lock for as long as the allocation takes, and the
        # loop, moving a spare out, must not wait for that.
        self._making = self.home / "making"
        self._ready = self.home / "ready"
        self._making.mkdir(parents=True, exist_ok=True)
        self._ready.mkdir(exist_ok=True)
        self._filler: threading.Thread | None = None
        if depth > 0:
            for kind in Kind:  # a first measure, and one spare of each kind
                self._make(kind)
            self._judge()

    def ready(self, kind: Kind) -> int:
        """How many spares of ``kind`` are ready now."""
        return len(self._pools[kind])

    # --- taking ------------------------------------------------------------------------------

    def folder(self, path: Path) -> bool:
        """Make ``path`` an empty folder from a spare, if nothing is at ``path`` and a spare
        is ready (its parent must exist); ``False`` when the caller must see to it itself."""
        spare = self._take(Kind.DIR)
        if spare is None:
            return False
        if os.path.lexists(path):
            self._pools[Kind.DIR].append(spare)
            return False
        try:
            os.rename(spare, path)
        except OSError as e:
            # ENOTEMPTY/EEXIST: something appeared there meanwhile; ENOENT: no parent (or the
            # spare was removed). Either way the caller makes the folder itself.
            if e.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT) and os.path.isdir(spare):
                self._pools[Kind.DIR].append(spare)
            return False
        return True

    def empty_file(self, path: Path) -> bool:
        """Give ``path`` a new empty file from a spare unless a file is there already (it is
        never replaced); ``False`` when the caller must create it (or open the one there)."""
        spare = self._take(Kind.EMPTY)
        if spare is None:
            return False
        try:
            os.link(spare, path)
        except OSError:
            self._pools[Kind.EMPTY].append(spare)  # a file is there, or no parent folder
            return False
        with contextlib.suppress(OSError):
            os.unlink(spare)
        return True

    def block_file(self) -> tuple[int, Path] | None:
        """A block file, open for writing at its start, and its path (hidden in the spares'
        folder, where nothing else touches it: the caller renames it where it belongs once
        written), or ``None`` when none is ready. The caller writes and then cuts the file to
        the length written."""
        spare = self._take(Kind.BLOCK)
        if spare is None:
            return None
        try:
            fd = os.open(spare, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        return fd, Path(spare)

    def _take(self, kind: Kind) -> str | None:
        pool = self._pools[kind]
        try:
            spare = pool.popleft()
        except IndexError:
            spare = None
        if self.ahead:
            if len(pool) <= self.depth // 2:
                self._wanted.set()  # refill in batches: a thread wake-up per spare costs too
        elif self.depth > 0:
            self._asked += 1
            if self._asked % PROBE_EVERY == 0:  # is a create still cheap?
                self._make(kind)
                self._judge()
        return spare

    # --- making ------------------------------------------------------------------------------

    def _make(self, kind: Kind) -> bool:
        """Make one spare of ``kind``, timed, and add it to its pool; ``False`` when it cannot
        be made (a full disk, a removed queue: the callers make their own files)."""
        name = f"{kind.value}-{next(self._serial)}"
        made, path = os.path.join(self._making, name), os.path.join(self._ready, name)
        began = _clocks()
        try:
            if kind is Kind.DIR:
                os.mkdir(made, _DIR_MODE)
            else:
                mode = _LOG_MODE if kind is Kind.EMPTY else _FILE_MODE
                fd = os.open(made, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
                try:
                    if kind is Kind.BLOCK:
                        os.write(fd, _FILLER)
                finally:
                    os.close(fd)
            os.rename(made, path)
        except OSError:
            return False
        took = _waited(began, _clocks())
        self._timed += 1
        self.create_time += _SMOOTHING * (took - self.create_time) if self._timed > 1 else took
        self._pools[kind].append(path)
        return True

    def _judge(self) -> None:
        """Start the helper (the first time, its thread) once creates are dear."""
        if self.ahead or self._closing or self.create_time < self.slow:
            return
        self.ahead = True
        if self._filler is None:
            self._filler = threading.Thread(target=self._fill, name="metaq spares",
                                            daemon=True)
            self._filler.start()
        self._wanted.set()

    def _fill(self) -> None:
        while True:
            self._wanted.wait()
            self._wanted.clear()
            while not self._closing and self.ahead:
                kind = min(Kind, key=lambda k: len(self._pools[k]))
                if len(self._pools[kind]) >= self.depth:
                    break
                if not self._make(kind):
                    self.ahead = False  # a full disk, a removed queue: no spares for now
                    break
                if self.create_time < self.slow / 2:
                    self.ahead = False  # cheap again: the loop's own creates measure from now
            if self._closing:
                return

    def close(self) -> None:
        """Stop the helper and remove every spare left."""
        self._closing = True
        self._wanted.set()
        if self._filler is not None:
            self._filler.join(timeout=5)
        shutil.rmtree(self.home, ignore_errors=True)
