"""The people's commands on a queue: hold, release, cancel, retry, and finding and listing
tasks in every state (``metaq hold``, ``ls``, ``show``, ``explain``, ...); ``metaq submit`` is
:mod:`metaq_py.queue.submit`.

A batch job's runner never needs any of this: it works through :class:`~metaq_py.queue.store
.Queue` alone (scan, claim, heartbeat, finish, requeue, reclaim). :class:`QueueAdmin` wraps a
queue and moves tasks only through its one move
(:meth:`~metaq_py.queue.claiming.ClaimingQueue.move`), so a person's move races a runner's
exactly as two runners race: one rename wins.

A person names a task by its identity ``<folder>/<relpath>`` (``todo/sub/run.sh``), by a
path to its file anywhere in the queue, or by its bare file name (``run.sh``) when only one
task has it. What is found is an :class:`~metaq_py.queue.finding.Entry`
(:mod:`metaq_py.queue.finding`).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from metaq_py.directive_keys import parse_indices
from metaq_py.errors import QueueError
from metaq_py.queue.claiming import ClaimingQueue
from metaq_py.queue.disk.fileio import replace_file
from metaq_py.queue.disk.folders import CANCEL_SUFFIX, companion, read_reason
from metaq_py.queue.finding import (
    NAMED_SHOWN,
    STATE_WORDS,
    Entry,
    arrays_below,
    by_name,
    files_in,
    locate,
)
from metaq_py.queue.judge import judge
from metaq_py.queue.layout import (
    CANCELLED,
    DONE_STATES,
    FAILED,
    FINISHED,
    HOLD,
    PENDING,
    REJECTED,
    STATES,
    WORKING,
)
from metaq_py.queue.logbook import Logbook, find_logbook
from metaq_py.queue.moves import history_entry, inode_of, logbook_of
from metaq_py.queue.settings.trust import user_name
from metaq_py.queue.store import Moved

if TYPE_CHECKING:
    from metaq_py.queue.campaign.arrays import ArrayInfo

__all__ = ["QueueAdmin"]


class QueueAdmin:
    """The people's commands on ``queue``. Cheap to create; it keeps nothing of its own."""

    def __init__(self, queue: ClaimingQueue) -> None:
        self.queue = queue

    # --- moving ----------------------------------------------------------------------------

    def hold(self, ref: str) -> Moved:
        """Park a waiting task in ``hold/``."""
        e = self.find(ref, states=(PENDING,))
        return self._relocate(e, HOLD, HOLD)

    def hold_rest(self, array_id: str, *, max_fails: int) -> int:
        """After ``max_fails`` failed indices of the array ``array_id`` (``MAX_FAILS``), park
        its indices still waiting in ``hold/``, each with one sentence saying why; how many
        were parked (0 while fewer have failed). ``metaq release`` lets them wait again."""
        try:
            failed = len(self.select(f"{array_id}[*]", states=(FAILED,)))
        except QueueError:
            return 0
        if failed < max_fails:
            return 0
        try:
            waiting = self.select(f"{array_id}[*]", states=(PENDING,))
        except QueueError:
            return 0
        why = (f"held: {failed} indices of the array {array_id} failed, which reaches its "
               f"MAX_FAILS {max_fails}; 'metaq release {array_id}' runs the rest")
        held = 0
        for e in waiting:
            with contextlib.suppress(QueueError):
                self._relocate(e, HOLD, HOLD, reason=why)
                held += 1
        return held

    def release(self, ref: str) -> Moved:
        """Let a held task wait in its folder again."""
        e = self.find(ref, states=(HOLD,))
        return self._relocate(e, PENDING, e.folder)

    def cancel(self, ref: str) -> Moved:
        """Cancel a waiting or held task (to ``cancelled/``, with a reason), or ask the job
        running a claimed task to stop it (``Moved.state`` is then ``working``)."""
        e = self.find(ref, states=(PENDING, HOLD, WORKING))
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.queue.clock.now()))
        reason = f"cancelled by {_user()} at {when}"
        if e.state == WORKING:
            # Never through a link planted at the request's name (replaced, not followed).
            replace_file(companion(e.path, CANCEL_SUFFIX), (reason + "\n").encode())
            return Moved(WORKING, e.path)
        return self._relocate(e, CANCELLED, CANCELLED, reason=reason)

    def retry(self, ref: str) -> Moved:
        """Send a failed, rejected or cancelled task back to its folder with its attempt count
        reset; it is checked again first, and stays where it is if still invalid."""
        q = self.queue
        e = self.find(ref, states=(FAILED, REJECTED, CANCELLED))
        # Trust is left to the scan, as for any task put in a folder.
        judge(e.path, root=q.root, config=q.config).accepted()
        now = q.clock.now()
        logbook = logbook_of(e.path, now=now, packed=q.packed)
        logbook = replace(logbook, attempts=0,
                         history=(*logbook.history, history_entry("retried", now=now, by=_user())))
        return self._relocate(e, PENDING, e.folder, logbook=logbook)

    def _relocate(self, e: Entry, state: str, moved_to: str, *, reason: str | None = None,
                  logbook: Logbook | None = None) -> Moved:
        """Move the task of ``e`` to ``state`` (with ``reason`` and ``logbook``, see
        :meth:`~metaq_py.queue.claiming.ClaimingQueue.move`); ``moved_to`` names where it went."""
        moved = self.queue.move(e.path, self.queue.path_of(state, e.folder, e.relpath),
                                reason=reason, logbook=logbook)
        if moved is None:
            raise QueueError(f"{e.id} was moved by someone else meanwhile; nothing was done")
        return Moved(moved_to, moved)

    # --- finding and listing ---------------------------------------------------------------

    def array_of(self, ref: str) -> ArrayInfo | None:
        """The array ``ref`` names without its ``[...]``: its identity (``todo/run.sh``) or
        its script's name in a task folder (``run.sh``); ``None`` if it names none."""
        from metaq_py.queue.campaign.arrays import read_array, split_ref  # not for submit
        base = split_ref(ref)[0].strip("/")
        folders = self.queue.config.folders
        names = [base] if base.split("/", 1)[0] in folders else [f"{f}/{base}" for f in folders]
        for name in names:
            info = read_array(self.queue.root, name)
            if info is not None:
                return info
        if base.split("/", 1)[0] in folders or not base or base in (".", ".."):
            return None
        # An array submitted with --folder sits deeper: todo/batch2/prop.sh.
        found = [info for f in folders for ident in arrays_below(self.queue.root, f, base)
                 if (info := read_array(self.queue.root, ident)) is not None]
        if len(found) > 1:
            raise QueueError(f"{len(found)} arrays are called {base!r}: "
                             f"{', '.join(i.id for i in found[:NAMED_SHOWN])}"
                             f"{' and more' if len(found) > NAMED_SHOWN else ''}; name one "
                             f"by its <folder>/<path>, such as {found[0].id}")
        return found[0] if found else None

    def select(self, ref: str, *, states: tuple[str, ...]) -> list[Entry]:
        """The tasks in ``states`` that ``ref`` names: one task (see :meth:`find`), or the
        indices of an array (``run.sh``, ``run.sh[*]``, ``run.sh[17]``, ``run.sh[0-9]``)
        that are in ``states``. Raises :class:`QueueError` when that is none."""
        info = self.array_of(ref)
        if info is None:
            return [self.find(ref, states=states)]
        from metaq_py.queue.campaign.arrays import split_ref  # not for submit
        sel = split_ref(ref)[1]
        indices = info.indices if sel in (None, "*") else parse_indices(sel or "")
        folder, _, rel = info.id.partition("/")
        found = [e for i in indices
                 if (e := locate(self.queue, folder, f"{rel}/{i}", states=states)) is not None]
        if not found:
            wanted = " or ".join(STATE_WORDS[s] for s in states)
            raise QueueError(f"no task of the array {info.id} named by {ref!r} is {wanted}")
        return found

    def find(self, ref: str, *, states: tuple[str, ...] = STATES) -> Entry:
        """The task a person means by ``ref``: its identity ``<folder>/<relpath>`` (such as
        ``todo/sub/run.sh``), a path to its file anywhere in the queue (``working/`` too), one
        index of an array (``run.sh[17]``), or its bare file name (``run.sh``) when exactly
        one task in ``states`` has that name
        (:func:`~metaq_py.queue.finding.tasks_named`)."""
        from metaq_py.queue.campaign.arrays import split_ref  # not for submit
        info = self.array_of(ref)
        sel = split_ref(ref)[1]
        if info is not None and sel is not None and sel.isdigit():
            ref = f"{info.id}/{int(sel)}"
        try:
            folder, rel = self._parse_ref(ref)
        except QueueError:
            if len(Path(ref).parts) != 1 or ref in ("..", "."):
                raise
            return by_name(self.queue, ref, states)
        e = locate(self.queue, folder, rel, states=states)
        if e is None:
            wanted = " or ".join(STATE_WORDS[s] for s in states)
            anywhere = locate(self.queue, folder, rel)
            where = (f"; it is {STATE_WORDS[anywhere.state]}" if anywhere
                     else "; 'metaq ls' lists the tasks")
            raise QueueError(f"no task {folder}/{rel} is {wanted}{where}")
        return e

    def _parse_ref(self, ref: str) -> tuple[str, str]:
        root, folders = self.queue.root, self.queue.config.folders
        parts = Path(ref).parts
        if Path(ref).is_absolute() or os.path.lexists(ref):
            with contextlib.suppress(ValueError):
                parts = Path(os.path.abspath(ref)).relative_to(root.absolute()).parts
        if len(parts) > 1 and parts[0] == HOLD and ".." not in parts:
            parts = tuple("/".join(self.queue.held_identity("/".join(parts[1:]))).split("/"))
        elif parts and parts[0] in DONE_STATES:
            parts = parts[1:]
        elif len(parts) > 3 and parts[0] == WORKING and ".." not in parts:
            # A running task's path says nothing of its folder: its lease does.
            parts = tuple("/".join(self.queue.identity_of(root.joinpath(*parts))).split("/"))
        if len(parts) < 2 or parts[0] not in folders or ".." in parts:
            raise QueueError(f"{ref!r} does not name a task; give <folder>/<path> such as "
                             f"todo/run.sh, with a folder among {', '.join(folders)}")
        return parts[0], "/".join(parts[1:])

    def entries(self, state: str, *, specs: bool = True) -> Iterator[Entry]:
        """The tasks in ``state`` (one of :data:`~metaq_py.queue.layout.STATES`). For
        ``pending`` this includes invalid files, with their reason and no spec. Read-only."""
        q = self.queue
        if state == PENDING:
            scan = q.scan()
            for t in scan.tasks:
                yield Entry(PENDING, t.folder, t.relpath, t.path, t.spec, attempts=t.attempts,
                            not_before=t.not_before)
            for bad in scan.invalid:
                yield Entry(PENDING, bad.folder, bad.relpath, bad.path, None, reason=bad.reason)
            return
        if state == WORKING:
            for c in q.leases(specs=specs):
                yield Entry(WORKING, c.folder, c.relpath, c.path, c.spec, machine=c.machine,
                            jobid=c.jobid, attempts=c.attempts)
            return
        if state not in STATES:
            raise QueueError(f"{state!r} is not a state; use one of {', '.join(STATES)}")
        packed = q.packed if state in DONE_STATES else None  # only done tasks' are packed
        for folder, rel, path in files_in(q, state):
            spec = judge(path).spec if specs else None
            reason = None
            if state != HOLD and state != FINISHED:
                reason = read_reason(path)
            logbook = find_logbook(path, inode_of(path), packed)
            yield Entry(state, folder, rel, path, spec, reason=reason,
                        attempts=logbook.attempts if logbook else 0)


def _user() -> str:
    """Who runs this command: the process's uid, never ``$USER`` (anyone may set that)."""
    return user_name(os.getuid())

