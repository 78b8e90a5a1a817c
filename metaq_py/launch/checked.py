"""Executing a task's checked bytes (a :class:`~metaq_py.program.Program`), not its path.

The bytes go into a sealed in-memory file (``memfd_create``: no file on the shared file
system, so no metadata operation; sealed against any change), reopened read-only, and the
start executes ``/proc/self/fd/3``, the descriptor :func:`~metaq_py.launch.spawn.spawn` puts
it at in the child. The kernel runs a ``#!`` script's interpreter on that name, which the
interpreter opens again in the child: the script's ``$0`` is ``/proc/self/fd/3`` (its id is
``METAQ_TASK``), and descriptor 3 stays open, read-only, in the task.

A wrapped SLURM step starts on another node, where no descriptor can go: there
:func:`verified` reads the file and runs it only if its SHA-256 is the one the runner checked.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import stat

from metaq_py.queue.disk.fileio import write_all

__all__ = ["PROGRAM_FD", "PROGRAM_PATH", "sealed", "verified"]

PROGRAM_FD = 3
"""The descriptor a task's checked program is at in the started child."""

PROGRAM_PATH = f"/proc/self/fd/{PROGRAM_FD}"
"""What the start executes: the checked program, by its descriptor."""

_SEALS = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE


def sealed(data: bytes) -> int:
    """A read-only, close-on-exec descriptor of a sealed in-memory file holding ``data``."""
    fd = os.memfd_create("metaq-task", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        write_all(fd, data)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)
        # No writer may be left open, or the kernel refuses to execute it (ETXTBSY).
        return os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(fd)


def verified(path: str, digest: str, *, limit: int) -> int:
    """:func:`sealed` of the file at ``path`` when its content has the SHA-256 ``digest``;
    an :class:`OSError` whose ``strerror`` is one sentence otherwise (changed since it was
    checked, not a regular file, larger than ``limit``)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EPERM, "it is no longer a regular file")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if size > limit or hashlib.sha256(data).hexdigest() != digest:
        raise OSError(errno.EPERM, "it changed after the runner checked it, so it is not run")
    return sealed(data)
