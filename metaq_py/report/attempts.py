"""A task's attempts, as ``metaq show`` tells them: every start of it, with its nodes, how
long it ran, how it ended and where its output is.

Nothing new is recorded for this: a task's logbook names the batch job of every run that
ended (:mod:`metaq_py.queue.logbook`), a running task's lease names its job, and each job's
event log has the ``start`` and ``end`` of every task it ran (``docs/events.md``). The
attempts are those starts and ends, paired in the order written, job by job in the order the
logbook met them. A task's output goes to its job's ``logs/<folder>/<relpath>.log`` (and to
its ``LOG`` as well, when it names one).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metaq_py.errors import QueueError
from metaq_py.queue.layout import Layout
from metaq_py.report.joblog import EVENTS_NAME, read_job_log

__all__ = ["Attempt", "last_starts", "retry_words", "task_attempts"]


@dataclass(frozen=True, slots=True)
class Attempt:
    """One start of a task. ``number``: the attempt as the runner counted it
    (``METAQ_ATTEMPT``); ``outcome`` is ``None`` while it runs (``docs/events.md`` lists the
    others); ``seconds``: how long its process ran; ``output``: the files its output went to
    that exist now."""

    number: int
    job: str
    start: float
    hosts: tuple[str, ...]
    cores: tuple[int, ...] | None
    outcome: str | None
    exit_code: int | None
    signal: str | None
    seconds: float | None
    output: tuple[Path, ...]

    def to_json(self) -> dict[str, Any]:
        return {"attempt": self.number, "job": self.job, "start": self.start,
                "hosts": list(self.hosts), "cores": None if self.cores is None
                else list(self.cores), "outcome": self.outcome, "exit_code": self.exit_code,
                "signal": self.signal, "seconds": self.seconds,
                "output": [str(p) for p in self.output]}


def task_attempts(q: Layout, task: str, jobs: Iterable[str], *,
                  log: Path | None = None) -> list[Attempt]:
    """Every attempt of the task with identity ``task`` (``todo/run.sh``) that the event logs
    of ``jobs`` tell, oldest first. ``log``: the task's own ``LOG``, when it has one."""
    folder, _, relpath = task.partition("/")
    out: list[Attempt] = []
    for job in dict.fromkeys(jobs):  # each job once, in the order met
        try:
            path = q.job_dir(job) / EVENTS_NAME
        except QueueError:  # a job id that names no folder under jobs/ has no events
            continue
        events = [e for e in read_job_log(path, jobid=job).events
                  if e.get("task") == task and e["event"] in ("start", "end")]
        default_log = q.job_dir(job) / "logs" / folder / f"{relpath}.log"
        output = tuple(p for p in (default_log, log) if p is not None and p.is_file())
        started: dict[str, Any] | None = None
        for e in events:
            if e["event"] == "start":
                if started is not None:  # a start with no end: the job died under it
                    out.append(_attempt(job, started, None, output))
                started = e
            elif started is not None:
                out.append(_attempt(job, started, e, output))
                started = None
        if started is not None:
            out.append(_attempt(job, started, None, output))
    return out


def retry_words(attempt: int, retries: int) -> str:
    """What an attempt is, for people: ``first attempt``, or ``retry 1 of 2`` for the second
    of a task with ``RETRIES 2`` (a requeue after a preemption or the end of an allocation
    also starts a new attempt number only when it was counted)."""
    if attempt <= 1:
        return "first attempt"
    return f"retry {attempt - 1} of {retries}" if attempt - 1 <= retries \
        else f"attempt {attempt}"


def _attempt(job: str, start: dict[str, Any], end: dict[str, Any] | None,
             output: tuple[Path, ...]) -> Attempt:
    hosts = start.get("hosts")
    cores = start.get("cores")
    number = start.get("attempt")
    seconds = end.get("seconds") if end is not None else None
    code = end.get("exit_code") if end is not None else None
    return Attempt(
        number=number if isinstance(number, int) else 0, job=job, start=float(start["time"]),
        hosts=tuple(str(h) for h in hosts) if isinstance(hosts, list) else (),
        cores=tuple(c for c in cores if isinstance(c, int)) if isinstance(cores, list)
        else None,
        outcome=str(end.get("outcome")) if end is not None else None,
        exit_code=code if isinstance(code, int) and not isinstance(code, bool) else None,
        signal=str(end["signal"]) if end is not None and end.get("signal") else None,
        seconds=float(seconds) if isinstance(seconds, int | float) else None,
        output=output)


def last_starts(q: Layout, jobid: str) -> dict[str, dict[str, Any]]:
    """The last ``start`` event of each task in the event log of batch job ``jobid``, by task
    identity: where each of its tasks runs now (or ran last). One read of the log."""
    try:
        path = q.job_dir(jobid) / EVENTS_NAME
    except QueueError:
        return {}
    return {str(e.get("task")): e for e in read_job_log(path, jobid=jobid).of("start")}
