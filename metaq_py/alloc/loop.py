"""One pass of ``metaq alloc`` (look, decide, submit, write down), and the watch loop.

A pass, under the queue's alloc lock (:meth:`~metaq_py.alloc.journal.Journal.lock`):

1. lists this queue's allocations the batch system holds (:func:`list_allocations`); when it
   cannot answer, nothing is submitted, since allocations that cannot be counted might be
   too many;
2. reads the waiting tasks from the queue's folders, and leaves out those whose ``AFTER``
   dependencies are not met (:class:`~metaq_py.queue.campaign.deps.Dependencies`): an allocation for
   them could run nothing. One whose dependency failed for good is moved to ``failed/``, as
   a runner would (not on a dry run);
3. asks :func:`~metaq_py.alloc.policy.decide`;
4. submits, or refuses, and writes it to ``alloc/events.jsonl``.

A dry run does 1 to 3 without the lock and writes nothing: it returns the exact command it
would run.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metaq_py.alloc.journal import Journal
from metaq_py.alloc.policy import Decision, Known, Refuse, Submit, Waiting, decide
from metaq_py.batch.base import BatchError
from metaq_py.batch.submit import (
    AllocRequest,
    BatchJob,
    alloc_name,
    find_system,
    list_allocations,
    shown,
    submit,
    submit_command,
)
from metaq_py.errors import MetaqError
from metaq_py.queue.campaign.deps import Dependencies
from metaq_py.queue.disk.lock import LockTimeout
from metaq_py.queue.settings.trust import settings_problem
from metaq_py.queue.store import Queue
from metaq_py.share import jobscript

__all__ = ["LOCK_TIMEOUT", "Allocator", "Pass"]

LOCK_TIMEOUT = 120.0
"""Seconds a pass waits for another alloc process's pass to end (a pass takes as long as two
batch commands, which a busy controller can stretch to a minute each)."""


@dataclass(frozen=True, slots=True)
class Pass:
    """What one pass did: its ``decision``; the ``command`` it ran (or, dry, would run);
    the ``jobid`` submitted; the ``error`` of a failed submission; whether it ``logged`` a
    new event (a repeated refusal is not written again); the allocations it counted."""

    decision: Decision
    command: str | None = None
    jobid: str | None = None
    error: str | None = None
    logged: bool = False
    known: tuple[BatchJob, ...] = ()


class Allocator:
    """Submits allocations for ``queue`` following its ``alloc:`` settings. ``system`` and
    ``jobscript`` replace the settings' (and the detected batch system)."""

    def __init__(self, queue: Queue, *, system: str | None = None,
                 jobscript: Path | None = None) -> None:
        self.queue = queue
        self.settings = queue.config.alloc
        self.system = system or self.settings.system or find_system()
        self.jobscript = _jobscript(queue.root, self.system, jobscript, self.settings.jobscript)
        self.root = queue.root.absolute()
        self.name = alloc_name(self.root)
        self.journal = Journal(queue.root, clock=queue.clock)

    def waiting(self, *, dry_run: bool = True) -> tuple[list[Waiting], int]:
        """The waiting tasks that could start now, as sizing sees them, and how many others
        wait for a dependency not yet finished. Unless ``dry_run``, a task whose dependency
        failed for good is moved to ``failed/`` (and counted in neither)."""
        deps = Dependencies(self.queue)
        ready: list[Waiting] = []
        blocked = 0
        for t in self.queue.scan().tasks:
            verdict = deps.check(t)
            if verdict.ready:
                ready.append(Waiting(t.id, t.spec.min_nodes, t.spec.nodes, t.walltime))
            elif verdict.failed is None:
                blocked += 1
            elif dry_run:
                continue
            elif deps.fail(t, verdict) is not None:
                self.journal.events.append("dependency-failed", task=t.id,
                                           reason=verdict.failed)
        return ready, blocked

    def request(self, decision: Submit) -> AllocRequest:
        """The allocation ``decision`` asks for, with the settings' extras."""
        s = self.settings
        return AllocRequest(system=self.system, jobscript=self.jobscript, queue=self.root,
                            name=self.name, nodes=decision.nodes, walltime=decision.walltime,
                            output=self.journal.folder.absolute(), account=s.account,
                            partition=s.partition, qos=s.qos, flags=s.flags)

    def once(self, *, dry_run: bool = False) -> Pass:
        """One pass (see the module text)."""
        if dry_run:
            return self._look(dry_run=True)
        try:
            with self.journal.lock(timeout=LOCK_TIMEOUT):
                return self._look(dry_run=False)
        except LockTimeout:
            raise MetaqError(f"another metaq alloc has held {self.journal.folder}/.lock for "
                             f"more than {LOCK_TIMEOUT:g} s; is it stuck?") from None

    def watch(self, *, interval: float, stop: threading.Event,
              report: Callable[[Pass], None]) -> None:
        """A pass every ``interval`` seconds until ``stop`` is set; ``report`` hears of each."""
        while not stop.is_set():
            report(self.once())
            stop.wait(interval)

    def _look(self, *, dry_run: bool) -> Pass:
        now = self.queue.clock.now()
        try:
            known = tuple(list_allocations(self.system, self.name))
        except BatchError as e:
            why = f"cannot count this queue's allocations, so none is submitted: {e}"
            return self._refuse(Refuse("batch", why), dry_run=dry_run)
        if not dry_run:
            self.journal.saw(known, now=now)
        ready, blocked = self.waiting(dry_run=dry_run)
        decision = decide(ready, [Known(j.jobid, j.queued) for j in known], self.settings,
                          now=now, last_failure=self.journal.last_failure(), blocked=blocked)
        if isinstance(decision, Refuse):
            return self._refuse(decision, dry_run=dry_run, known=known)
        request = self.request(decision)
        try:
            command = shown(*submit_command(request))
        except BatchError as e:
            return self._refuse(Refuse("settings", str(e)), dry_run=dry_run, known=known)
        if dry_run:
            return Pass(decision, command=command, known=known)
        fields: dict[str, Any] = {"nodes": decision.nodes, "walltime": decision.walltime,
                                  "command": command, "reason": decision.reason,
                                  "system": self.system}
        try:
            jobid = submit(request)
        except BatchError as e:
            self.journal.events.append("submit-failed", error=str(e), **fields)
            return Pass(decision, command=command, error=str(e), logged=True, known=known)
        self.journal.events.append("submit", job=jobid, **fields)
        self.journal.saw((*known, BatchJob(jobid, "submitted", True)), now=now)
        return Pass(decision, command=command, jobid=jobid, logged=True, known=known)

    def _refuse(self, refuse: Refuse, *, dry_run: bool,
                known: tuple[BatchJob, ...] = ()) -> Pass:
        logged = False if dry_run else self.journal.refused(refuse.code, refuse.reason)
        return Pass(refuse, logged=logged, known=known)


def _jobscript(root: Path, system: str, given: Path | None, setting: str | None) -> Path:
    """The batch script: ``given``, else the setting (relative to the queue root), else the
    one metaq-py ships for ``system``; it must exist."""
    if given is not None:
        path = given
    elif setting is not None:
        path = Path(setting) if Path(setting).is_absolute() else root / setting
    else:
        path = jobscript(system)
    if not path.is_file():
        raise MetaqError(f"the job script {path} is not a file; set alloc.jobscript in "
                         f"metaq.yaml or give --jobscript")
    # It runs as whoever runs metaq alloc: only a file the queue's owner alone writes.
    st, owner = os.stat(path), os.stat(root).st_uid
    why = settings_problem(st, owner=owner, reader=os.geteuid())
    if why is not None:
        raise MetaqError(f"the job script {path} is refused: {why}")
    return path.absolute()
