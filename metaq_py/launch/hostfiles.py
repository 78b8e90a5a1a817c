"""Hostfiles shared by the tasks that run on the same hosts.

A task's ``$METAQ_HOSTFILE`` names its hosts, one per line. In a batch job only a few distinct
host lists ever occur (one per node for single-node tasks), while thousands of tasks may run,
and creating a file is among the dearest things a launch does (a new inode; half a millisecond
on a local ext4 disk, a metadata-server round trip on a parallel file system). So the runner
writes one file per distinct host list, the first time a task needs it, and hands the same
file to every later task on exactly those hosts.

Each file is named after its content (a hash of the host list) in one folder of the batch
job, written under a temporary name and renamed into place (no task ever sees half of it),
made read-only, and never changed afterwards. A task that may be resized in place gets a
hostfile of its own instead, in its run folder, since the runner rewrites that one on a
resize (see :mod:`metaq_py.runner.tasks.live_task`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

from metaq_py.launch.spec import LaunchError
from metaq_py.queue.disk.fileio import replace_file

__all__ = ["HostFiles", "hostfile_text"]


def hostfile_text(nodes: Sequence[str]) -> str:
    """The content of a hostfile: each host on a line of its own."""
    return "".join(f"{host}\n" for host in nodes)


class HostFiles:
    """The shared hostfiles of one batch job, in ``folder`` (created when first needed)."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self._paths: dict[tuple[str, ...], Path] = {}
        self._owners: dict[str, tuple[str, ...]] = {}  # file name -> its host list

    def path(self, nodes: Sequence[str]) -> Path:
        """The hostfile listing exactly ``nodes`` in this order, written if it is new.
        Raises :class:`~metaq_py.launch.spec.LaunchError` when it cannot be written."""
        key = tuple(nodes)
        known = self._paths.get(key)
        if known is not None:
            return known
        text = hostfile_text(key)
        name = hashlib.sha256(text.encode()).hexdigest()[:16]
        while self._owners.get(name, key) != key:  # another list with the same hash: never
            name += "x"                             # seen, but two lists must not share a file
        path = self.folder / name
        try:
            _write_new(path, text.encode())
        except OSError as e:
            raise LaunchError(f"cannot write the hostfile {path}: {e.strerror}") from None
        self._paths[key] = path
        self._owners[name] = key
        return path


def _write_new(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` whole and read-only: under a temporary name, then renamed."""
    path.parent.mkdir(exist_ok=True)  # only its own folder: the job's is the runner's to make
    replace_file(path, data, mode=0o444)
