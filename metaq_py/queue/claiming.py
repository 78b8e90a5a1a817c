"""The queue as a batch job's runner takes tasks from it: scans, claims, heartbeats, and the
one move every state change goes through.

Every move is one ``rename`` within one file system, so a task is always in exactly one place:
two jobs racing for a task both try the rename and exactly one succeeds. Hidden companions
travel with the task (:mod:`metaq_py.queue.disk.folders`): its logbook (attempts, submit time,
history) and, while claimed, its lease.

Here is :class:`ClaimingQueue`, a :class:`~metaq_py.queue.layout.Layout` (the folders, the
states and the paths of things) with the runner's scan (rejecting settled junk), claim,
heartbeat and :meth:`ClaimingQueue.move`. The end of a claim (finish, requeue, reclaim) is
:class:`~metaq_py.queue.store.Queue`'s, built on this one; the people's commands are in
:mod:`metaq_py.queue.admin` and :mod:`metaq_py.queue.submit`.

Nothing here writes unless asked to: a queue on a read-only or half-made queue can still scan
and list (missing folders are empty).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import socket
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from metaq_py.clock import Clock
from metaq_py.errors import QueueError, TaskError
from metaq_py.queue.disk.fileio import name_problem
from metaq_py.queue.disk.folders import CANCEL_SUFFIX, MadeFolders, companion, relative_parts
from metaq_py.queue.index import Index, Invalid, Scan, Task
from metaq_py.queue.judge import Verdict, judge_in_queue
from metaq_py.queue.layout import DONE_STATES, HOLD, REJECTED, WORKING, Layout, safe_name
from metaq_py.queue.lease import Claim, JobFolder, lease_path, write_lease
from metaq_py.queue.logbook import Logbook, LogbookPack, PackedLogbooks, logbook_path
from metaq_py.queue.moves import Pack, move_task, rename_quietly
from metaq_py.queue.settings.trust import Trust

if TYPE_CHECKING:
    from metaq_py.program import Program
    from metaq_py.queue.watcher import OwnMoves

__all__ = ["ClaimingQueue"]

SETTLE = 2.0
"""Seconds an invalid file must stay unchanged before ``pending`` rejects it."""

REJECT_EACH = 64
"""At most this many invalid files are rejected by one scan (a few tens of milliseconds):
100,000 junk files in ``todo/`` delay no decision by the minutes rejecting them takes, and
leave at the pace of the runner's passes."""


class ClaimingQueue(Layout):
    """One queue directory, as a batch job's runner takes tasks from it. Cheap to create; it
    reads ``metaq.yaml`` once. A runner uses :class:`~metaq_py.queue.store.Queue`, which adds
    the end of a claim."""

    def __init__(self, root: str | os.PathLike[str], *, clock: Clock | None = None) -> None:
        super().__init__(root, clock=clock)
        self.index = Index(self.root, self.config, clock=self.clock)
        self._trust = Trust(gid=self.config.gid, uids=self.config.trusted_uids)
        self._jobs: dict[tuple[str, str], JobFolder] = {}
        """The folders of the jobs this object claims for: the places their claims hold (see
        JobFolder)."""
        self._made = MadeFolders(self.root)
        """The folders claims and moves made, known by identity (see MadeFolders)."""
        self._packs: dict[str, LogbookPack] = {}
        """The packs of the logbooks of the tasks this object's jobs made done."""
        self._packed: PackedLogbooks | None = None
        self._trusted: set[tuple[int, int]] = set()
        """Job folders (device, inode) whose way up to the root a claim found trusted."""
        self.own_moves: OwnMoves | None = None
        """Where a claim notes the files it moves out of their task folder, for a watcher
        that should not wake for them (a runner's; see :mod:`metaq_py.queue.watcher`)."""

    @property
    def packed(self) -> PackedLogbooks:
        """The logbooks of done tasks in the batch jobs' packs, read as needed and kept."""
        if self._packed is None:
            self._packed = PackedLogbooks(self.root)
        return self._packed

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
        half-written for a moment), at most :data:`REJECT_EACH` at a time."""
        return list(self.settled_scan().tasks)

    def settled_scan(self) -> Scan:
        """A scan, after rejecting the invalid files it found that have settled (see
        :meth:`pending`)."""
        scan = self.index.scan()
        now = self.clock.now()
        due: dict[str, list[tuple[Invalid, str]]] = {}
        for bad in scan.invalid:
            if sum(map(len, due.values())) >= REJECT_EACH:
                break  # junk never holds up real work: the rest at the next scans
            if now - bad.mtime < SETTLE:
                continue  # changed when it was listed: not settled yet
            try:
                st = os.lstat(bad.file)
            except OSError:
                continue  # gone already
            if now - st.st_mtime < SETTLE or stat.S_ISDIR(st.st_mode):
                continue
            # The scan may have seen the file half-written, or before its chmod: judge it as
            # it is now, never on what was remembered.
            fresh = self._problem(bad.path)
            if fresh is None:
                self.index.forget(bad.path)
                continue
            due.setdefault(os.path.dirname(bad.file), []).append(
                (bad, fresh if bad.content else bad.reason))
        for folder, bads in due.items():
            before = _stat_or_none(folder)
            for bad, why in bads:
                with contextlib.suppress(OSError):  # a full disk: rejected at a later scan
                    self.reject(bad.path, why)
            after = _stat_or_none(folder)
            if before is not None and after is not None:
                # Its own moves only: the folder is not listed again for them.
                self.index.rejected(folder, {b.file for b, _ in bads}, before, after)
        return scan

    def _problem(self, path: Path) -> str | None:
        """What is wrong with the task file at ``path`` right now, or ``None``."""
        error = self.judge(path).error
        return None if error is None else str(error)

    def judge(self, path: str | os.PathLike[str]) -> Verdict:
        """Judge the task file at ``path`` as this queue runs it (see
        :func:`~metaq_py.queue.judge.judge_in_queue`)."""
        return judge_in_queue(path, root=self.root, config=self.config, trust=self._trust)

    def reject(self, path: str | os.PathLike[str], reason: str) -> Path | None:
        """Move the task file at ``path`` (in a task folder) to ``rejected/`` and write
        ``reason`` beside it. ``None`` if it vanished first (someone else moved it)."""
        folder, rel = self.identity_of(Path(path))
        dst = self.path_of(REJECTED, folder, rel)
        if name_problem(dst.name, path=dst) is not None:
            # A name too long to keep (with its .reason) is shortened; the reason keeps it.
            dst = self.root / REJECTED / folder / f"long-name-{_digest(rel)}"
            reason = f"{reason} (it was called {rel})"
        return self.move(Path(path), dst, reason=reason)

    # --- claims ----------------------------------------------------------------------------

    def claim(self, task: Task, *, machine: str, jobid: str, host: str | None = None,
              pid: int | None = None) -> Claim | None:
        """Take ``task`` for batch job ``jobid`` on ``machine``: write the lease that keeps
        its identity, then one atomic rename to ``working/<machine>/<jobid>/<name>`` (or a
        numbered slot, :func:`~metaq_py.queue.lease.claim_slot`). ``None`` when another job
        took it first (or it was removed). The claim's spec is read again from the claimed
        file, which is what will run; if it no longer parses it is rejected (``None``). An
        :class:`OSError` (a full disk, a quota) leaves the task where it was."""
        job = self._jobs.get((machine, jobid)) or self._jobs.setdefault(
            (machine, jobid), _job_folder(self.root, machine, jobid))
        dst = job.take_slot(task.relpath.rpartition("/")[2])
        try:
            claimed = self._claim_into(task, dst, job, machine=machine, jobid=jobid,
                                       host=host, pid=pid)
        except OSError:  # a full disk, a quota: the task stays where it is
            job.leave(dst)
            raise
        if claimed is None:
            job.leave(dst)
        return claimed

    def _claim_into(self, task: Task, dst: Path, job: JobFolder, *, machine: str, jobid: str,
                    host: str | None, pid: int | None) -> Claim | None:
        """:meth:`claim`, once the place ``dst`` in ``job`` is chosen."""
        too_long = name_problem(dst.name, path=dst)
        if too_long is not None:
            self.reject(task.path, str(TaskError(task.file, None, too_long)))
            return None
        self._made.make(dst.parent)
        now = self.clock.now()
        host = host or socket.gethostname()
        pid = pid if pid is not None else os.getpid()
        # The lease is written before the rename, so a claimed task always has one.
        write_lease(dst, machine=machine, jobid=jobid, folder=task.folder, relpath=task.relpath,
                    host=host, pid=pid, start=now, attempts=task.attempts, submit=task.submit,
                    stale_after=self.config.stale_after)
        folder = os.path.dirname(task.file)
        before = _stat_or_none(folder)
        own = self.own_moves
        if own is not None:
            own.add(task.file)
        try:
            os.rename(task.file, dst)
        except OSError as e:
            if own is not None:
                own.discard(task.file)
            lease_path(dst).unlink(missing_ok=True)
            if isinstance(e, FileNotFoundError):
                return None  # another runner took it first, or it was removed
            if e.errno in (errno.ENAMETOOLONG, errno.ENOTDIR, errno.EISDIR):
                self.reject(task.path, f"{task.path}: the task cannot be claimed "
                                       f"({e.strerror})")
                return None
            if e.errno == errno.EXDEV:
                raise QueueError(f"cannot claim {task.path}: working/ is on another file "
                                 f"system; keep the whole queue on one") from None
            raise
        has_logbook = False
        if task.logbook:  # a fresh task has none: not looked for (a metadata call each)
            book = logbook_path(task.path)
            if own is not None:
                own.add(book)
            has_logbook = rename_quietly(book, logbook_path(dst))
            if own is not None and not has_logbook:
                own.discard(book)
        after = _stat_or_none(folder)
        if before is not None and after is not None:
            self.index.claimed(task, before, after)  # no relisting of the folder for this
        # Read whole and judged once: these bytes are what runs, never the path again. The
        # folders up from the job's folder are walked once: a claim finds the job's folder
        # the very folder (device and inode) it was (self._made), and its trust stays.
        place = self._made.identity(dst.parent)
        verdict = judge_in_queue(dst, root=self.root, config=self.config, trust=self._trust,
                                 whole=True, folders_trusted=place in self._trusted)
        if verdict.spec is not None and place is not None:
            self._trusted.add(place)
        program, why = self._program(task, dst, verdict)
        if why is not None or verdict.spec is None or program is None \
                or verdict.opened is None:
            lease_path(dst).unlink(missing_ok=True)
            self.move(dst, self.path_of(REJECTED, task.folder, task.relpath), reason=why)
            return None
        return Claim(machine=machine, jobid=jobid, folder=task.folder, relpath=task.relpath,
                     path=dst, host=host, pid=pid, start=now, heartbeat=now,
                     attempts=task.attempts, submit=task.submit, spec=verdict.spec,
                     has_logbook=has_logbook, program=program,
                     inode=verdict.opened.st_ino)

    def _program(self, task: Task, dst: Path, verdict: Verdict
                 ) -> tuple[Program | None, str | None]:
        """What the claimed file ``dst`` of ``task``, judged as ``verdict``, runs: its own
        bytes, or for an index of an array the array's script; else why it may not run."""
        if verdict.spec is None:
            return None, str(verdict.error)
        assert verdict.data is not None and verdict.opened is not None
        from metaq_py.program import Program  # only a claim reads a program
        program = Program(verdict.data, str(dst), verdict.opened.st_uid)
        if "/" not in task.relpath:
            return program, None  # an index of an array sits in its array's folder
        from metaq_py.queue.campaign.arrays import index_program
        stored = index_program(self.root, task.folder, task.relpath, program, trust=self._trust)
        if isinstance(stored, str):
            return None, f"{task.path}: {stored}"
        return (program if stored is None else stored), None

    def heartbeat(self, claim: Claim) -> bool:
        """Renew the lease. ``False`` means the claim is lost (see :meth:`renew`): the
        runner must stop the task."""
        return self.renew(claim) is None

    def renew(self, claim: Claim) -> str | None:
        """Renew the lease; ``None`` when renewed, else why the claim is lost: it is gone
        (reclaimed by another job as stale, cancelled and moved), or its lease is not this
        runner's to renew (someone put a file of their own in its place)."""
        try:
            os.utime(claim.lease, follow_symlinks=False)
        except FileNotFoundError:
            return "its claim was taken back"
        except OSError as e:
            return f"its lease {claim.lease} can no longer be renewed ({e.strerror}); " \
                   f"someone replaced it"
        if not os.path.lexists(claim.path):
            return "its claim was taken back"
        return None

    def cancel_requested(self, claim: Claim) -> bool:
        """Whether someone ran ``metaq cancel`` on this running task."""
        return os.path.lexists(companion(claim.path, CANCEL_SUFFIX))

    def tidy_job(self, *, machine: str, jobid: str) -> None:
        """Remove the empty folders a finished batch job leaves in ``working/``."""
        self._jobs.pop((machine, jobid), None)
        pack = self._packs.pop(jobid, None)
        if pack is not None:
            pack.close()
        top = self.root / WORKING / machine / jobid
        for dirpath, _dirs, _files in sorted(os.walk(top), key=lambda w: -len(w[0])):
            with contextlib.suppress(OSError):
                os.rmdir(dirpath)

    # --- moving ----------------------------------------------------------------------------

    def move(self, src: Path, dst: Path, *, reason: str | None = None,
             logbook: Logbook | None = None, claim: Claim | None = None) -> Path | None:
        """Move the task at ``src`` to ``dst`` with its companions: every state change goes
        through here (see :func:`~metaq_py.queue.moves.move_task`). ``None`` if ``src``
        vanished first."""
        job = None if claim is None else self._jobs.get((claim.machine, claim.jobid))
        rel = relative_parts(src, self.root)
        pack = src_logbook = None
        if job is not None and claim is not None and logbook is not None \
                and relative_parts(dst, self.root)[0] in DONE_STATES:
            pack, src_logbook = self._pack_for(claim.jobid), claim.has_logbook
        moved = move_task(src, dst, root=self.root, reason=reason, logbook=logbook,
                          old_reason=rel[0] in DONE_STATES, made=self._made, pack=pack,
                          src_logbook=src_logbook is not False)
        if job is not None and claim is not None and src == claim.path:
            job.leave(src)  # gone from working/, moved now or by someone else before
        if moved is not None:  # the summary metaq status reads (see queue/tally.py)
            from metaq_py.queue.tally import note_move  # submit moves nothing
            note_move(self.root, src, moved, spec=claim.spec if claim is not None else None)
            self._settle_array(rel, relative_parts(moved, self.root))
        return moved

    def _settle_array(self, src: Sequence[str], dst: Sequence[str]) -> None:
        """After an index of an array moved from ``src`` to ``dst`` (parts below the root):
        its array's own files leave its task folder when it was the last to end, and come
        back when a retry makes one wait again (:mod:`metaq_py.queue.campaign.arrays`)."""
        ended, was_ended = dst[0] in DONE_STATES, src[0] in DONE_STATES
        if ended == was_ended or (not ended and dst[0] == WORKING):
            return
        parts = dst[1:] if ended or dst[0] == HOLD else dst
        parent, _, name = "/".join(parts).rpartition("/")
        if not name.isdigit() or "/" not in parent:
            return
        from metaq_py.queue.campaign.arrays import recall, retire  # an index's move alone
        if ended:
            retire(self, parent)
        else:
            with contextlib.suppress(OSError):  # it runs all the same (see index_program)
                recall(self, parent)

    def _pack_for(self, jobid: str) -> Pack:
        """How a move by this object's job ``jobid`` packs the logbook of a task it made done
        (:mod:`~metaq_py.queue.logbook`)."""
        pack = self._packs.get(jobid)
        if pack is None:
            pack = self._packs[jobid] = LogbookPack(self.root, self.job_dir(jobid))
        return pack.add


# --- helpers -------------------------------------------------------------------------------


def _job_folder(root: Path, machine: str, jobid: str) -> JobFolder:
    """``working/<machine>/<jobid>`` of the queue at ``root``, its names checked."""
    return JobFolder(root / WORKING / safe_name(machine, "machine name") /
                     safe_name(jobid, "job id"))


def _stat_or_none(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:16]
