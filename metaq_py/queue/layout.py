"""The queue's folders: where a task sits in each state, and where a job's files go.

Layout under the queue root (``docs/user-guide.md`` has the full picture)::

    metaq.yaml                    settings (optional)
    priority/ todo/               task folders, scanned in this order, recursively
    hold/<folder>/<relpath>       parked tasks (a file put into hold/ by hand, as in
                                  METAQ, is a parked task of the default task folder)
    working/<machine>/<jobid>/<name>   claimed tasks under their file name, as METAQ puts
                                  them, each with a lease that names its folder and relpath
    working/<machine>/<jobid>/<n>/<name>   a claimed task whose name the job already holds
    finished/<folder>/<relpath>   success
    failed/<folder>/<relpath>     failure, with <relpath>.reason beside it
    rejected/<folder>/<relpath>   invalid or untrusted scripts, with .reason
    cancelled/<folder>/<relpath>  cancelled by a person, with .reason
    notices/                      on-demand advance notices
    jobs/<jobid>/                 a batch job's logs and events.jsonl

A task's identity is ``<folder>/<relpath>``, the same in every state, so two ``run.sh`` in
different sub-folders never collide. In every state but ``working/`` it is the task's path
below the state's folder; a claimed task's is kept in its lease
(:mod:`metaq_py.queue.lease`), and :meth:`Layout.identity_of` reads it from there.

Here are the names of the states (:data:`STATES`) and :class:`Layout`: making a queue
(``metaq init``), checking it is whole and on one file system, and the paths of tasks, job
folders, event logs and task logs. It moves nothing: the moves a batch job's runner makes are
:class:`~metaq_py.queue.store.Queue` (a ``Layout``), the people's commands
:class:`~metaq_py.queue.submit.Submitter` (on a ``Layout`` alone) and
:class:`~metaq_py.queue.admin.QueueAdmin`.
"""

from __future__ import annotations

import grp
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from metaq_py.clock import Clock, WallClock
from metaq_py.errors import QueueError, TaskError
from metaq_py.queue.disk.fileio import create_new
from metaq_py.queue.disk.folders import make_folders
from metaq_py.queue.index import Task
from metaq_py.queue.lease import Claim, claim_identity, read_claims
from metaq_py.queue.settings.admission import log_refusal, resolve_log
from metaq_py.queue.settings.config import CONFIG_NAME, QueueConfig, load_config

if TYPE_CHECKING:
    from metaq_py.queue.eventlog import EventLog
    from metaq_py.queue.watcher import QueueWatcher

__all__ = [
    "CANCELLED",
    "DONE_STATES",
    "FAILED",
    "FILE_KINDS",
    "FINISHED",
    "HOLD",
    "JOBS",
    "NOTICES",
    "PENDING",
    "REJECTED",
    "SETTINGS_MODE",
    "SHARED_MODE",
    "STATES",
    "WORKING",
    "FileKind",
    "Layout",
    "safe_name",
]

HOLD, WORKING, NOTICES, JOBS = "hold", "working", "notices", "jobs"
FINISHED, FAILED, REJECTED, CANCELLED = "finished", "failed", "rejected", "cancelled"
DONE_STATES = (FINISHED, FAILED, REJECTED, CANCELLED)
PENDING = "pending"
STATES = (PENDING, HOLD, WORKING, *DONE_STATES)
"""Every state a task can be in, in the order a task passes through them."""


SHARED_MODE = 0o2770
"""The mode of a group queue's folders (``metaq init --group``): the group writes, its files
stay the group's (setgid), others see nothing."""

SETTINGS_MODE = 0o644
"""The mode of ``metaq.yaml``, whatever the umask: written by its owner alone (see
:func:`~metaq_py.queue.settings.config.settings_problem`)."""

@dataclass(frozen=True, slots=True)
class FileKind:
    """One kind of file the queue's readers open: ``name`` (one word), ``path`` (relative to
    the queue root, with ``{folder}``, ``{task}`` (a task's name), ``{array}``, ``{machine}``,
    ``{jobid}`` and ``{writer}`` standing for names) and the commands that read it
    (``readers``: ``run``, ``status``, ``doctor``, ``report``, ``alloc``). Every reader
    opens each through the one safe reader (:mod:`metaq_py.queue.disk.fileio`): a FIFO, a
    link, a folder, a huge file or garbage at any of them is refused or skipped, never
    followed, never waited on, never read whole."""

    name: str
    path: str
    readers: tuple[str, ...]


FILE_KINDS: tuple[FileKind, ...] = (
    FileKind("settings", "metaq.yaml", ("run", "status", "doctor", "report", "alloc")),
    FileKind("task", "{folder}/{task}", ("run", "status", "doctor", "alloc")),
    FileKind("held-task", "hold/{folder}/{task}", ("status", "doctor")),
    FileKind("logbook", "{folder}/.{task}.record", ("run", "status")),
    FileKind("claimed-task", "working/{machine}/{jobid}/{task}", ("run", "status", "doctor")),
    FileKind("lease", "working/{machine}/{jobid}/.{task}.lease", ("run", "status", "doctor")),
    FileKind("cancel", "working/{machine}/{jobid}/.{task}.cancel", ("run", "status")),
    FileKind("ended", "working/{machine}/{jobid}/.{task}.ended-0", ("run",)),
    FileKind("done-task", "finished/{folder}/{task}", ("status", "doctor")),
    FileKind("reason", "failed/{folder}/{task}.reason", ("status", "doctor")),
    FileKind("array", "{folder}/{array}/.array", ("run", "status", "report")),
    FileKind("array-script", "{folder}/{array}/.script", ("run",)),
    FileKind("ended-array", "finished/{folder}/{array}/.array", ("run", "report")),
    FileKind("ended-array-script", "finished/{folder}/{array}/.script", ("run",)),
    FileKind("notice", "notices/{task}.json", ("run", "status", "doctor")),
    FileKind("event-log", "jobs/{jobid}/events.jsonl", ("run", "status", "report")),
    FileKind("stream", "jobs/{jobid}/streams/1-1.frames", ("doctor",)),
    FileKind("tally", "jobs/.summary/tally/{writer}.000001.jsonl", ("status",)),
    FileKind("tally-base", "jobs/.summary/base.json", ("status",)),
    FileKind("tally-lock", "jobs/.summary/base.lock", ("run", "status")),
    FileKind("status-cache", "jobs/.summary/joblogs.json", ("status",)),
    FileKind("alloc-log", "alloc/events.jsonl", ("status", "alloc")),
    FileKind("alloc-seen", "alloc/seen.json", ("status", "alloc")),
    FileKind("alloc-lock", "alloc/.lock", ("alloc",)),
)
"""Every kind of file in a queue that a command reads, in one list: the hostile tests plant
a FIFO, a link, a folder, a huge file and garbage at each (``tests/hostile``), so a new kind
cannot be added without being planted."""


_L = TypeVar("_L", bound="Layout")


class Layout:
    """The folders of one queue (see the module's docstring) and its settings, read once from
    ``metaq.yaml``: where a task sits in each state, where a job's logs and events go, and
    the leases of claimed tasks as anyone may read them. Cheap to create; nothing is written
    unless asked to."""

    def __init__(self, root: str | os.PathLike[str], *, clock: Clock | None = None) -> None:
        self.root = Path(root)
        self.clock: Clock = clock if clock is not None else WallClock()
        """Every time the queue reads (settling, claims, staleness, history) comes from it."""
        self.config: QueueConfig = load_config(self.root)

    # --- creation and checks ---------------------------------------------------------------

    @classmethod
    def init(cls: type[_L], root: str | os.PathLike[str], *, group: str | None = None,
             clock: Clock | None = None) -> _L:
        """Create the queue layout at ``root`` (existing parts are kept) and a commented
        ``metaq.yaml``. With ``group``, every folder belongs to that group and is setgid and
        group-writable, so files collaborators create there belong to the group too."""
        root = Path(root)
        if os.path.lexists(root) and not root.is_dir():
            raise QueueError(f"{root} exists and is not a folder; give a new or existing "
                             f"folder to make a queue in")
        gid = None
        if group is not None:
            try:
                gid = grp.getgrnam(group).gr_gid if not group.isdigit() else int(group)
            except KeyError:
                raise QueueError(f"there is no group {group!r} on this system") from None
        config_file = root / CONFIG_NAME
        try:
            root.mkdir(parents=True, exist_ok=True)
            existing = load_config(root) if os.path.lexists(config_file) else QueueConfig()
            folders = [*existing.folders, HOLD, WORKING, *DONE_STATES, NOTICES, JOBS]
            for name in folders:
                make_folders(root, root / name)
            if not os.path.lexists(config_file):
                from metaq_py.queue.settings.template import TEMPLATE  # only init writes it

                create_new(config_file, TEMPLATE.format(group=group if group else "null")
                           .encode())
        except OSError as e:
            raise QueueError(f"cannot make a queue at {root}: {e.strerror or e}") from None
        if gid is not None:
            for path in [root, *(root / n for n in folders)]:
                os.chown(path, -1, gid)
                path.chmod(SHARED_MODE)
            # The sticky bit on the root and on jobs/: a member may add there, but never
            # rename or remove what another made (metaq.yaml, the state folders, a job's
            # folder), so no path the runner uses can be swapped for one of theirs.
            for path in (root, root / JOBS):
                path.chmod(SHARED_MODE | stat.S_ISVTX)
            os.chown(config_file, -1, gid)
        config_file.chmod(SETTINGS_MODE)  # only its owner decides trust and commands
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

    # --- where things are ------------------------------------------------------------------

    def path_of(self, state: str, folder: str, relpath: str) -> Path:
        """Where the task ``folder/relpath`` sits in ``state`` (not for ``working``)."""
        if state == PENDING:
            return self.root / folder / relpath
        return self.root / state / folder / relpath

    def identity_of(self, path: Path) -> tuple[str, str]:
        """The identity (folder, relpath) of the task file at ``path``, in any state: its
        path below the state's folder, or for a claimed task what its lease says (see
        :func:`~metaq_py.queue.lease.claim_identity`)."""
        full = Path(os.path.abspath(path))
        rel = full.relative_to(self.root.absolute()).parts
        if rel and rel[0] == HOLD:
            return self.held_identity("/".join(rel[1:]))
        if rel and rel[0] in DONE_STATES:
            rel = rel[1:]
        elif rel and rel[0] == WORKING and len(rel) > 3:
            return claim_identity(full, "/".join(rel[3:]), self.config.folders)
        return rel[0], "/".join(rel[1:])

    def held_identity(self, rel: str) -> tuple[str, str]:
        """The identity of the held task at ``hold/<rel>``: ``hold/<folder>/<relpath>`` as
        ``metaq hold`` parks it, or else, for a file a person put into ``hold/`` by hand as in
        METAQ (``hold/<name>``, ``hold/<sub>/<name>``), the default task folder and ``rel``,
        which is where ``metaq release`` sends it."""
        parts = rel.split("/")
        if len(parts) >= 2 and parts[0] in self.config.folders:
            return parts[0], "/".join(parts[1:])
        return self.config.default_folder, rel

    def held_paths(self, folder: str, relpath: str) -> list[Path]:
        """Where the task ``folder/relpath`` may be held: ``hold/<folder>/<relpath>``, and for
        the default task folder METAQ's ``hold/<relpath>`` too (see :meth:`held_identity`)."""
        paths = [self.root / HOLD / folder / relpath]
        if folder == self.config.default_folder and \
                relpath.split("/", 1)[0] not in self.config.folders:
            paths.append(self.root / HOLD / relpath)
        return paths

    def job_dir(self, jobid: str) -> Path:
        """``jobs/<jobid>/``: the logs and events of one batch job."""
        return self.root / JOBS / safe_name(jobid, "job id")

    def events(self, jobid: str) -> EventLog:
        """The event log of batch job ``jobid``."""
        from metaq_py.queue.eventlog import EventLog  # submit and status write no event
        return EventLog(self.job_dir(jobid) / "events.jsonl", within=self.root, clock=self.clock)

    def log_path(self, claim: Claim | Task) -> Path:
        """Where a task's output goes: its ``LOG`` (as written, for
        :func:`~metaq_py.queue.disk.logfile.open_log` to walk and check against the task's
        owner), or else ``jobs/<jobid>/logs/<folder>/<relpath>.log`` (unique per task
        identity). A claim is needed for the default, since it names the job."""
        spec = claim.spec
        if spec is not None and spec.log is not None:
            resolved = resolve_log(spec.log, root=self.root, config=self.config)
            if resolved is None:
                raise TaskError(spec.path, spec.line_of("LOG"),
                                log_refusal(spec.log, root=self.root, config=self.config))
            return resolved
        if not isinstance(claim, Claim):
            raise QueueError(f"{claim.id} has no LOG; its log path depends on the job that "
                             f"claims it")
        return self.job_dir(claim.jobid) / "logs" / claim.folder / f"{claim.relpath}.log"

    def watcher(self, *, interval: float | None = None) -> QueueWatcher:
        """A watcher that wakes on changes in the task folders and notices."""
        from metaq_py.queue.watcher import QueueWatcher  # only the runner waits
        folders = [self.root / f for f in (*self.config.folders, NOTICES)]
        return QueueWatcher(folders, interval=interval or self.config.poll_interval)

    # --- leases, read by anyone ------------------------------------------------------------

    def leases(self, *, machine: str | None = None, jobid: str | None = None,
               specs: bool = False) -> list[Claim]:
        """Every claimed task (optionally of one machine or job) with its lease. With
        ``specs``, each claim's script is parsed (``spec`` stays ``None`` if it fails)."""
        return read_claims(self.root / WORKING, folders=self.config.folders, machine=machine,
                           jobid=jobid, specs=specs)

    def stale(self, *, now: float | None = None) -> list[Claim]:
        """Claims whose heartbeat is older than ``stale_after`` (their job is presumed lost)."""
        now = self.clock.now() if now is None else now
        return [c for c in self.leases() if now - c.heartbeat > self.stale_after(c)]

    def stale_after(self, claim: Claim) -> float:
        """How long ``claim``'s lease may go unrenewed before it is lost: what its holder
        wrote in it, so that a runner with another ``metaq.yaml`` (read before or after a
        change) never takes back a live claim; this queue's setting for a lease that does not
        say."""
        return claim.stale_after if claim.stale_after is not None else self.config.stale_after


def safe_name(name: str, what: str) -> str:
    """``name``, if it can be one folder's name under ``working/`` or ``jobs/`` (a machine or a
    job id); else a :class:`QueueError` says why, calling it a ``what``."""
    if not name or "/" in name or name.startswith(".") or "\0" in name:
        raise QueueError(f"{name!r} cannot be a {what}; it must be a plain name without / "
                         f"that does not start with a dot")
    return name
