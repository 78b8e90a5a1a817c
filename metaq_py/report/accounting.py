"""Accounting: what the batch jobs of a queue spent, per project and per user, and what the
on-demand layer did, totalled from their event logs (``metaq report``).

Node-hours and GPU-hours come from ``end`` events (``node_seconds``, ``gpu_seconds``), whatever
the outcome: a failed or preempted run used its nodes too. A task without ``PROJECT`` counts
under ``-``, and so does a run whose event does not name its ``user`` (the owner of the task
file; event logs written before runners named it). Outcomes are counted per run:
``finished``, ``soft-failed`` (finished with a warning), ``skipped`` (its outputs existed),
``failed`` (no retries left), ``retry`` (failed, run again), ``timeout`` (stopped at its
``TIME_LIMIT``), ``oom``, ``requeued`` (a ``REQUEUE_ON`` code, or interrupted by the end of
the allocation), ``preempted`` (for on-demand work), ``reclaimed`` (its job died) and
``cancelled`` (see :mod:`metaq_py.outcomes`).

The on-demand section: the instant-start rate is the share of on-demand starts the runner
marked ``instant`` (started at once on arrival), counted over starts where it said either way.
Preemptions and shrinks are counted from ``preempt`` and ``shrink`` events, and the node-hours
lost to preemption are the sum of ``lost_node_seconds`` of ``preempt`` events.

CPU efficiency is ``seff``'s: the CPU time (user plus system) of a project's runs over the
cores they held times their wall time (``core_seconds``), counted over the runs whose ``end``
event carries both (a run whose figures are unknown, such as a SLURM step without accounting,
is left out of both sides).

``--since`` keeps events at or after a moment (a date, a date-time, ``today`` or
``yesterday`` from local midnight, or a duration ago); a run counts when its ``end`` does.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from metaq_py.durations import DurationError, parse_duration
from metaq_py.outcomes import OUTCOMES as ALL_OUTCOMES
from metaq_py.report.joblog import JobLog

__all__ = ["OUTCOMES", "UNNAMED", "OnDemand", "Report", "Use", "build_report", "cpu_seconds",
           "event_seconds", "named", "parse_since"]

OUTCOMES = ALL_OUTCOMES
"""The outcomes an ``end`` event may carry, in the order reports show them
(:data:`metaq_py.outcomes.OUTCOMES`)."""

UNNAMED = "-"
"""The project of a task without ``PROJECT``, and the user of a run whose event names none."""


@dataclass(frozen=True, slots=True)
class Use:
    """What the runs of one project, or of one user, used: node-hours, GPU-hours and runs per
    outcome; ``cpu_hours`` (user plus system) and ``core_hours`` (cores held times wall time)
    over the ``measured`` runs whose usage is known. ``name`` is the project's or the user's."""

    name: str
    node_hours: float = 0.0
    gpu_hours: float = 0.0
    runs: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    cpu_hours: float = 0.0
    core_hours: float = 0.0
    measured: int = 0

    @property
    def cpu_efficiency(self) -> float | None:
        """CPU time over cores times wall time, as ``seff`` prints it (``None``: no measured
        run held cores)."""
        return self.cpu_hours / self.core_hours if self.core_hours > 0 else None


@dataclass(frozen=True, slots=True)
class OnDemand:
    """The on-demand layer's record: ``starts`` of on-demand tasks, of which ``instant``
    started at once (``rate`` is ``instant / known``, ``None`` with no known starts),
    ``arrivals`` seen, ``preemptions``, ``shrinks`` and node-hours lost to preemption."""

    starts: int = 0
    known: int = 0
    instant: int = 0
    arrivals: int = 0
    preemptions: int = 0
    shrinks: int = 0
    lost_node_hours: float = 0.0

    @property
    def rate(self) -> float | None:
        return self.instant / self.known if self.known else None


@dataclass(frozen=True, slots=True)
class Report:
    """The totals over ``jobs`` batch jobs since ``since`` (``None``: all time).

    ``projects`` and ``users`` are sorted by name, and each counts every run once; ``outcomes``
    counts runs of every project; ``problems`` are the event-log lines that were skipped, one
    sentence each.
    """

    since: float | None
    jobs: int
    projects: tuple[Use, ...]
    outcomes: dict[str, int]
    ondemand: OnDemand
    reclaims: int = 0
    problems: tuple[str, ...] = ()
    users: tuple[Use, ...] = ()

    @property
    def node_hours(self) -> float:
        return sum(p.node_hours for p in self.projects)

    @property
    def gpu_hours(self) -> float:
        return sum(p.gpu_hours for p in self.projects)

    def to_json(self) -> dict[str, Any]:
        """The report as plain JSON values (``metaq report --json``)."""
        od = self.ondemand
        return {
            "since": self.since,
            "jobs": self.jobs,
            "node_hours": self.node_hours,
            "gpu_hours": self.gpu_hours,
            "outcomes": self.outcomes,
            "projects": [{"project": p.name, **_use_json(p)} for p in self.projects],
            "users": [{"user": u.name, **_use_json(u)} for u in self.users],
            "ondemand": {"starts": od.starts, "instant": od.instant, "known": od.known,
                         "instant_rate": od.rate, "arrivals": od.arrivals,
                         "preemptions": od.preemptions, "shrinks": od.shrinks,
                         "lost_node_hours": od.lost_node_hours},
            "reclaims": self.reclaims,
            "problems": list(self.problems),
        }


def _use_json(u: Use) -> dict[str, Any]:
    return {"node_hours": u.node_hours, "gpu_hours": u.gpu_hours, "runs": u.runs,
            "outcomes": u.outcomes, "cpu_hours": u.cpu_hours, "core_hours": u.core_hours,
            "measured_runs": u.measured, "cpu_efficiency": u.cpu_efficiency}


class _Sums:
    """The running totals of the runs of one project or one user, from their ``end``
    events."""

    __slots__ = ("core", "cpu", "gpu", "measured", "node", "outcomes", "runs")

    def __init__(self) -> None:
        self.node = self.gpu = self.cpu = self.core = 0.0
        self.runs = self.measured = 0
        self.outcomes: Counter[str] = Counter()

    def add(self, e: dict[str, Any], outcome: str) -> None:
        self.node += event_seconds(e.get("node_seconds"))
        self.gpu += event_seconds(e.get("gpu_seconds"))
        self.runs += 1
        cpu = cpu_seconds(e)
        if cpu is not None and event_seconds(e.get("core_seconds")) > 0:
            self.cpu += cpu
            self.core += event_seconds(e.get("core_seconds"))
            self.measured += 1
        self.outcomes[outcome] += 1

    def use(self, name: str) -> Use:
        return Use(name, self.node / 3600.0, self.gpu / 3600.0, self.runs,
                   _ordered(self.outcomes), self.cpu / 3600.0, self.core / 3600.0, self.measured)


def named(e: dict[str, Any], field: str) -> str:
    """An event's ``project`` or ``user`` (``field``), or :data:`UNNAMED` where it names
    none."""
    value = e.get(field)
    return value if isinstance(value, str) and value else UNNAMED


def build_report(logs: Iterable[JobLog], *, since: float | None = None) -> Report:
    """Total the events of ``logs`` at or after ``since``."""
    projects: dict[str, _Sums] = {}
    users: dict[str, _Sums] = {}
    outcomes: Counter[str] = Counter()
    od: Counter[str] = Counter()
    lost = 0.0
    jobs = 0
    problems: list[str] = []
    for log in logs:
        problems.extend(log.problems)
        counted = False
        for e in log.events:
            if since is not None and e["time"] < since:
                continue
            kind = e["event"]
            if kind == "end":
                outcome = str(e.get("outcome", "unknown"))
                projects.setdefault(named(e, "project"), _Sums()).add(e, outcome)
                users.setdefault(named(e, "user"), _Sums()).add(e, outcome)
                outcomes[outcome] += 1
            elif kind == "start" and e.get("kind") == "ondemand":
                od["starts"] += 1
                if isinstance(e.get("instant"), bool):
                    od["known"] += 1
                    od["instant"] += e["instant"]
            elif kind == "arrival":
                od["arrivals"] += 1
            elif kind == "preempt":
                od["preemptions"] += 1
                lost += event_seconds(e.get("lost_node_seconds"))
            elif kind == "shrink":
                od["shrinks"] += 1
            elif kind == "reclaim":
                od["reclaims"] += 1
            counted = True
        jobs += counted
    return Report(
        since=since, jobs=jobs, projects=tuple(projects[p].use(p) for p in sorted(projects)),
        outcomes=_ordered(outcomes),
        ondemand=OnDemand(starts=od["starts"], known=od["known"], instant=od["instant"],
                          arrivals=od["arrivals"], preemptions=od["preemptions"],
                          shrinks=od["shrinks"], lost_node_hours=lost / 3600.0),
        reclaims=od["reclaims"], problems=tuple(problems),
        users=tuple(users[u].use(u) for u in sorted(users)))


_NOT_A_DATE = ("{text!r} is not a date; use YYYY-MM-DD, YYYY-MM-DDTHH:MM, today, yesterday "
               "or a duration ago such as 7d")

DAYS_AGO = {"today": 0, "yesterday": 1}
"""The words ``--since`` takes for a local midnight: today's, or the one before."""


def parse_since(text: str, *, now: float) -> float:
    """Read ``--since``: an ISO-8601 date (``2025-03-01``, from local midnight) or date-time
    (``2025-03-01T14:30``), ``today`` or ``yesterday`` (from that day's local midnight, or
    its first moment where summer time skips midnight), or a duration meaning that long ago
    (``7d``, ``12h``, ``90m``). Raises
    :class:`~metaq_py.durations.DurationError` in one sentence."""
    s = text.strip()
    if s.lower() in DAYS_AGO:
        day = datetime.fromtimestamp(now).date() - timedelta(days=DAYS_AGO[s.lower()])
        return datetime(day.year, day.month, day.day).timestamp()
    if re.match(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}", s):
        try:
            moment = datetime.fromisoformat(s)
        except ValueError:
            raise DurationError(_NOT_A_DATE.format(text=text)) from None
        return moment.timestamp()
    try:
        return now - parse_duration(s)
    except DurationError:
        raise DurationError(_NOT_A_DATE.format(text=text)) from None


def event_seconds(value: object) -> float:
    """A non-negative finite number from an event field; anything else counts as zero."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    return float(value) if math.isfinite(value) and value > 0 else 0.0


def cpu_seconds(e: dict[str, Any]) -> float | None:
    """User plus system CPU seconds of an ``end`` event; ``None`` when it does not say."""
    user, system = e.get("cpu_user_seconds"), e.get("cpu_system_seconds")
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (user, system)):
        return None
    return event_seconds(user) + event_seconds(system)


def _ordered(counts: Counter[str]) -> dict[str, int]:
    known = {o: counts[o] for o in OUTCOMES if counts[o]}
    known.update({o: n for o, n in sorted(counts.items()) if o not in OUTCOMES and n})
    return known
