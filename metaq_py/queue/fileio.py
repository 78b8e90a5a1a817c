"""The one low-level write every file metaq-py publishes goes through."""

from __future__ import annotations

import os


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd``: a regular file takes it in one go, and a short write
    (a signal, a pipe) is resumed where it stopped."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
