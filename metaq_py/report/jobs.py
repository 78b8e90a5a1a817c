"""The batch jobs a queue has seen, past and present, as ``metaq jobs`` lists them: one
:class:`JobRecord` per event log, ``jobs/<jobid>/events.jsonl``, from its ``runner-start``,
its ``end`` events and its ``runner-stop``. ``metaq gantt`` without a job id draws the
latest (:func:`latest`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from metaq_py.report.joblog import JobLog

__all__ = ["JobRecord", "job_record", "latest"]


@dataclass(frozen=True, slots=True)
class JobRecord:
    """One batch job that ran ``metaq run`` on the queue. ``start``: when its runner began
    (``None``: its log has no ``runner-start``); ``stop`` and ``reason``: when and why it
    stopped (``None`` while it runs, or when it was killed outright); ``ended``: its
    attempts by outcome."""

    jobid: str
    machine: str | None
    nodes: int
    start: float | None
    stop: float | None
    reason: str | None
    ended: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        return {"job": self.jobid, "machine": self.machine, "nodes": self.nodes,
                "start": self.start, "stop": self.stop, "reason": self.reason,
                "ended": dict(self.ended)}


def job_record(log: JobLog) -> JobRecord:
    """What the event log ``log`` says of its batch job (the last runner's, if the job id
    was used twice)."""
    start = stop = None
    machine = reason = None
    nodes = 0
    ended: Counter[str] = Counter()
    for e in log.events:
        kind = e["event"]
        if kind == "runner-start":
            start, stop, reason, ended = float(e["time"]), None, None, Counter()
            hosts = e.get("hosts")
            nodes = len(hosts) if isinstance(hosts, list) else 0
            machine = str(e["machine"]) if e.get("machine") is not None else None
        elif kind == "runner-stop":
            stop = float(e["time"])
            reason = str(e["reason"]) if e.get("reason") is not None else None
        elif kind == "end":
            ended[str(e.get("outcome"))] += 1
    return JobRecord(log.jobid, machine, nodes, start, stop, reason, dict(ended))


def latest(records: Iterable[JobRecord]) -> JobRecord | None:
    """The job whose runner started last, or ``None``."""
    started = [r for r in records if r.start is not None]
    return max(started, key=lambda r: (r.start, r.jobid)) if started else None
