"""Claims, where they sit, and their leases.

A claimed task sits where METAQ puts a running task, under its own file name:
``working/<machine>/<jobid>/<name>``, ``<name>`` being the last part of its relative path
(so a METAQ campaign generator's glob ``working/*/*/<name>`` finds it). When the job already
holds a file or folder of that name (two tasks of one name, from different sub-folders), the
claim goes to the first free numbered slot ``working/<machine>/<jobid>/<n>/<name>``, n = 2,
3, ... (:func:`claim_slot`): the file keeps its exact name and nothing is overwritten.

Beside it, the hidden lease ``.<name>.lease`` says who holds it: job id, host, pid and start
time, the attempt count and submit time the task had when it was claimed, and the task's
identity (its task folder and relative path), which is where a requeue puts it back. The
lease is written before the claim's rename, so a claimed task always has one; a claim whose
lease someone deleted is given an identity from its path instead (:func:`claim_identity`).
The heartbeat is the lease file's modification time, so renewing it is one ``utime`` call
and never rewrites the file.
"""

from __future__ import annotations

import errno
import json
import math
import os
import secrets
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from metaq_py.queue.disk.fileio import Refused, create_new, read_regular
from metaq_py.queue.disk.folders import set_aside, subfolders, task_files
from metaq_py.queue.judge import judge
from metaq_py.queue.settings.config import default_folder
from metaq_py.queue.settings.trust import user_name
from metaq_py.task_spec import TaskSpec

if TYPE_CHECKING:
    from metaq_py.program import Program

__all__ = ["LEASE_SUFFIX", "Claim", "JobFolder", "claim_identity", "claim_slot",
           "find_claim", "lease_path", "read_claims", "read_lease", "write_lease"]

LEASE_SUFFIX = ".lease"

LEASE_LIMIT = 8 * 1024
"""The largest lease file (bytes) that is read; a lease is about 300 bytes."""


@dataclass(frozen=True, slots=True)
class Claim:
    """A task held by a batch job.

    ``path`` is the task file in ``working/`` (``working/<machine>/<jobid>/<name>``, or a
    numbered slot below the job's folder, see :func:`claim_slot`); ``folder`` and ``relpath``,
    read from its lease, say where it came from (and where a requeue puts it back). ``host``
    and ``pid`` are ``None`` when the lease file is missing (someone deleted it);
    ``heartbeat`` is then the time the task was moved. ``spec`` is ``None`` only when listing
    claims whose script no longer parses. ``has_logbook`` is ``False`` when the claim is known
    to have brought no logbook along (the task had never run), so there is none to read;
    ``True`` means there may be one.
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
    stale_after: float | None = None
    """How long its holder said the lease may go unrenewed before it is lost (the holder's
    ``stale_after`` when it claimed): another runner judges the lease by this, never by its
    own setting. ``None`` for a lease that does not say (then the reader's own counts)."""
    program: Program | None = field(default=None, compare=False, repr=False)
    """What the claiming runner checked and will run (:class:`~metaq_py.program.Program`);
    ``None`` for claims read back from their leases."""
    inode: int | None = field(default=None, compare=False, repr=False)
    """The claimed file's inode as its claim read it (``None``: not known; looked up)."""

    @property
    def id(self) -> str:
        """The task's identity, ``<folder>/<relpath>``, the same in every state."""
        return f"{self.folder}/{self.relpath}"

    @property
    def lease(self) -> Path:
        """The lease file of this claim."""
        return lease_path(self.path)

    @property
    def user(self) -> str | None:
        """Whose task this is: the user name of the owner of the file the claiming runner
        checked (``None`` for claims read back from their leases). ``metaq report`` counts
        use per user by it."""
        return None if self.program is None else user_name(self.program.owner)


def lease_path(task: str | os.PathLike[str]) -> Path:
    """Where the lease of the claimed task at ``task`` is kept."""
    p = task if isinstance(task, Path) else Path(task)
    return p.with_name(f".{p.name}{LEASE_SUFFIX}")


ENDED_SUFFIX = ".ended-"
"""A claim whose task ended but could not be moved (a full disk) has its lease renamed to
``.<name>.ended-<exit code>`` by its runner: a rename needs no room a full disk lacks, and
whoever takes the claim back (:meth:`~metaq_py.queue.store.Queue.reclaim`) settles it with
that exit code, never runs it again."""


def mark_ended(task: Path, exit_code: int) -> bool:
    """Record that the claimed task at ``task`` ended with ``exit_code`` (see
    :data:`ENDED_SUFFIX`); whether that could be done."""
    try:
        os.rename(lease_path(task), task.with_name(f".{task.name}{ENDED_SUFFIX}{exit_code}"))
    except OSError:
        return False
    return True


def ended_code(task: Path) -> tuple[int, Path] | None:
    """The exit code :func:`mark_ended` recorded for the claimed task at ``task``, and the
    marker's path; ``None`` when it has none."""
    prefix = f".{task.name}{ENDED_SUFFIX}"
    try:
        with os.scandir(task.parent) as it:
            for e in it:
                if e.name.startswith(prefix) and e.name[len(prefix):].lstrip("-").isdigit():
                    return int(e.name[len(prefix):]), Path(e.path)
    except OSError:
        pass
    return None


def write_lease(task: Path, *, machine: str, jobid: str, folder: str, relpath: str, host: str,
                pid: int, start: float, attempts: int, submit: float,
                stale_after: float | None = None) -> Path:
    """Write the lease for ``task``, whole, before the task is there: made new in place (one
    metadata call; no task is beside it until it is whole, and a half-written one a crash
    leaves has no task and is replaced), or, where a lease is left from before, written
    under another name and renamed over it. Its mtime is the first heartbeat.
    ``stale_after`` is written in it, so that other runners judge it by its holder's
    setting."""
    path = lease_path(task)
    fields = {"machine": machine, "job": jobid, "folder": folder, "relpath": relpath,
              "host": host, "pid": pid, "start": start, "attempts": attempts, "submit": submit}
    if stale_after is not None:
        fields["stale_after"] = stale_after
    data = json.dumps(fields).encode()
    try:
        create_new(path, data)
        return path
    except FileExistsError:
        pass
    tmp = path.with_name(f"{path.name}.{secrets.token_hex(4)}.tmp")
    create_new(tmp, data)
    try:
        _rename_over(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
    return path


def _rename_over(src: Path, dst: Path) -> None:
    """Rename the file ``src`` over ``dst``; a folder planted at ``dst`` (which a rename
    cannot replace) is set aside first."""
    try:
        os.replace(src, dst)
    except OSError as e:
        if e.errno not in (errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST):
            raise
        set_aside(dst)
        os.replace(src, dst)


def read_lease(task: Path) -> tuple[dict, float] | None:
    """The lease fields of the claimed task at ``task`` and its heartbeat, or ``None`` when
    there is no lease that can be read (missing, not a regular file, too large, not a JSON
    object). The fields are not checked here; :func:`read_claims` checks each."""
    path = lease_path(task)
    try:
        raw, st = read_regular(path, limit=LEASE_LIMIT)
        data = json.loads(raw)
    except (Refused, ValueError, RecursionError):
        return None
    return (data, st.st_mtime) if isinstance(data, dict) else None


def claim_slot(job: Path, name: str, held: set[int] | frozenset[int] = frozenset()) -> Path:
    """Where job folder ``job`` (``working/<machine>/<jobid>``) puts a task file called
    ``name`` that it claims: ``job/name`` (slot 1) when nothing is there, else ``job/<n>/name``
    for the smallest n >= 2 whose slot is free (no file at ``<n>``, nothing at ``<n>/name``),
    so a claim never replaces another task and always keeps its file name. Slots in ``held``
    are known to be taken and are not looked at (see :class:`JobFolder`)."""
    n = 1
    while True:
        if n not in held:
            if n == 1:
                if not os.path.lexists(job / name):
                    return job / name
            else:
                slot = job / str(n)
                try:
                    free = stat.S_ISDIR(os.lstat(slot).st_mode) and \
                        not os.path.lexists(slot / name)
                except FileNotFoundError:
                    free = True
                if free:
                    return slot / name
        n += 1


class JobFolder:
    """One job's folder in ``working/`` as the process claiming for it keeps it: the slots
    (see :func:`claim_slot`) its claims hold, by file name. A job holding k tasks of one name
    would otherwise look at k places on disk before the free one; with what it holds in mind
    it looks at one or two. The disk still has the last word: a place found taken is passed
    over."""

    def __init__(self, job: Path) -> None:
        self.job = job
        self._held: dict[str, set[int]] = {}

    def take_slot(self, name: str) -> Path:
        """Where the next claim of a task called ``name`` goes; it counts as held from now."""
        held = self._held.setdefault(name, set())
        path = claim_slot(self.job, name, held)
        held.add(1 if path.parent == self.job else int(path.parent.name))
        return path

    def leave(self, path: Path) -> None:
        """The claimed task at ``path``, in this job's folder, has left it (or was never
        moved there): its slot is free again."""
        held = self._held.get(path.name)
        if held is None:
            return
        if path.parent == self.job:
            held.discard(1)
        elif path.parent.parent == self.job and path.parent.name.isdigit():
            held.discard(int(path.parent.name))
        if not held:
            del self._held[path.name]


def claim_identity(path: Path, rel: str, folders: tuple[str, ...],
                   lease: dict | None = None) -> tuple[str, str]:
    """The identity (task folder, relative path) of the claimed task at ``path``, which is
    ``rel`` below its job's folder: the one its lease names (``lease``, its fields, or else
    read from the lease file). A claim without a readable lease takes it from its path: an
    older runner's claim (``<folder>/<relpath>`` below the job's folder, its first part a task
    folder of ``folders``) goes back where it came from, any other to the queue's default task
    folder under its file name (:func:`~metaq_py.queue.settings.config.default_folder`). A
    lease's field that is not what a runner writes counts as missing."""
    parts = rel.split("/")
    if len(parts) >= 2 and parts[0] in folders:
        folder, relpath = parts[0], "/".join(parts[1:])
    else:
        folder = default_folder(folders)
        relpath = parts[-1]
    if lease is None:
        read = read_lease(path)
        lease = read[0] if read is not None else {}
    return (_folder_field(lease.get("folder"), folder),
            _relpath_field(lease.get("relpath"), relpath))


def find_claim(job: Path, folder: str, relpath: str, folders: tuple[str, ...]) -> Path | None:
    """The file of the task ``folder/relpath`` if job folder ``job`` holds it, found where a
    claim of it could sit (its name, a numbered slot, an older runner's place) and confirmed by
    its identity (:func:`claim_identity`); ``None`` if the job does not hold it."""
    name = relpath.rpartition("/")[2]
    slots: list[str] = []
    if os.path.lexists(job / "2"):  # slot 2 is taken first: a job without it has no slots
        try:
            with os.scandir(job) as it:
                slots = sorted(e.name for e in it if e.name.isdigit() and e.is_dir(
                    follow_symlinks=False))
        except OSError:
            return None
    for rel in dict.fromkeys([name, *(f"{n}/{name}" for n in slots), f"{folder}/{relpath}"]):
        path = job / rel
        if not path.is_file():  # a task may be a link to a file, never a folder
            continue
        if claim_identity(path, rel, folders) == (folder, relpath):
            return path
    return None


def read_claims(working: Path, *, folders: tuple[str, ...], machine: str | None = None,
                jobid: str | None = None, specs: bool = False) -> list[Claim]:
    """Every claimed task under ``working`` (``working/<machine>/<jobid>/``, at any depth,
    optionally of one machine or job) with its lease; ``folders`` are the queue's task
    folders (see :func:`claim_identity`). With ``specs``, each claim's script is parsed
    (``spec`` stays ``None`` if it fails)."""
    out: list[Claim] = []
    for m in subfolders(working) if machine is None else [machine]:
        for j in subfolders(working / m) if jobid is None else [jobid]:
            # working/ never holds a .reason, so a task called x.reason beside x is a task
            for rel, path in task_files(working / m / j, reasons=False):
                out.append(_claim_at(m, j, rel, path, specs, folders))
    return out


def _claim_at(machine: str, jobid: str, rel: str, path: Path, specs: bool,
              folders: tuple[str, ...]) -> Claim:
    lease = read_lease(path)
    spec = judge(path).spec if specs else None
    if lease is None:
        folder, relpath = claim_identity(path, rel, folders, {})
        try:
            moved = os.lstat(path).st_ctime
        except OSError:
            moved = 0.0
        return Claim(machine=machine, jobid=jobid, folder=folder, relpath=relpath, path=path,
                     host=None, pid=None, start=moved, heartbeat=moved, attempts=0,
                     submit=moved, spec=spec)
    data, beat = lease
    folder, relpath = claim_identity(path, rel, folders, data)
    # A lease is written by runners, but it sits in a folder others can write: every field
    # is checked, and one that is not what a runner writes is taken as missing.
    return Claim(machine=machine, jobid=jobid, folder=folder, relpath=relpath, path=path,
                 host=_text_field(data.get("host")), pid=_int_field(data.get("pid"), None),
                 start=_time_field(data.get("start"), beat), heartbeat=beat,
                 attempts=_int_field(data.get("attempts"), 0) or 0,
                 submit=_time_field(data.get("submit"), beat), spec=spec,
                 stale_after=_stale_field(data.get("stale_after")))


def _folder_field(value: object, default: str) -> str:
    """The task folder a lease names: a plain, visible name, else ``default`` (where the
    claimed task sits); a requeue must never be sent outside the queue."""
    if (not isinstance(value, str) or not value or "/" in value or value[0] == "."
            or "\0" in value or len(value) > 255):
        return default
    return value


def _relpath_field(value: object, default: str) -> str:
    """The relative path a lease names: visible parts, no ``..``, else ``default``."""
    if not isinstance(value, str) or not value or "\0" in value or len(value) > 3000:
        return default
    parts = value.split("/")
    if any(not p or p[0] == "." or len(p.encode()) > 255 for p in parts):
        return default
    return value


def _text_field(value: object) -> str | None:
    if isinstance(value, str) and 0 < len(value) <= 255 and value.isprintable():
        return value
    return None


def _int_field(value: object, default: int | None) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31:
        return value
    return default


def _time_field(value: object, default: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    try:
        number = float(value)
    except OverflowError:
        return default
    return number if math.isfinite(number) and 0 <= number < 1e11 else default


def _stale_field(value: object) -> float | None:
    """A lease's ``stale_after``: between a second and a week, else not believed."""
    number = _time_field(value, math.nan)
    return number if 1.0 <= number <= 7 * 86400.0 else None
