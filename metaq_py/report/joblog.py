"""Reading every batch job's event log, ``jobs/<jobid>/events.jsonl``, and saying what is
wrong with it.

The runner appends one JSON object per line (see :mod:`metaq_py.queue.eventlog` for writing). A
runner killed in the middle of a write leaves a last line cut short; a disk that filled up may leave
one anywhere. Such lines are skipped and reported, one sentence each with the file and line,
and never stop a report: the rest of the log is still good.

Every event has ``time`` (Unix seconds) and ``event`` (its kind); a line without them is
reported the same way. Event kinds and their fields are the runner's vocabulary: ``runner-start``,
``runner-stop``, ``start``, ``end``, ``arrival``, ``preempt``, ``shrink``, ``expand``,
``reserve``, ``release``, ``checkpoint`` and ``reclaim``.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metaq_py.queue.disk.fileio import LINE_LIMIT, Refused, read_lines

__all__ = ["EVENTS_NAME", "JobLog", "read_job_log", "read_job_logs"]

EVENTS_NAME = "events.jsonl"


@dataclass(frozen=True, slots=True)
class JobLog:
    """The readable events of one batch job, in the order written, and the problems found.

    ``events`` are plain dicts as the runner wrote them, each with a numeric ``time`` and a
    string ``event``. ``problems`` are sentences naming the file and line of each line skipped.
    """

    jobid: str
    path: Path
    events: tuple[dict[str, Any], ...]
    problems: tuple[str, ...] = ()

    def of(self, *kinds: str) -> list[dict[str, Any]]:
        """The events of the given kinds, in order."""
        return [e for e in self.events if e["event"] in kinds]


def read_job_log(path: str | os.PathLike[str], *, jobid: str | None = None) -> JobLog:
    """The event log at ``path``; ``jobid`` defaults to the name of its folder. A missing
    file is an empty log."""
    path = Path(path)
    jobid = jobid if jobid is not None else path.parent.name
    events: list[dict[str, Any]] = []
    problems: list[str] = []
    try:
        for number, (raw, complete) in enumerate(read_lines(path), start=1):
            if raw is not None and not raw.strip():
                continue
            record = _decode(raw) if raw is not None else \
                f"the line is longer than {LINE_LIMIT} bytes, which no event is"
            if isinstance(record, str):
                if not complete:
                    problems.append(f"{path}, line {number}: the last line is cut short (the "
                                    f"runner was probably stopped while writing it); it is "
                                    f"skipped.")
                else:
                    problems.append(f"{path}, line {number}: {record}; the line is skipped.")
                continue
            events.append(record)
    except Refused as e:
        if e.vanished:
            return JobLog(jobid, path, ())
        return JobLog(jobid, path, (), (f"{e}; this job is left out.",))
    return JobLog(jobid, path, tuple(events), tuple(problems))


def read_job_logs(root: str | os.PathLike[str]) -> list[JobLog]:
    """The event logs of every batch job under ``<root>/jobs/``, sorted by job id."""
    jobs = Path(root) / "jobs"
    try:
        with os.scandir(jobs) as it:
            names = sorted(e.name for e in it if e.is_dir() and not e.name.startswith("."))
    except (FileNotFoundError, NotADirectoryError):
        return []
    logs = []
    for name in names:
        path = jobs / name / EVENTS_NAME
        if path.exists():
            logs.append(read_job_log(path, jobid=name))
    return logs


def _decode(raw: bytes) -> dict[str, Any] | str:
    """The event on one line, or what is wrong with the line."""
    try:
        record = json.loads(raw)
    except ValueError:
        return "the line is not valid JSON"
    if not isinstance(record, dict):
        return "the line is not a JSON object"
    when = record.get("time")
    if isinstance(when, bool) or not isinstance(when, int | float) or not math.isfinite(when):
        return "the event has no numeric 'time'"
    if not isinstance(record.get("event"), str):
        return "the event has no 'event' name"
    return record
