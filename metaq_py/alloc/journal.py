"""The queue's ``alloc/`` folder: what ``metaq alloc`` decided, and what it saw.

- ``alloc/events.jsonl``: one event per decision, appended as ``jobs/<jobid>/events.jsonl``
  lines are (:class:`~metaq_py.queue.eventlog.EventLog`): ``submit`` (``job``, ``nodes``,
  ``walltime``, ``command``, ``reason``), ``submit-failed`` (``error``, ``command``) and
  ``refuse`` (``code``, ``reason``). A refusal for the same rule as the event before it is
  not written again, so a watch on an idle queue adds no line per pass.
- ``alloc/seen.json``: this queue's allocations as the batch system listed them at the last
  pass (``time`` and ``jobs``: id and state), for ``metaq status``, which never asks the batch
  system itself.
- ``alloc/.lock``: held (:class:`~metaq_py.queue.disk.lock.FolderLock`) for the whole of a
  pass, so two alloc processes on one queue, on one login node or two, never both count the
  same allocations and both submit.
- ``alloc/slurm-<jobid>.out`` or the PBS output files of the allocations.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from metaq_py.clock import Clock
from metaq_py.queue.disk.fileio import read_regular, replace_file
from metaq_py.queue.disk.folders import make_folders
from metaq_py.queue.disk.lock import FolderLock
from metaq_py.queue.eventlog import EventLog

if TYPE_CHECKING:
    from metaq_py.batch.submit import BatchJob

__all__ = ["ALLOC_FOLDER", "Journal", "Seen", "allocations", "exists"]

ALLOC_FOLDER = "alloc"


@dataclass(frozen=True, slots=True)
class Seen:
    """This queue's allocations the batch system listed at ``time``: ``{job id: state}``."""

    time: float
    jobs: dict[str, str]


SEEN_LIMIT = 4 * 1024 * 1024
"""The largest ``seen.json`` (bytes) that is read: the allocations one pass saw."""


class Journal:
    """The ``alloc/`` folder of the queue at ``root`` (see the module text)."""

    def __init__(self, root: Path, *, clock: Clock | None = None) -> None:
        self.folder = root / ALLOC_FOLDER
        self.events = EventLog(self.folder / "events.jsonl", within=root, clock=clock)

    def lock(self, *, timeout: float) -> FolderLock:
        """The lock of one pass; waiting for it longer than ``timeout`` seconds raises
        :class:`~metaq_py.queue.disk.lock.LockTimeout`."""
        make_folders(self.folder.parent, self.folder)  # never through a planted link
        return FolderLock(self.folder / ".lock", timeout=timeout)

    def history(self) -> list[dict[str, Any]]:
        """Every event, in the order written (none without the folder)."""
        return list(self.events)

    def last_failure(self) -> float | None:
        """When the last submission failed, unless one succeeded after it."""
        last = None
        for e in self.events:
            if e.get("event") == "submit-failed":
                last = float(e["time"])
            elif e.get("event") == "submit":
                last = None
        return last

    def refused(self, code: str, reason: str) -> bool:
        """Write a refusal unless the last event is a refusal for the same rule; whether it
        was written."""
        last = None
        for e in self.events:
            last = e
        if last is not None and last.get("event") == "refuse" and last.get("code") == code:
            return False
        self.events.append("refuse", code=code, reason=reason)
        return True

    def saw(self, jobs: Sequence[BatchJob], *, now: float) -> None:
        """Keep what the batch system listed now, for ``metaq status``."""
        make_folders(self.folder.parent, self.folder)
        data = {"time": now, "jobs": {j.jobid: j.state for j in jobs}}
        replace_file(self.folder / "seen.json", json.dumps(data).encode())

    def seen(self) -> Seen | None:
        """What the last pass saw, or ``None`` before any (or when unreadable)."""
        try:
            data = json.loads(read_regular(self.folder / "seen.json", limit=SEEN_LIMIT)[0])
            return Seen(float(data["time"]), {str(k): str(v) for k, v in data["jobs"].items()})
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
            return None


def allocations(root: Path, *, last: int = 10) -> list[dict[str, Any]]:
    """The ``last`` allocations ``metaq alloc`` submitted for the queue at ``root``, newest
    last, each with its ``state``: as the batch system listed it at the last pass, ``ended``
    when that pass no longer listed it, ``unknown`` when no pass has looked since."""
    journal = Journal(root)
    submits = [e for e in journal.history() if e.get("event") == "submit"][-last:]
    seen = journal.seen()
    out = []
    for e in submits:
        job = str(e.get("job"))
        if seen is not None and job in seen.jobs:
            state = seen.jobs[job]
        elif seen is not None and seen.time > float(e["time"]):
            state = "ended"
        else:
            state = "unknown"
        out.append({"job": job, "submitted": float(e["time"]), "nodes": e.get("nodes"),
                    "walltime": e.get("walltime"), "state": state,
                    "seen": None if seen is None else seen.time})
    return out


def exists(root: Path) -> bool:
    """Whether ``metaq alloc`` has ever written into the queue at ``root``."""
    return os.path.isdir(root / ALLOC_FOLDER)
