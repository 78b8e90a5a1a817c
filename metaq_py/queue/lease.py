"""Claims and their leases.

A claimed task sits in ``working/<machine>/<jobid>/<folder>/<relpath>``. Beside it, the hidden
lease ``.<name>.lease`` says who holds it: job id, host, pid and start time, plus the attempt
count and submit time the task had when it was claimed. The heartbeat is the lease file's
modification time, so renewing it is one ``utime`` call and never rewrites the file. A runner
reuses the lease files of its tasks that have left (:class:`LeaseFiles`).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
from dataclasses import dataclass
from pathlib import Path

from metaq_py.directives import TaskSpec
from metaq_py.queue.fileio import write_all
from metaq_py.queue.folders import subfolders, task_files
from metaq_py.queue.judge import judge

__all__ = ["LEASE_SUFFIX", "Claim", "LeaseFiles", "lease_path", "read_claims", "read_lease",
           "write_lease"]

LEASE_SUFFIX = ".lease"


@dataclass(frozen=True, slots=True)
class Claim:
    """A task held by a batch job.

    ``path`` is the task file in ``working/``; ``folder`` and ``relpath`` say where it came
    from (and where a requeue puts it back). ``host`` and ``pid`` are ``None`` when the lease
    file is missing (a claim interrupted by a crash); ``heartbeat`` is then the time the task
    was moved. ``spec`` is ``None`` only when listing claims whose script no longer parses.
    ``has_logbook`` is ``False`` when the claim is known to have brought no logbook along (the
    task had never run), so there is none to read; ``True`` means there may be one.
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
    has_logbook: bool = True

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
    p = task if isinstance(task, Path) else Path(task)
    return p.with_name(f".{p.name}{LEASE_SUFFIX}")


def write_lease(task: Path, *, machine: str, jobid: str, folder: str, relpath: str, host: str,
                pid: int, start: float, attempts: int, submit: float,
                spares: LeaseFiles | None = None) -> Path:
    """Write the lease for ``task`` atomically (whole, under another name, then renamed into
    place); its mtime is the first heartbeat. With ``spares``, a retired lease file of the
    same job is reused for it when one is at hand."""
    path = lease_path(task)
    data = json.dumps({"machine": machine, "job": jobid, "folder": folder, "relpath": relpath,
                       "host": host, "pid": pid, "start": start, "attempts": attempts,
                       "submit": submit}).encode()
    if spares is not None and spares.reuse(data, path):
        return path
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    _write_at(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644), data)
    os.replace(tmp, path)
    return path


class LeaseFiles:
    """The lease files of one batch job's claims, reused instead of made anew.

    Creating a file allocates an inode, which is the dearest step of a claim on a local disk
    (about half a millisecond of kernel time on ext4, where rewriting and renaming an existing
    file costs a few microseconds). A lease is needed only while its task is claimed, and a
    runner claims a task about as often as one of its tasks leaves ``working/``. So the lease of
    a task that has left is not deleted but *retired*: renamed to a hidden spare name in the
    job's folder, ``working/<machine>/<jobid>/.spare-<pid>-<n>``; the next claim rewrites a
    spare and renames it to its own lease's name.

    Nothing about claims changes: a lease still appears at its name only by a rename, whole,
    exactly as when written under a temporary name, and a spare is never taken for a lease
    (leases are found through their tasks, and every listing skips hidden names). At most
    :attr:`LIMIT` spares are kept; :meth:`clear` removes them when the job stops. A runner that
    dies leaves its few spares in its job's folder, where they harm nothing.
    """

    LIMIT = 64

    def __init__(self, home: Path) -> None:
        self.home = home
        self._spares: list[Path] = []

    def reuse(self, data: bytes, path: Path) -> bool:
        """Write ``data`` into a spare and rename it to ``path``; ``False`` when no spare is
        at hand (the caller writes a new file)."""
        while self._spares:
            spare = self._spares.pop()
            try:
                fd = os.open(spare, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError:
                continue  # removed by someone (or no longer a plain file): take another
            try:
                # Written over in place and then cut to length, not truncated first: freeing
                # the file's block and allocating another costs as much as a new file.
                _write_at(fd, data, cut=True)
                os.replace(spare, path)
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(spare)
                raise
            return True
        return False

    def retire(self, lease: Path) -> None:
        """Keep the lease file ``lease``, whose task has left ``working/``, for a later claim
        (or delete it when enough are kept)."""
        if len(self._spares) >= self.LIMIT:
            lease.unlink(missing_ok=True)
            return
        spare = self.home / f".spare-{os.getpid()}-{next(_SPARE_NUMBERS)}"
        try:
            os.rename(lease, spare)
        except FileNotFoundError:
            return
        self._spares.append(spare)

    def clear(self) -> None:
        """Delete every spare."""
        for spare in self._spares:
            with contextlib.suppress(OSError):
                os.unlink(spare)
        self._spares.clear()


_SPARE_NUMBERS = itertools.count()
"""Spare names are unique in this process, so that two :class:`LeaseFiles` of one job (two
``Queue`` objects on one queue) never share one."""


def _write_at(fd: int, data: bytes, *, cut: bool = False) -> None:
    """Write all of ``data`` from the start of the open file ``fd`` and close it; with
    ``cut``, drop whatever the file held beyond it."""
    try:
        write_all(fd, data)
        if cut:
            os.ftruncate(fd, len(data))
    finally:
        os.close(fd)


def read_lease(task: Path) -> tuple[dict, float] | None:
    """The lease fields of the claimed task at ``task`` and its heartbeat, or ``None``."""
    path = lease_path(task)
    try:
        data = json.loads(path.read_bytes())
        heartbeat = path.stat().st_mtime
    except (OSError, ValueError):
        return None
    return (data, heartbeat) if isinstance(data, dict) else None


def read_claims(working: Path, *, machine: str | None = None, jobid: str | None = None,
                specs: bool = False) -> list[Claim]:
    """Every claimed task under ``working`` (``working/<machine>/<jobid>/<folder>/...``,
    optionally of one machine or job) with its lease. With ``specs``, each claim's script is
    parsed (``spec`` stays ``None`` if it fails)."""
    out: list[Claim] = []
    for m in subfolders(working) if machine is None else [machine]:
        for j in subfolders(working / m) if jobid is None else [jobid]:
            for folder in subfolders(working / m / j):
                for rel, path in task_files(working / m / j / folder):
                    out.append(_claim_at(m, j, folder, rel, path, specs))
    return out


def _claim_at(machine: str, jobid: str, folder: str, rel: str, path: Path,
              specs: bool) -> Claim:
    lease = read_lease(path)
    spec = judge(path).spec if specs else None
    if lease is None:
        try:
            moved = os.lstat(path).st_ctime
        except OSError:
            moved = 0.0
        return Claim(machine=machine, jobid=jobid, folder=folder, relpath=rel, path=path,
                     host=None, pid=None, start=moved, heartbeat=moved, attempts=0,
                     submit=moved, spec=spec)
    data, beat = lease
    return Claim(machine=machine, jobid=jobid, folder=str(data.get("folder", folder)),
                 relpath=str(data.get("relpath", rel)), path=path,
                 host=data.get("host"), pid=data.get("pid"),
                 start=float(data.get("start", beat)), heartbeat=beat,
                 attempts=int(data.get("attempts", 0)),
                 submit=float(data.get("submit", beat)), spec=spec)
