"""What ``metaq status`` counts: the tasks per state, task folder, campaign folder and project.

Waiting, held and running tasks are few and change all the time, so they are listed live
(the queue's scan, ``hold/`` and the leases). Done tasks are the queue's whole history, so
they come from the tally (:mod:`metaq_py.queue.tally`), kept up to date by every move. When
the tally is not established yet (a queue made before it), it is rebuilt here once if the
queue is writable; a read-only queue is counted from its files every time.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from metaq_py.queue.admin import QueueAdmin
from metaq_py.queue.index import Invalid
from metaq_py.queue.layout import DONE_STATES, HOLD, PENDING, STATES, WORKING
from metaq_py.queue.store import Queue
from metaq_py.queue.tally import Counts, count_files, project_of, read_tally, rebuild

__all__ = ["QueueCounts", "done_counts", "queue_counts"]


@dataclass(frozen=True, slots=True)
class QueueCounts:
    """The tasks of a queue, counted.

    ``states`` maps each state to its task folders' counts; ``projects`` each project (``-``
    for none) to its counts per state; ``campaigns`` each campaign folder, named
    ``<task folder>/<sub-folder>`` (the task folder alone for tasks at its top), to its counts
    per state. ``invalid`` lists the waiting files that are not valid tasks, with why.
    ``source`` says where the done tasks were counted: ``summary`` or ``files``."""

    states: dict[str, Counter[str]]
    projects: dict[str, Counter[str]]
    campaigns: dict[str, Counter[str]]
    invalid: Sequence[Invalid] = ()
    source: str = "summary"
    delayed: list[tuple[str, float]] = field(default_factory=list)
    """The waiting tasks with a retry delay, and when each one ends (past or not)."""

    def totals(self) -> dict[str, int]:
        return {s: sum(c.values()) for s, c in self.states.items()}


def done_counts(q: Queue) -> tuple[Counts, str]:
    """The done tasks per tally key, and where they were counted (``summary`` or
    ``files``)."""
    counts = read_tally(q.root)
    if counts is not None:
        return counts, "summary"
    if _may_establish(q):
        try:
            return rebuild(q.root), "summary"
        except (OSError, TimeoutError):
            pass
    return count_files(q.root), "files"


def _may_establish(q: Queue) -> bool:
    """Whether ``status`` may write the tally's base: the queue is writable and was made as
    a queue (its done folders exist), so a checked-in example queue is never written."""
    return (os.access(q.root, os.W_OK)
            and any((q.root / s).is_dir() for s in DONE_STATES))


def queue_counts(q: Queue) -> QueueCounts:
    """Every task of ``q`` counted (see :class:`QueueCounts`)."""
    states: dict[str, Counter[str]] = {s: Counter() for s in STATES}
    projects: dict[str, Counter[str]] = defaultdict(Counter)
    campaigns: dict[str, Counter[str]] = defaultdict(Counter)
    delayed: list[tuple[str, float]] = []
    scan = q.scan()
    # Waiting tasks straight from the scan: 100,000 junk files make no entry, path or
    # sentence here (each invalid file's reason is made when it is printed).
    for folder, relpath, spec in [*((t.folder, t.relpath, t.spec) for t in scan.tasks),
                                  *((b.folder, b.relpath, None) for b in scan.invalid)]:
        states[PENDING][folder] += 1
        projects[project_of(spec)][PENDING] += 1
        campaigns[_campaign(folder, relpath.rpartition("/")[0])][PENDING] += 1
    delayed.extend((t.id, t.not_before) for t in scan.tasks if t.not_before)
    admin = QueueAdmin(q)
    for state in (HOLD, WORKING):
        for e in admin.entries(state):
            states[state][e.folder] += 1
            projects[project_of(e.spec)][state] += 1
            campaigns[_campaign(e.folder, e.relpath.rpartition("/")[0])][state] += 1
    done, source = done_counts(q)
    for k, n in done.items():
        states[k.state][k.folder] += n
        projects[k.project][k.state] += n
        campaigns[_campaign(k.folder, k.campaign)][k.state] += n
    return QueueCounts(states, dict(projects), dict(campaigns), scan.invalid, source, delayed)


def _campaign(folder: str, sub: str) -> str:
    return f"{folder}/{sub}" if sub else folder
