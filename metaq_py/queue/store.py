"""The queue on disk: folders of task scripts, and every move a task makes between them.

Layout under the queue root (``docs/user-guide.md`` has the full picture)::

    metaq.yaml                    settings (optional)
    priority/ todo/               task folders, scanned in this order, recursively
    hold/<folder>/<relpath>       parked tasks
    working/<machine>/<jobid>/<folder>/<relpath>   claimed tasks, each with a lease
    finished/<folder>/<relpath>   success
    failed/<folder>/<relpath>     failure, with <relpath>.reason beside it
    rejected/<folder>/<relpath>   invalid or untrusted scripts, with .reason
    cancelled/<folder>/<relpath>  cancelled by a person, with .reason
    notices/                      on-demand advance notices
    jobs/<jobid>/                 a batch job's logs and events.jsonl

A task's identity is ``<folder>/<relpath>``, the same in every state, so two ``run.sh`` in
different sub-folders never collide. Every move is one ``rename`` within one file system, so a
task is always in exactly one place: two jobs racing for a task both try the rename and
exactly one succeeds. Hidden companions travel with the task: its record (attempts, submit
time) and, while claimed, its lease.

Nothing here writes unless asked to: a :class:`Queue` on a read-only or half-made queue can
still scan and list (missing folders are empty).
"""

from __future__ import annotations

import contextlib
import errno
import getpass
import grp
import os
import secrets
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from metaq_py.clock import Clock, WallClock
from metaq_py.directives import TaskSpec, read_head
from metaq_py.errors import QueueError, TaskError
from metaq_py.queue.admission import resolve_log
from metaq_py.queue.attempts import (
    TaskRecord,
    publish_record,
    read_record,
    record_path,
    stage_record,
)
from metaq_py.queue.config import CONFIG_NAME, TEMPLATE, QueueConfig, load_config
from metaq_py.queue.eventlog import EventLog
from metaq_py.queue.fileio import write_all
from metaq_py.queue.index import Index, Scan, Task
from metaq_py.queue.judge import Head, Verdict, judge
from metaq_py.queue.lease import Claim, LeaseFiles, lease_path, read_lease, write_lease
from metaq_py.queue.premade import Spares
from metaq_py.queue.trust import Trust
from metaq_py.queue.watcher import QueueWatcher

__all__ = ["DONE_STATES", "STATES", "Claim", "Entry", "Moved", "Queue", "Task"]

HOLD, WORKING, NOTICES, JOBS = "hold", "working", "notices", "jobs"
FINISHED, FAILED, REJECTED, CANCELLED = "finished", "failed", "rejected", "cancelled"
DONE_STATES = (FINISHED, FAILED, REJECTED, CANCELLED)
PENDING = "pending"
STATES = (PENDING, HOLD, WORKING, *DONE_STATES)
"""Every state a task can be in, in the order a task passes through them."""

_STATE_WORDS = {PENDING: "waiting", HOLD: "held", WORKING: "running", FINISHED: "finished",
                FAILED: "failed", REJECTED: "rejected", CANCELLED: "cancelled"}

SETTLE = 2.0
"""Seconds an invalid file must stay unchanged before ``pending`` rejects it."""

REASON_SUFFIX = ".reason"
CANCEL_SUFFIX = ".cancel"


@dataclass(frozen=True, slots=True)
class Moved:
    """Where a task went: ``state`` is a task folder's name when it went back to wait there,
    else one of :data:`DONE_STATES`; ``path`` is its new file."""

    state: str
    path: Path


@dataclass(frozen=True, slots=True)
class Entry:
    """A task file in some state, as listed by ``metaq ls`` and ``metaq status``.

    ``spec`` is ``None`` when the script does not parse (``reason`` then says why, for a
    waiting task). ``reason`` is the ``.reason`` text of a failed, rejected or cancelled task.
    ``machine`` and ``jobid`` are set for claimed tasks.
    """

    state: str
    folder: str
    relpath: str
    path: Path
    spec: TaskSpec | None
    reason: str | None = None
    machine: str | None = None
    jobid: str | None = None
    attempts: int = 0

    @property
    def id(self) -> str:
        return f"{self.folder}/{self.relpath}"


class Queue:
    """One queue directory. Cheap to create; it reads ``metaq.yaml`` once.

    The runner's cycle::

        q = Queue(root)
        q.check_one_filesystem()
        waiting = q.settled_scan().tasks       # queue order; the runner's policy picks
        claim = q.claim(task, machine="theta", jobid=job)  # None: another job took it
        ...  # launch, then q.heartbeat(claim) now and then
        q.finish(claim, exit_code=rc)          # or q.requeue(claim, reason="preempted")
    """

    def __init__(self, root: str | os.PathLike[str], *, clock: Clock | None = None) -> None:
        self.root = Path(root)
        self.clock: Clock = clock if clock is not None else WallClock()
        """Every time the queue reads (settling, claims, staleness, history) comes from it."""
        self.config: QueueConfig = load_config(self.root)
        self.index = Index(self.root, self.config, clock=self.clock)
        self._trust = Trust(gid=self.config.gid, uids=self.config.trusted_uids)
        self._lease_files: dict[tuple[str, str], LeaseFiles] = {}
        """The lease files of the jobs this object claims for, reused (see LeaseFiles)."""
        self._claim_folders: dict[tuple[str, str, str], Path] = {}
        """``working/<machine>/<jobid>/<folder>`` of the claims made so far (checked names)."""
        self.spares: Spares | None = None
        """Files made ahead of time for the records this object writes (a runner sets it;
        see :mod:`metaq_py.queue.premade`)."""

    # --- creation and checks ---------------------------------------------------------------

    @classmethod
    def init(cls, root: str | os.PathLike[str], *, group: str | None = None,
             clock: Clock | None = None) -> Queue:
        """Create the queue layout at ``root`` (existing parts are kept) and a commented
        ``metaq.yaml``. With ``group``, every folder belongs to that group and is setgid and
        group-writable, so files collaborators create there belong to the group too."""
        root = Path(root)
        gid = None
        if group is not None:
            try:
                gid = grp.getgrnam(group).gr_gid if not group.isdigit() else int(group)
            except KeyError:
                raise QueueError(f"there is no group {group!r} on this system") from None
        config_file = root / CONFIG_NAME
        root.mkdir(parents=True, exist_ok=True)
        existing = load_config(root) if config_file.exists() else QueueConfig()
        folders = [*existing.folders, HOLD, WORKING, *DONE_STATES, NOTICES, JOBS]
        for name in folders:
            (root / name).mkdir(exist_ok=True)
        if not config_file.exists():
            config_file.write_text(TEMPLATE.format(group=group if group else "null"),
                                   encoding="utf-8")
        if gid is not None:
            for path in [root, *(root / n for n in folders)]:
                os.chown(path, -1, gid)
                path.chmod(0o2770)
            os.chown(config_file, -1, gid)
            config_file.chmod(0o664)
        return cls(root, clock=clock)

    def require(self) -> None:
        """Raise :class:`QueueError` unless the queue root exists."""
        if not self.root.is_dir():
            raise QueueError(f"there is no queue at {self.root}; create one with "
                             f"'metaq init {self.root}' or pass --queue")

    def check_one_filesystem(self) -> None:
        """Raise :class:`QueueError` unless every folder of the queue is on the root's file
        system: a claim is a rename, and renames do not cross file systems."""
        self.require()
        dev = os.stat(self.root).st_dev
        for name in [*self.config.folders, HOLD, WORKING, *DONE_STATES, NOTICES, JOBS]:
            path = self.root / name
            try:
                other = os.stat(path).st_dev
            except FileNotFoundError:
                continue
            if other != dev:
                raise QueueError(f"{path} is on a different file system from {self.root}; a "
                                 f"claim is an atomic rename, so the whole queue must be on "
                                 f"one file system")

    def path_of(self, state: str, folder: str, relpath: str) -> Path:
        """Where the task ``folder/relpath`` sits in ``state`` (not for ``working``)."""
        if state == PENDING:
            return self.root / folder / relpath
        return self.root / state / folder / relpath

    # --- waiting tasks ---------------------------------------------------------------------

    def scan(self, *, full: bool | None = None) -> Scan:
        """The waiting tasks in scheduling order and the invalid files, without moving any.
        ``full`` forces a per-file check (see :class:`~metaq_py.queue.index.Index`)."""
        return self.index.scan(full=full)

    def pending(self) -> list[Task]:
        """The waiting tasks in scheduling order: folder order from ``metaq.yaml``, then
        higher ``PRIORITY``, then earlier original submit time (with ``order: largest-first``,
        more nodes before the submit time; see :func:`~metaq_py.queue.index.order_key`). Invalid or
        untrusted files found on the way are moved to ``rejected/`` with their reason, once
        they have not changed for :data:`SETTLE` seconds (a file being copied in by hand is
        half-written for a moment)."""
        return list(self.settled_scan().tasks)

    def settled_scan(self) -> Scan:
        """A scan, after rejecting the invalid files it found that have settled (see
        :meth:`pending`)."""
        scan = self.index.scan()
        now = self.clock.now()
        for bad in scan.invalid:
            try:
                st = os.lstat(bad.path)
            except OSError:
                continue  # gone already
            if now - st.st_mtime < SETTLE or os.path.isdir(bad.path):
                continue
            reason = bad.reason
            if bad.content:
                # The scan may have seen the file half-written; judge it as it is now.
                fresh = self._problem(bad.path)
                if fresh is None:
                    self.index.forget(bad.path)
                    continue
                reason = fresh
            self.reject(bad.path, reason)
        return scan

    def _problem(self, path: Path) -> str | None:
        """What is wrong with the task file at ``path`` right now, or ``None``."""
        error = self.judge(path).error
        return None if error is None else str(error)

    def judge(self, path: str | os.PathLike[str]) -> Verdict:
        """Judge the task file at ``path`` as this queue runs it: readable, trusted, parsed
        and admitted (see :func:`~metaq_py.queue.judge.judge`)."""
        return judge(path, root=self.root, config=self.config, trust=self._trust)

    # --- claims ----------------------------------------------------------------------------

    def job_dir(self, jobid: str) -> Path:
        """``jobs/<jobid>/``: the logs and events of one batch job."""
        return self.root / JOBS / _safe_name(jobid, "job id")

    def events(self, jobid: str) -> EventLog:
        """The event log of batch job ``jobid``."""
        return EventLog(self.job_dir(jobid) / "events.jsonl", clock=self.clock)

    def claim(self, task: Task, *, machine: str, jobid: str, host: str | None = None,
              pid: int | None = None) -> Claim | None:
        """Take ``task`` for batch job ``jobid`` on ``machine``: one atomic rename into
        ``working/<machine>/<jobid>/``. Returns ``None`` when another job took it first (or it
        was removed). The returned claim's spec is read again from the claimed file, since
        that file is what will run; if it no longer parses it is rejected and ``None``
        returned."""
        base = self._claim_folders.get((machine, jobid, task.folder))
        if base is None:
            base = self.root / WORKING / _safe_name(machine, "machine name") / \
                _safe_name(jobid, "job id") / task.folder
            self._claim_folders[machine, jobid, task.folder] = base
        dst = _free_name(base / task.relpath)
        dst.parent.mkdir(parents=True, exist_ok=True)
        now = self.clock.now()
        host = host or socket.gethostname()
        pid = pid if pid is not None else os.getpid()
        # The lease is written before the rename, so a claimed task always has one.
        spares = self._lease_files.get((machine, jobid))
        if spares is None:
            spares = self._lease_files[machine, jobid] = LeaseFiles(self.root / WORKING /
                                                                    machine / jobid)
        write_lease(dst, machine=machine, jobid=jobid, folder=task.folder, relpath=task.relpath,
                    host=host, pid=pid, start=now, attempts=task.attempts, submit=task.submit,
                    spares=spares)
        folder = os.path.dirname(task.file)
        before = _stat_or_none(folder)
        try:
            os.rename(task.file, dst)
        except FileNotFoundError:
            lease_path(dst).unlink(missing_ok=True)
            return None
        except OSError as e:
            lease_path(dst).unlink(missing_ok=True)
            if e.errno == errno.EXDEV:
                raise QueueError(f"cannot claim {task.path}: working/ is on another file "
                                 f"system; keep the whole queue on one") from None
            raise
        recorded = _rename_quietly(record_path(task.path), record_path(dst))
        after = _stat_or_none(folder)
        if before is not None and after is not None:
            self.index.claimed(task, before, after)  # no relisting of the folder for this
        verdict = self.judge(dst)
        spec = verdict.spec
        if spec is None:
            lease_path(dst).unlink(missing_ok=True)
            self._store(dst, self.path_of(REJECTED, task.folder, task.relpath),
                        reason=str(verdict.error))
            return None
        return Claim(machine=machine, jobid=jobid, folder=task.folder, relpath=task.relpath,
                     path=dst, host=host, pid=pid, start=now, heartbeat=now,
                     attempts=task.attempts, submit=task.submit, spec=spec, recorded=recorded)

    def heartbeat(self, claim: Claim) -> bool:
        """Renew the lease. ``False`` means the claim is gone (reclaimed by another job as
        stale, or cancelled and moved): the runner must stop the task."""
        try:
            os.utime(claim.lease)
        except FileNotFoundError:
            return False
        return os.path.lexists(claim.path)

    def cancel_requested(self, claim: Claim) -> bool:
        """Whether someone ran ``metaq cancel`` on this running task."""
        return os.path.lexists(_companion(claim.path, CANCEL_SUFFIX))

    def cancelled(self, claim: Claim) -> Moved | None:
        """Move a running task that ``metaq cancel`` asked to stop, once its job has stopped
        it, to ``cancelled/`` with the request as its reason. ``None``: the claim was gone."""
        try:
            why = _companion(claim.path, CANCEL_SUFFIX).read_text(encoding="utf-8").strip()
        except OSError:
            why = "cancelled"
        return self._end(claim, CANCELLED, event="cancelled", reason=why or "cancelled")

    def finish(self, claim: Claim, *, exit_code: int, reason: str | None = None) -> Moved | None:
        """Record the end of a run. Exit code 0 goes to ``finished/``. Otherwise the task goes
        back to its folder while it has retries left (``RETRIES``, or the queue's default),
        and else to ``failed/`` with a ``.reason`` file. ``None``: the claim was already gone.
        """
        if exit_code == 0:
            return self._end(claim, FINISHED, event="finished", exit_code=0, reason=reason)
        host = claim.host or "an unknown host"
        what = f"exited with code {exit_code} in job {claim.jobid} on {host}"
        if reason:
            what += f" ({reason})"
        retries = self.config.defaults.retries
        if claim.spec is not None and claim.spec.retries is not None:
            retries = claim.spec.retries
        attempts = claim.attempts + 1
        if attempts <= retries and attempts < self.config.caps.attempts:
            return self._back(claim, attempts=attempts, event="failed", reason=what,
                              exit_code=exit_code)
        note = f"{what}; gave up after {attempts} run{'s' if attempts > 1 else ''}"
        return self._end(claim, FAILED, event="failed", exit_code=exit_code, reason=note,
                         attempts=attempts)

    def requeue(self, claim: Claim, *, reason: str, count_attempt: bool = True) -> Moved | None:
        """Put a claimed task back in its folder under its own relative path, keeping its
        original submit time (so it keeps its place). ``count_attempt=False`` is for a
        preemption, which is not the task's fault. A task whose unsuccessful runs reach
        ``caps.attempts`` goes to ``failed/`` instead. ``None``: the claim was already gone."""
        attempts = claim.attempts + (1 if count_attempt else 0)
        if count_attempt and attempts >= self.config.caps.attempts:
            note = f"{reason}; gave up after {attempts} unsuccessful runs (caps.attempts)"
            return self._end(claim, FAILED, event="requeued", reason=note, attempts=attempts)
        return self._back(claim, attempts=attempts, event="requeued", reason=reason)

    def leases(self, *, machine: str | None = None, jobid: str | None = None,
               specs: bool = False) -> list[Claim]:
        """Every claimed task (optionally of one machine or job) with its lease. With
        ``specs``, each claim's script is parsed (``spec`` stays ``None`` if it fails)."""
        out: list[Claim] = []
        base = self.root / WORKING
        for m in _subdirs(base) if machine is None else [machine]:
            for j in _subdirs(base / m) if jobid is None else [jobid]:
                for folder in _subdirs(base / m / j):
                    for rel, path in _files(base / m / j / folder):
                        out.append(self._claim_at(m, j, folder, rel, path, specs))
        return out

    def _claim_at(self, machine: str, jobid: str, folder: str, rel: str, path: Path,
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

    def stale(self, *, now: float | None = None) -> list[Claim]:
        """Claims whose heartbeat is older than ``stale_after`` (their job is presumed lost)."""
        now = self.clock.now() if now is None else now
        return [c for c in self.leases() if now - c.heartbeat > self.config.stale_after]

    def reclaim(self, claim: Claim, *, reason: str) -> Moved | None:
        """Take back a claim whose job is dead or whose lease is stale: the task returns to its
        folder with its attempt count raised, and the dead job's event log says so."""
        moved = self.requeue(claim, reason=reason, count_attempt=True)
        if moved is not None:
            self.events(claim.jobid).append("reclaimed", task=claim.id, reason=reason,
                                            to=moved.state, by=socket.gethostname())
        return moved

    def tidy_job(self, *, machine: str, jobid: str) -> None:
        """Remove the spare lease files and the empty folders a finished batch job leaves in
        ``working/``."""
        spares = self._lease_files.pop((machine, jobid), None)
        if spares is not None:
            spares.clear()
        top = self.root / WORKING / machine / jobid
        for dirpath, _dirs, _files in sorted(os.walk(top), key=lambda w: -len(w[0])):
            with contextlib.suppress(OSError):
                os.rmdir(dirpath)

    def log_path(self, claim: Claim | Task) -> Path:
        """Where a task's output goes: its ``LOG``, or else
        ``jobs/<jobid>/logs/<folder>/<relpath>.log`` (unique per task identity). A claim is
        needed for the default, since it names the job."""
        spec = claim.spec
        if spec is not None and spec.log is not None:
            resolved = resolve_log(spec.log, root=self.root, config=self.config)
            if resolved is None:
                raise TaskError(spec.path, spec.line_of("LOG"),
                                f"LOG {spec.log} is outside the queue's log roots")
            return resolved
        if not isinstance(claim, Claim):
            raise QueueError(f"{claim.id} has no LOG; its log path depends on the job that "
                             f"claims it")
        return self.job_dir(claim.jobid) / "logs" / claim.folder / f"{claim.relpath}.log"

    # --- rejection and people's commands ---------------------------------------------------

    def reject(self, path: str | os.PathLike[str], reason: str) -> Path | None:
        """Move the task file at ``path`` (in a task folder) to ``rejected/`` and write
        ``reason`` beside it. ``None`` if it vanished first (someone else moved it)."""
        folder, rel = self._identity(Path(path))
        moved = self._store(Path(path), self.path_of(REJECTED, folder, rel), reason=reason)
        return moved

    def submit(self, script: str | os.PathLike[str], *, folder: str | None = None,
               sub: str | None = None, hold: bool = False) -> Path:
        """Validate ``script`` and copy it into the queue: into ``folder`` (default ``todo``,
        or the last task folder), below sub-folder ``sub``, or into ``hold/`` with ``hold``.
        The copy is written under a hidden temporary name in the same folder and then linked
        to its real name, so no scan ever sees half a file and an existing task is never
        overwritten. Raises :class:`TaskError` or :class:`QueueError`; nothing is written then.
        """
        self.require()
        src = Path(script)
        data, head = _read_whole(src)
        judge(src, root=self.root, config=self.config, head=head).accepted()
        folder = folder or self.default_folder
        if folder not in self.config.folders:
            raise QueueError(f"{folder!r} is not a task folder of this queue; use one of "
                             f"{', '.join(self.config.folders)}")
        rel = _relpath(sub, src.name)
        where = self.locate(folder, rel, states=(PENDING, HOLD, WORKING))
        if where is not None:
            raise QueueError(f"a task {folder}/{rel} is already in the queue ({where.state}: "
                             f"{where.path}); use --folder or another name")
        dst = self.path_of(HOLD if hold else PENDING, folder, rel)
        dst.parent.mkdir(parents=True, exist_ok=True)
        mode = (os.stat(src).st_mode & 0o755) | 0o700
        tmp = dst.with_name(f".{dst.name}.{secrets.token_hex(4)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        try:
            write_all(fd, data)
            os.fsync(fd)
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
        try:
            os.link(tmp, dst)
        except FileExistsError:
            raise QueueError(f"a task {folder}/{rel} appeared at {dst} meanwhile; nothing was "
                             f"written") from None
        finally:
            tmp.unlink(missing_ok=True)
        return dst

    @property
    def default_folder(self) -> str:
        """Where ``submit`` puts a task by default: ``todo`` if it is a task folder, else the
        last (least urgent) task folder."""
        folders = self.config.folders
        return "todo" if "todo" in folders else folders[-1]

    def hold(self, ref: str) -> Moved:
        """Park a waiting task in ``hold/``."""
        e = self.find(ref, states=(PENDING,))
        return self._relocate(e, self.path_of(HOLD, e.folder, e.relpath), HOLD)

    def release(self, ref: str) -> Moved:
        """Let a held task wait in its folder again."""
        e = self.find(ref, states=(HOLD,))
        return self._relocate(e, self.path_of(PENDING, e.folder, e.relpath), e.folder)

    def cancel(self, ref: str) -> Moved:
        """Cancel a waiting or held task (to ``cancelled/``, with a reason), or ask the job
        running a claimed task to stop it (``Moved.state`` is then ``working``)."""
        e = self.find(ref, states=(PENDING, HOLD, WORKING))
        who = _user()
        when = time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(self.clock.now()))
        reason = f"cancelled by {who} at {when}"
        if e.state == WORKING:
            _companion(e.path, CANCEL_SUFFIX).write_text(reason + "\n", encoding="utf-8")
            return Moved(WORKING, e.path)
        moved = self._store(e.path, self.path_of(CANCELLED, e.folder, e.relpath), reason=reason)
        if moved is None:
            raise QueueError(f"{e.id} was moved by someone else meanwhile; nothing was done")
        return Moved(CANCELLED, moved)

    def retry(self, ref: str) -> Moved:
        """Send a failed, rejected or cancelled task back to its folder with its attempt count
        reset; it is checked again first, and stays where it is if still invalid."""
        e = self.find(ref, states=(FAILED, REJECTED, CANCELLED))
        # Trust is left to the scan, as for any task put in a folder.
        judge(e.path, root=self.root, config=self.config).accepted()
        rec = self._record(e.path)
        rec = replace(rec, attempts=0,
                      history=(*rec.history, self._event("retried", by=_user())))
        dst = self.path_of(PENDING, e.folder, e.relpath)
        moved = self._store(e.path, dst, record=rec)
        if moved is None:
            raise QueueError(f"{e.id} was moved by someone else meanwhile; nothing was done")
        return Moved(e.folder, moved)

    # --- finding and listing ---------------------------------------------------------------

    def locate(self, folder: str, relpath: str, *, states: tuple[str, ...] = STATES
               ) -> Entry | None:
        """Where the task ``folder/relpath`` is now, looking in ``states`` in that order."""
        for state in states:
            if state == WORKING:
                for claim in self.leases():
                    if claim.folder == folder and claim.relpath == relpath:
                        return Entry(WORKING, folder, relpath, claim.path, None,
                                     machine=claim.machine, jobid=claim.jobid)
                continue
            path = self.path_of(state, folder, relpath)
            if os.path.lexists(path) and not path.is_dir():
                return Entry(state, folder, relpath, path, None)
        return None

    def find(self, ref: str, *, states: tuple[str, ...] = STATES) -> Entry:
        """The task a person means by ``ref``: its identity ``<folder>/<relpath>`` (such as
        ``todo/sub/run.sh``), or a path to its file anywhere in the queue."""
        folder, rel = self._parse_ref(ref)
        e = self.locate(folder, rel, states=states)
        if e is None:
            wanted = " or ".join(_STATE_WORDS[s] for s in states)
            anywhere = self.locate(folder, rel)
            where = (f"; it is {_STATE_WORDS[anywhere.state]}" if anywhere
                     else "; 'metaq ls' lists the tasks")
            raise QueueError(f"no task {folder}/{rel} is {wanted}{where}")
        return e

    def _parse_ref(self, ref: str) -> tuple[str, str]:
        parts = Path(ref).parts
        if Path(ref).is_absolute() or os.path.lexists(ref):
            with contextlib.suppress(ValueError):
                parts = Path(os.path.abspath(ref)).relative_to(self.root.absolute()).parts
        if parts and parts[0] in (HOLD, *DONE_STATES):
            parts = parts[1:]
        elif parts and parts[0] == WORKING:
            parts = parts[3:]
        if len(parts) < 2 or parts[0] not in self.config.folders or ".." in parts:
            raise QueueError(f"{ref!r} does not name a task; give <folder>/<path> such as "
                             f"todo/run.sh, with a folder among {', '.join(self.config.folders)}")
        return parts[0], "/".join(parts[1:])

    def entries(self, state: str, *, specs: bool = True) -> Iterator[Entry]:
        """The tasks in ``state`` (one of :data:`STATES`). For ``pending`` this includes
        invalid files, with their reason and no spec. Read-only."""
        if state == PENDING:
            scan = self.scan()
            for t in scan.tasks:
                yield Entry(PENDING, t.folder, t.relpath, t.path, t.spec, attempts=t.attempts)
            for bad in scan.invalid:
                yield Entry(PENDING, bad.folder, bad.relpath, bad.path, None, reason=bad.reason)
            return
        if state == WORKING:
            for c in self.leases(specs=specs):
                yield Entry(WORKING, c.folder, c.relpath, c.path, c.spec, machine=c.machine,
                            jobid=c.jobid, attempts=c.attempts)
            return
        if state not in STATES:
            raise QueueError(f"{state!r} is not a state; use one of {', '.join(STATES)}")
        base = self.root / state
        for folder in _subdirs(base):
            for rel, path in _files(base / folder):
                spec = judge(path).spec if specs else None
                reason = None
                if state != HOLD and state != FINISHED:
                    reason = _read_reason(path)
                rec = read_record(path, _inode(path))
                yield Entry(state, folder, rel, path, spec, reason=reason,
                            attempts=rec.attempts if rec else 0)

    def watcher(self, *, interval: float | None = None) -> QueueWatcher:
        """A watcher that wakes on changes in the task folders and notices."""
        folders = [self.root / f for f in (*self.config.folders, NOTICES)]
        return QueueWatcher(folders, interval=interval or self.config.poll_interval)

    # --- moving ----------------------------------------------------------------------------

    def _identity(self, path: Path) -> tuple[str, str]:
        rel = Path(os.path.abspath(path)).relative_to(self.root.absolute()).parts
        if rel and rel[0] in (HOLD, *DONE_STATES):
            rel = rel[1:]
        elif rel and rel[0] == WORKING:
            rel = rel[3:]
        return rel[0], "/".join(rel[1:])

    def _record(self, path: Path) -> TaskRecord:
        inode = _inode(path)
        rec = read_record(path, inode)
        if rec is None:
            try:
                submit = os.lstat(path).st_mtime
            except OSError:
                submit = self.clock.now()
            rec = TaskRecord(inode=inode, submit=submit)
        return rec

    def _relocate(self, e: Entry, dst: Path, state: str) -> Moved:
        moved = self._store(e.path, dst)
        if moved is None:
            raise QueueError(f"{e.id} was moved by someone else meanwhile; nothing was done")
        return Moved(state, moved)

    def _store(self, src: Path, dst: Path, *, reason: str | None = None,
               record: TaskRecord | None = None, claim: Claim | None = None) -> Path | None:
        """Move the task at ``src`` to ``dst`` (or a free variant of it) with its companions:
        the record (``record`` if given, else the old one moves as it is) and, with
        ``reason``, a ``.reason`` file. The old lease, reason and cancel mark are removed (the
        lease of a ``claim`` made by this object is kept for reuse, see
        :class:`~metaq_py.queue.lease.LeaseFiles`). ``None`` if ``src`` vanished first: then nothing
        was changed."""
        dst = _free_name(dst)
        dst.parent.mkdir(parents=True, exist_ok=True)
        staged = None
        if record is not None:
            # Only the mover that wins the rename publishes its record.
            staged = stage_record(dst, record, spares=self.spares)
        try:
            os.rename(src, dst)
        except FileNotFoundError:
            if staged is not None:
                staged.unlink(missing_ok=True)
            return None
        if staged is not None:
            publish_record(staged, dst)
            record_path(src).unlink(missing_ok=True)
        else:
            _rename_quietly(record_path(src), record_path(dst))
        if reason is not None:
            Path(str(dst) + REASON_SUFFIX).write_text(reason.rstrip() + "\n", encoding="utf-8")
        for suffix in (REASON_SUFFIX,):
            Path(str(src) + suffix).unlink(missing_ok=True)
        spares = None if claim is None else self._lease_files.get((claim.machine, claim.jobid))
        if spares is not None:
            spares.retire(lease_path(src))
        else:
            lease_path(src).unlink(missing_ok=True)
        _companion(src, CANCEL_SUFFIX).unlink(missing_ok=True)
        return dst

    def _history(self, claim: Claim, event: str, **fields: object) -> TaskRecord:
        if claim.recorded:
            rec = self._record(claim.path)
        else:  # it never ran before, and only the queue writes records: there is none
            rec = TaskRecord(inode=_inode(claim.path), submit=claim.submit)
        entry = self._event(event, job=claim.jobid, host=claim.host, **fields)
        return replace(rec, submit=claim.submit, history=(*rec.history, entry))

    def _back(self, claim: Claim, *, attempts: int, event: str, reason: str,
              exit_code: int | None = None) -> Moved | None:
        rec = replace(self._history(claim, event, reason=reason, exit_code=exit_code),
                      attempts=attempts)
        moved = self._store(claim.path, self.path_of(PENDING, claim.folder, claim.relpath),
                            record=rec, claim=claim)
        if moved is None:
            return None
        # Where timestamps are coarse (Lustre keeps whole seconds), a claim this object made
        # from the same folder in the same tick leaves its mtime and ctime as the index last
        # recorded them (see Index.claimed), and the next scan would not see the task back.
        # So the folders on its way, down from the task folder, are listed again.
        top = self.root / claim.folder
        for below in (moved, *moved.parents):
            if below == top:
                break
            self.index.forget(below)
        return Moved(claim.folder, moved)

    def _end(self, claim: Claim, state: str, *, event: str, reason: str | None,
             exit_code: int | None = None, attempts: int | None = None) -> Moved | None:
        rec = self._history(claim, event, reason=reason, exit_code=exit_code)
        if attempts is not None:
            rec = replace(rec, attempts=attempts)
        note = reason if state != FINISHED else None
        moved = self._store(claim.path, self.path_of(state, claim.folder, claim.relpath),
                            record=rec, reason=note, claim=claim)
        return None if moved is None else Moved(state, moved)

    def _event(self, event: str, **fields: object) -> dict:
        """One history entry, stamped now; fields that are ``None`` are left out."""
        return {"time": self.clock.now(), "event": event,
                **{k: v for k, v in fields.items() if v is not None}}


# --- helpers -------------------------------------------------------------------------------


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def _inode(path: Path) -> int:
    try:
        return os.lstat(path).st_ino
    except OSError:
        return -1


def _stat_or_none(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


def _companion(task: Path, suffix: str) -> Path:
    return task.with_name(f".{task.name}{suffix}")


def _rename_quietly(src: Path, dst: Path) -> bool:
    """Rename ``src`` to ``dst`` if it exists; whether it did."""
    try:
        os.rename(src, dst)
    except FileNotFoundError:
        return False
    return True


def _free_name(path: Path) -> Path:
    """``path`` if nothing is there, else ``path.1``, ``path.2``, ...: a move never overwrites
    another task (rename would silently replace it)."""
    if not os.path.lexists(path):
        return path
    n = 1
    while os.path.lexists(f"{path}.{n}"):
        n += 1
    return Path(f"{path}.{n}")


def _safe_name(name: str, what: str) -> str:
    if not name or "/" in name or name.startswith(".") or "\0" in name:
        raise QueueError(f"{name!r} cannot be a {what}; it must be a plain name without / "
                         f"that does not start with a dot")
    return name


def _relpath(sub: str | None, name: str) -> str:
    parts = [p for p in Path(sub).parts] if sub else []
    if sub and (Path(sub).is_absolute() or any(p in ("..", ".") or p.startswith(".")
                                               for p in parts)):
        raise QueueError(f"--folder {sub!r} must be a relative path inside the task folder, "
                         f"without hidden parts or ..")
    if name.startswith("."):
        raise QueueError(f"{name!r} is a hidden name, which the queue never runs; rename it")
    return "/".join([*parts, name])


def _read_whole(src: Path) -> tuple[bytes, Head]:
    """The whole script, with the same checks (and messages) as a task in the queue, and its
    header as :func:`~metaq_py.directives.read_head` read it."""
    head = read_head(src)
    data, truncated, _ = head
    if not truncated:
        return data, head
    try:
        with open(src, "rb") as f:
            whole = f.read()
    except OSError as e:
        raise TaskError(str(src), None, f"the file cannot be read ({e.strerror})") from None
    if not whole.startswith(data):
        raise TaskError(str(src), None, "the file changed while being read; submit it again")
    return whole, head


def _subdirs(path: Path) -> list[str]:
    try:
        with os.scandir(path) as it:
            return sorted(e.name for e in it if e.name[0] != "." and e.is_dir())
    except (FileNotFoundError, NotADirectoryError):
        return []


def _files(top: Path) -> Iterator[tuple[str, Path]]:
    """(relpath, path) of every task file below ``top``: hidden names and ``.reason`` files
    that sit beside their task are skipped."""
    stack = [(str(top), "")]
    while stack:
        folder, prefix = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError):
            continue
        names = {e.name for e in entries}
        for e in entries:
            if e.name[0] == ".":
                continue
            if e.name.endswith(REASON_SUFFIX) and e.name[: -len(REASON_SUFFIX)] in names:
                continue
            if e.is_dir(follow_symlinks=False):
                stack.append((e.path, prefix + e.name + "/"))
            else:
                yield prefix + e.name, Path(e.path)


def _read_reason(path: Path) -> str | None:
    try:
        return Path(str(path) + REASON_SUFFIX).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None

