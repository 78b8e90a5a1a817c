"""The end of a claim: a batch job's runner settles each task it claimed (finish, skip,
requeue, reclaim, a cancel) by moving it to a done state or back to wait.

Here is :class:`Queue`, the runner's queue: a :class:`~metaq_py.queue.claiming.ClaimingQueue`
(scan, claim, heartbeat, and the one move every state change goes through, in
:mod:`metaq_py.queue.claiming`) with the moves that end a claim, each with its line in the
task's logbook. The people's commands are in :mod:`metaq_py.queue.admin` and
:mod:`metaq_py.queue.submit`.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from metaq_py.queue.claiming import ClaimingQueue
from metaq_py.queue.disk.fileio import Refused, read_regular
from metaq_py.queue.disk.folders import CANCEL_SUFFIX, REASON_LIMIT, companion
from metaq_py.queue.layout import CANCELLED, FAILED, FINISHED, PENDING
from metaq_py.queue.lease import Claim, ended_code
from metaq_py.queue.logbook import Logbook
from metaq_py.queue.moves import history_entry, inode_of, logbook_of

__all__ = ["Moved", "Queue"]


@dataclass(frozen=True, slots=True)
class Moved:
    """Where a task went: ``state`` is a task folder's name when it went back to wait there,
    else one of :data:`~metaq_py.queue.layout.DONE_STATES`; ``path`` is its new file."""

    state: str
    path: Path
    outcome: str | None = None
    """For the end of a run (:meth:`Queue.finish`), the ``end`` event's word for it
    (:data:`~metaq_py.outcomes.OUTCOMES`)."""


class Queue(ClaimingQueue):
    """One queue directory, with every move a batch job's runner makes on it. Cheap to create;
    it reads ``metaq.yaml`` once. The people's commands are :class:`~metaq_py.queue.admin
    .QueueAdmin` and :class:`~metaq_py.queue.submit.Submitter`.

    The runner's cycle::

        q = Queue(root)
        q.check_one_filesystem()
        waiting = q.settled_scan().tasks       # queue order; the runner's policy picks
        claim = q.claim(task, machine="theta", jobid=job)  # None: another job took it
        ...  # launch, then q.heartbeat(claim) now and then
        q.finish(claim, exit_code=rc)          # or q.requeue(claim, reason="preempted")
    """

    def cancelled(self, claim: Claim) -> Moved | None:
        """Move a running task that ``metaq cancel`` asked to stop, once its job has stopped
        it, to ``cancelled/`` with the request as its reason. ``None``: the claim was gone."""
        why = read_reason_file(companion(claim.path, CANCEL_SUFFIX)) or "cancelled"
        return self._end(claim, CANCELLED, event="cancelled", reason=why)

    def finish(self, claim: Claim, *, exit_code: int, reason: str | None = None,
               usage: Mapping[str, object] | None = None,
               timed_out: bool = False, oom: bool = False) -> Moved | None:
        """Settle the end of a run by its exit code's class (:mod:`metaq_py.queue.failure`):
        0 goes to ``finished/``, a ``SOFT_FAIL_ON`` code too with its warning; a
        ``REQUEUE_ON`` code back to its folder with no retry spent; any other back to its
        folder while it has retries left (``RETRIES``, or the queue's default), and else to
        ``failed/`` with a ``.reason`` file. A task sent back waits its retry delay.
        ``timed_out``: the run was stopped at its ``TIME_LIMIT``; ``oom``: the kernel's OOM
        killer ended it past its ``MEM`` (outcome ``oom``). ``None``: the claim was
        already gone. ``usage``: the run's resource use, added to its logbook entry
        (:data:`~metaq_py.queue.logbook.USAGE_FIELDS`). :attr:`Moved.outcome` is the word
        for the run's ``end`` event."""
        # Only runners settle ends: submit and status never load this.
        from metaq_py.outcomes import FINISHED as DONE
        from metaq_py.outcomes import REQUEUED, SOFT_FAILED, Policy, code_requeues, plan_end
        d, caps = self.config.defaults, self.config.caps
        policy = Policy(d.retries, d.retry_delay, d.retry_delay_cap, d.requeue_on,
                        d.soft_fail_on, caps.attempts, caps.requeues)
        host = claim.host or "an unknown host"
        what = (f"stopped at its TIME_LIMIT in job {claim.jobid} on {host}" if timed_out
                else f"killed by the kernel's OOM killer past its MEM in job {claim.jobid} "
                     f"on {host}" if oom
                else f"exited with code {exit_code} in job {claim.jobid} on {host}")
        if reason:
            what += f" ({reason})"
        requeues = code_requeues(logbook_of(claim.path, now=self.clock.now()).history) \
            if claim.has_logbook and exit_code != 0 else 0
        plan = plan_end(claim.spec, policy, exit_code=exit_code, attempts=claim.attempts,
                        requeues=requeues, what=what, timed_out=timed_out, oom=oom)
        event = plan.outcome if plan.outcome in (SOFT_FAILED, REQUEUED) else \
            DONE if plan.outcome == DONE else "failed"
        if plan.back:
            moved = self._back(claim, attempts=plan.attempts, event=event,
                               reason=plan.note or what, exit_code=exit_code, usage=usage,
                               not_before=self.clock.now() + plan.delay if plan.delay else 0.0)
        elif plan.outcome in (DONE, SOFT_FAILED):
            moved = self._end(claim, FINISHED, event=event, exit_code=exit_code,
                              reason=plan.note or reason, usage=usage)
        else:
            moved = self._end(claim, FAILED, event=event, exit_code=exit_code,
                              reason=plan.note, attempts=plan.attempts, usage=usage)
        return None if moved is None else replace(moved, outcome=plan.outcome)

    def skip(self, claim: Claim, *, reason: str) -> Moved | None:
        """Move a claimed task that was not run, since every output it ``CREATES`` exists,
        to ``finished/`` (its logbook says ``skipped`` and why). ``None``: the claim was
        gone."""
        moved = self._end(claim, FINISHED, event="skipped", reason=reason)
        return None if moved is None else replace(moved, outcome="skipped")

    def requeue(self, claim: Claim, *, reason: str, count_attempt: bool = True,
                usage: Mapping[str, object] | None = None,
                started: bool = True) -> Moved | None:
        """Put a claimed task back in its folder under its own relative path, keeping its
        original submit time (so it keeps its place). ``count_attempt=False`` is for a
        preemption, which is not the task's fault. A task whose unsuccessful runs reach
        ``caps.attempts`` goes to ``failed/`` instead. ``None``: the claim was already gone.
        ``usage`` as for :meth:`finish`. ``started=False`` gives back a claim whose script
        never started: its logbook says ``returned``, not ``requeued``, so that its next start
        is neither a later attempt nor a resumption."""
        if not started:
            return self._back(claim, attempts=claim.attempts, event="returned", reason=reason)
        attempts = claim.attempts + (1 if count_attempt else 0)
        if count_attempt and attempts >= self.config.caps.attempts:
            note = f"{reason}; gave up after {attempts} unsuccessful runs (caps.attempts)"
            return self._end(claim, FAILED, event="requeued", reason=note, attempts=attempts,
                             usage=usage)
        return self._back(claim, attempts=attempts, event="requeued", reason=reason,
                          usage=usage)

    def reclaim(self, claim: Claim, *, reason: str) -> Moved | None:
        """Take back a claim whose job is dead or whose lease is stale: the task returns to its
        folder with its attempt count raised, and the dead job's event log says so. A task
        that ended and that its runner could not move (:data:`~metaq_py.queue.lease
        .ENDED_SUFFIX`) is settled with its exit code instead: never run again."""
        ended = ended_code(claim.path)
        if ended is not None:  # it ran to its end; its runner could not move it
            code, marker = ended
            moved = self.finish(claim, exit_code=code, reason=f"its job {claim.jobid} could "
                                f"not move it after its end; settled later ({reason})")
            with contextlib.suppress(OSError):
                marker.unlink()
        else:
            moved = self.requeue(claim, reason=reason, count_attempt=True)
        if moved is not None:
            # A job's folder is its runner's own: a runner of another uid may not write
            # there, and the task's logbook has the reclaim all the same.
            with contextlib.suppress(OSError):
                self.events(claim.jobid).append("reclaimed", task=claim.id, reason=reason,
                                                to=moved.state, by=socket.gethostname())
        return moved

    def _history(self, claim: Claim, event: str, usage: Mapping[str, object] | None = None,
                 **fields: object) -> Logbook:
        """The logbook of ``claim``'s task with ``event`` added to its history."""
        now = self.clock.now()
        if claim.has_logbook:
            logbook = logbook_of(claim.path, now=now)
        else:  # it never ran before, and only the queue writes logbooks: there is none
            inode = claim.inode if claim.inode is not None else inode_of(claim.path)
            logbook = Logbook(inode=inode, submit=claim.submit)
        entry = history_entry(event, now=now, job=claim.jobid, host=claim.host, **fields,
                              **(usage or {}))
        return replace(logbook, submit=claim.submit, history=(*logbook.history, entry))

    def _back(self, claim: Claim, *, attempts: int, event: str, reason: str,
              exit_code: int | None = None, usage: Mapping[str, object] | None = None,
              not_before: float = 0.0) -> Moved | None:
        if self.cancel_requested(claim) or claim.folder not in self.config.folders:
            # A cancel outlives every way back (a requeue, a retry, a reclaim of a dead
            # job's claim); a claim naming no task folder of this queue has no way back.
            if self.cancel_requested(claim):
                return self.cancelled(claim)
            return self._end(claim, FAILED, event=event, reason=f"{reason}; its folder "
                             f"{claim.folder!r} is not a task folder of this queue")
        logbook = replace(self._history(claim, event, usage, reason=reason,
                                        exit_code=exit_code, not_before=not_before or None),
                          attempts=attempts, not_before=not_before)
        moved = self.move(claim.path, self.path_of(PENDING, claim.folder, claim.relpath),
                          logbook=logbook, claim=claim)
        if moved is None:
            return None
        # Where timestamps are coarse (Lustre keeps whole seconds), a claim this object made
        # from the same folder in the same tick leaves its mtime and ctime as the index last
        # saw them (see Index.claimed), and the next scan would not see the task back.
        # So the folders on its way, down from the task folder, are listed again.
        top = self.root / claim.folder
        for below in (moved, *moved.parents):
            if below == top:
                break
            self.index.forget(below)
        return Moved(claim.folder, moved)

    def _end(self, claim: Claim, state: str, *, event: str, reason: str | None,
             exit_code: int | None = None, attempts: int | None = None,
             usage: Mapping[str, object] | None = None) -> Moved | None:
        logbook = self._history(claim, event, usage, reason=reason, exit_code=exit_code)
        if attempts is not None:
            logbook = replace(logbook, attempts=attempts)
        note = reason if state != FINISHED else None
        moved = self.move(claim.path, self.path_of(state, claim.folder, claim.relpath),
                          logbook=logbook, reason=note, claim=claim)
        return None if moved is None else Moved(state, moved)



def read_reason_file(path: Path) -> str | None:
    """The text of a cancel request or reason file at ``path`` (regular, capped, UTF-8, one
    line of printable text kept), or ``None``."""
    try:
        data, _ = read_regular(path, limit=REASON_LIMIT)
    except Refused:
        return None
    text = data.decode("utf-8", "replace").strip().splitlines()
    line = text[0] if text else ""
    return "".join(c for c in line if c.isprintable())[:500] or None

