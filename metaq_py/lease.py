"""Claims and their leases.

A claimed task sits in ``working/<machine>/<jobid>/<folder>/<relpath>``. Beside it, the hidden
lease ``.<name>.lease`` says who holds it: job id, host, pid and start time, plus the attempt
count and submit time the task had when it was claimed. The heartbeat is the lease file's
modification time, so renewing it is one ``utime`` call and never rewrites the file.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from metaq_py.directives import TaskSpec

__all__ = ["LEASE_SUFFIX", "Claim", "lease_path", "read_lease", "write_lease"]

LEASE_SUFFIX = ".lease"


@dataclass(frozen=True, slots=True)
class Claim:
    """A task held by a batch job.

    ``path`` is the task file in ``working/``; ``folder`` and ``relpath`` say where it came
    from (and where a requeue puts it back). ``host`` and ``pid`` are ``None`` when the lease
    file is missing (a claim interrupted by a crash); ``heartbeat`` is then the time the task
    was moved. ``spec`` is ``None`` only when listing claims whose script no longer parses.
    """

    machine: str
    jobid: str
    folder: str
    relpath: str
    path: Path
    host: str | None
    pid: int | None
    start: float
    heartbeat: float
    attempts: int
    submit: float
    spec: TaskSpec | None

    @property
    def id(self) -> str:
        """The task's identity, ``<folder>/<relpath>``, the same in every state."""
        return f"{self.folder}/{self.relpath}"

    @property
    def lease(self) -> Path:
        """The lease file of this claim."""
        return lease_path(self.path)


def lease_path(task: str | os.PathLike[str]) -> Path:
    """Where the lease of the claimed task at ``task`` is kept."""
    p = Path(task)
    return p.with_name(f".{p.name}{LEASE_SUFFIX}")


def write_lease(task: Path, *, machine: str, jobid: str, folder: str, relpath: str, host: str,
                pid: int, start: float, attempts: int, submit: float) -> Path:
    """Write the lease for ``task`` atomically; its mtime is the first heartbeat."""
    path = lease_path(task)
    text = json.dumps({"machine": machine, "job": jobid, "folder": folder, "relpath": relpath,
                       "host": host, "pid": pid, "start": start, "attempts": attempts,
                       "submit": submit})
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_lease(task: Path) -> tuple[dict, float] | None:
    """The lease fields of the claimed task at ``task`` and its heartbeat, or ``None``."""
    path = lease_path(task)
    try:
        data = json.loads(path.read_bytes())
        heartbeat = path.stat().st_mtime
    except (OSError, ValueError):
        return None
    return (data, heartbeat) if isinstance(data, dict) else None
