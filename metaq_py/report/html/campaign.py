"""A queue's campaign as values for its HTML report, gathered from the public reading
functions of :mod:`metaq_py.report` only: the batch jobs' event logs
(:func:`~metaq_py.report.joblog.read_job_logs`, read by the caller), the accounting totals
(:func:`~metaq_py.report.accounting.build_report`) and each allocation's timeline
(:func:`~metaq_py.report.timeline.build_timeline`). However the queue stores its records, what
these functions return is what the page shows.

A **run** is one ``end`` event: a task's attempt and how it ended. A task is a member of an
array when its identity is the array's followed by a bare index (``todo/run.sh/7``, as
:meth:`~metaq_py.queue.campaign.arrays.ArrayInfo.member` names it). The sizes the page must
keep small on a campaign of 10^5 tasks are bounded here: series are sampled at
:data:`POINTS` instants, and lists keep their :data:`TOP` first rows.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from metaq_py.report.accounting import Report, build_report, event_seconds, named
from metaq_py.report.joblog import JobLog
from metaq_py.report.timeline import Timeline, build_timeline

__all__ = ["POINTS", "TOP", "Campaign", "NoticeHold", "Progress", "Run", "gather"]

POINTS = 120
"""Instants at which a series over time is sampled."""
TOP = 50
"""Rows kept of a ranked list (slowest runs, most retried tasks, preemptions)."""


@dataclass(frozen=True, slots=True)
class Run:
    """One attempt of a task, as its ``end`` event tells it."""

    task: str
    project: str
    outcome: str
    end: float
    seconds: float
    nodes: int
    jobid: str
    attempt: int | None = None
    exit_code: int | None = None
    signal: str | None = None

    @property
    def start(self) -> float:
        return self.end - self.seconds

    @property
    def array(self) -> str | None:
        """The array this task is a member of, or ``None``."""
        head, _, index = self.task.rpartition("/")
        return head if head and index.isdigit() else None


@dataclass(frozen=True, slots=True)
class Progress:
    """Tasks of one group (a project, an array) done over time: ``points`` are
    (time, finished so far, failed so far), sampled; ``tasks`` counts the group's tasks seen."""

    name: str
    tasks: int
    points: tuple[tuple[float, int, int], ...]


@dataclass(frozen=True, slots=True)
class NoticeHold:
    """Nodes held for an advance notice: from its first ``reserve`` to its ``release``
    (``None``: still held when the log ends), and why it ended."""

    notice: str
    jobid: str
    hosts: int
    reserved: float
    released: float | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Campaign:
    """Everything the page shows, from ``jobs`` batch jobs' event logs."""

    report: Report
    timelines: tuple[Timeline, ...]
    runs: tuple[Run, ...]
    preemptions: tuple[dict[str, Any], ...]
    problems: tuple[str, ...]
    notices: tuple[NoticeHold, ...] = ()

    @property
    def span(self) -> tuple[float, float] | None:
        """The first and last moment the logs tell of."""
        ends = [t.start for t in self.timelines] + [r.start for r in self.runs]
        stops = [t.stop for t in self.timelines] + [r.end for r in self.runs]
        return (min(ends), max(stops)) if ends else None

    def tasks(self) -> dict[str, str]:
        """Each task's last outcome."""
        last: dict[str, tuple[float, str]] = {}
        for r in self.runs:
            if r.task not in last or r.end >= last[r.task][0]:
                last[r.task] = (r.end, r.outcome)
        return {t: o for t, (_, o) in last.items()}

    def progress(self, by: str) -> list[Progress]:
        """Tasks finished and failed over time, per ``project`` or per ``array`` (the
        :data:`~metaq_py.report.html.svg.PALETTE`'s count of the largest groups)."""
        final: dict[str, tuple[float, str, str | None]] = {}
        for r in sorted(self.runs, key=lambda r: r.end):
            group = r.project if by == "project" else r.array
            final[r.task] = (r.end, r.outcome, group)
        groups: dict[str, list[tuple[float, str]]] = defaultdict(list)
        for end, outcome, group in final.values():
            if group is not None:
                groups[group].append((end, outcome))
        span = self.span
        if span is None:
            return []
        biggest = sorted(groups, key=lambda g: (-len(groups[g]), g))[:12]
        return [_progress(g, groups[g], span) for g in biggest]

    def slowest(self) -> list[Run]:
        return sorted(self.runs, key=lambda r: -r.seconds)[:TOP]

    def retried(self) -> list[tuple[str, list[Run]]]:
        """Tasks run more than once, most runs first."""
        by_task: dict[str, list[Run]] = defaultdict(list)
        for r in self.runs:
            by_task[r.task].append(r)
        many = [(t, sorted(rs, key=lambda r: r.end)) for t, rs in by_task.items() if len(rs) > 1]
        many.sort(key=lambda item: (-len(item[1]), item[0]))
        return many

    def exit_codes(self) -> Counter[str]:
        """How failed runs ended: ``exit N`` or the signal's name."""
        out: Counter[str] = Counter()
        for r in self.runs:
            if r.outcome in ("failed", "retry"):
                out[r.signal if r.signal else f"exit {r.exit_code}"
                    if r.exit_code is not None else "unknown"] += 1
        return out

    def utilisation(self) -> list[tuple[float, float]]:
        """The share of allocated node time that ran tasks, over :data:`POINTS` intervals."""
        span = self.span
        if span is None or span[1] <= span[0] or not self.timelines:
            return []
        lo, hi = span
        step = (hi - lo) / POINTS
        busy = [0.0] * POINTS
        held = [0.0] * POINTS
        for tl in self.timelines:
            _spread(held, lo, step, tl.start, tl.stop, len(tl.hosts))
            for b in tl.bars:
                _spread(busy, lo, step, b.start, b.end, 1)
        return [(lo + (i + 0.5) * step, busy[i] / held[i] if held[i] > 0 else math.nan)
                for i in range(POINTS)]


def gather(logs: Iterable[JobLog], *, since: float | None = None) -> Campaign:
    """The campaign told by ``logs`` (events at or after ``since``)."""
    logs = list(logs)
    report = build_report(logs, since=since)
    timelines: list[Timeline] = []
    runs: list[Run] = []
    preemptions: list[dict[str, Any]] = []
    notices: list[NoticeHold] = []
    problems = list(report.problems)
    for log in logs:
        events = [e for e in log.events if since is None or e["time"] >= since]
        if any(e["event"] == "runner-start" for e in events):
            timelines.append(build_timeline(events, jobid=log.jobid))
        elif events:
            problems.append(f"{log.path}: no runner-start event, so job {log.jobid} is left "
                            "out of the Gantt and the utilisation.")
        for e in events:
            if e["event"] == "end" and isinstance(e.get("task"), str):
                runs.append(_run(e, log.jobid))
            elif e["event"] == "preempt":
                preemptions.append({**e, "jobid": log.jobid})
        notices += _holds(events, log.jobid)
    return Campaign(report=report, timelines=tuple(timelines), runs=tuple(runs),
                    preemptions=tuple(preemptions), problems=tuple(problems),
                    notices=tuple(notices))


def _holds(events: Sequence[dict[str, Any]], jobid: str) -> list[NoticeHold]:
    """The notices one job held nodes for, from its ``reserve`` and ``release`` events (a
    notice whose on-demand task started holds until that start)."""
    open_: dict[str, NoticeHold] = {}
    done: list[NoticeHold] = []
    for e in events:
        name = e.get("notice")
        if not isinstance(name, str):
            continue
        kind = e["event"]
        if kind == "reserve":
            hosts = len(e.get("hosts") or ())
            held = open_.get(name)
            open_[name] = NoticeHold(name, jobid, hosts, float(e["time"])) if held is None \
                else NoticeHold(name, jobid, held.hosts + hosts, held.reserved)
        elif (kind == "release" or (kind == "start" and e.get("kind") == "ondemand")) \
                and name in open_:
            held = open_.pop(name)
            reason = str(e.get("reason") or "") if kind == "release" else "redeemed"
            done.append(NoticeHold(name, jobid, held.hosts, held.reserved, float(e["time"]),
                                   reason or None))
    return done + list(open_.values())


def _run(e: dict[str, Any], jobid: str) -> Run:
    project = named(e, "project")
    hosts = e.get("hosts") if isinstance(e.get("hosts"), list) else []
    code = e.get("exit_code")
    attempt = e.get("attempt")
    return Run(task=e["task"], project=project, outcome=str(e.get("outcome", "unknown")),
               end=float(e["time"]), seconds=event_seconds(e.get("seconds")),
               nodes=len(hosts), jobid=jobid,
               attempt=attempt if isinstance(attempt, int) else None,
               exit_code=code if isinstance(code, int) and not isinstance(code, bool) else None,
               signal=e.get("signal") if isinstance(e.get("signal"), str) else None)


def _progress(name: str, ends: Sequence[tuple[float, str]], span: tuple[float, float]
              ) -> Progress:
    ordered = sorted(ends)
    lo, hi = span
    points: list[tuple[float, int, int]] = []
    done = failed = 0
    i = 0
    for k in range(POINTS + 1):
        t = lo + (hi - lo) * k / POINTS
        while i < len(ordered) and ordered[i][0] <= t:
            done += ordered[i][1] == "finished"
            failed += ordered[i][1] == "failed"
            i += 1
        points.append((t, done, failed))
    return Progress(name, len(ordered), tuple(points))


def _spread(bins: list[float], lo: float, step: float, a: float, b: float, weight: int) -> None:
    """Add ``weight`` times the overlap of ``[a, b)`` with each bin."""
    if b <= a or step <= 0:
        return
    first = max(int((a - lo) // step), 0)
    last = min(int((b - lo) // step), len(bins) - 1)
    for i in range(first, last + 1):
        left, right = lo + i * step, lo + (i + 1) * step
        overlap = min(b, right) - max(a, left)
        if overlap > 0:
            bins[i] += overlap * weight
