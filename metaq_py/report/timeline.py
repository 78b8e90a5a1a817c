"""One allocation's history as bars on hosts: who ran where and when, rebuilt from its event
log. :mod:`metaq_py.report.gantt` draws it; tests and tools can read it as values.

A :class:`Bar` is one task on one host for one stretch of time. The ``hosts`` of a ``shrink``
or ``expand`` event are the task's hosts after the change: a task that is shrunk loses the bars
of the hosts it lent at that moment, and gets new ones when it is expanded. A
:class:`Hold` is a host held for a notice, from ``reserve`` to ``release`` (or to the start
of the on-demand task that redeems it). A :class:`Mark` is an instant on a host: a
preemption, a shrink, an expansion.

Work still open when the log ends is closed at the ``runner-stop``, else at the last event,
with no outcome. A second ``runner-start`` in the same log (a requeued batch job) closes
everything still open at that moment.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["Bar", "Hold", "Mark", "Timeline", "build_timeline"]


@dataclass(frozen=True, slots=True)
class Bar:
    """``task`` ran on ``host`` from ``start`` to ``end``. ``outcome`` is the ``end`` event's
    (``finished``, ``preempted``, ...), ``shrunk`` when the host was lent away, ``None``
    when the log ends first."""

    host: str
    task: str
    start: float
    end: float
    kind: str | None = None
    outcome: str | None = None


@dataclass(frozen=True, slots=True)
class Hold:
    """``host`` was held for ``notice`` from ``start`` to ``end``."""

    host: str
    notice: str
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class Mark:
    """Something happened to ``task`` on ``host`` at ``time``: ``preempt``, ``shrink`` or
    ``expand``."""

    host: str
    time: float
    what: str
    task: str


@dataclass(frozen=True, slots=True)
class Timeline:
    """The history of batch job ``jobid``: its ``hosts`` in allocation order, from ``start``
    (the first ``runner-start``) to ``stop``, the ``runner-stop`` when ``stopped`` is true,
    else the last event; ``end`` is the end of the allocation (``None``: no limit)."""

    jobid: str
    machine: str | None
    mechanism: str | None
    hosts: tuple[str, ...]
    start: float
    stop: float
    end: float | None
    bars: tuple[Bar, ...]
    holds: tuple[Hold, ...]
    marks: tuple[Mark, ...]
    stopped: bool = False

    def busy_seconds(self, host: str) -> float:
        """Seconds ``host`` ran a task."""
        return sum(b.end - b.start for b in self.bars if b.host == host)

    def idle_seconds(self) -> float:
        """Node-seconds with no task between ``start`` and ``stop``, over all hosts."""
        span = self.stop - self.start
        return sum(span - self.busy_seconds(h) for h in self.hosts)


def build_timeline(events: Iterable[dict[str, Any]], *, jobid: str) -> Timeline:
    """The timeline of one job's events (in the order written). Raises ``ValueError`` when
    they hold no ``runner-start``, as the log of a job that never ran metaq."""
    hosts: list[str] = []
    bars: list[Bar] = []
    holds: list[Hold] = []
    marks: list[Mark] = []
    on: dict[str, dict[str, float]] = {}  # task -> host -> since
    kinds: dict[str, str | None] = {}
    held: dict[str, dict[str, float]] = {}  # notice -> host -> since
    head: dict[str, Any] | None = None
    stop: float | None = None
    last = 0.0

    def close(task: str, which: Iterable[str], t: float, outcome: str | None) -> None:
        open_ = on.get(task, {})
        for h in list(which):
            since = open_.pop(h, None)
            if since is not None:
                bars.append(Bar(h, task, since, t, kinds.get(task), outcome))
        if not open_:
            on.pop(task, None)

    def unhold(notice: str, t: float) -> None:
        for h, since in held.pop(notice, {}).items():
            holds.append(Hold(h, notice, since, t))

    for e in events:
        kind, t = e["event"], float(e["time"])
        last = max(last, t)
        task = e.get("task")
        ehosts = [str(h) for h in e.get("hosts") or () if isinstance(h, str | int)]
        if kind == "runner-start":
            for name in list(on):
                close(name, list(on[name]), t, None)
            for notice in list(held):
                unhold(notice, t)
            if head is None:
                head = e
            end = e.get("end")
            head = {**head, "end": end, "mechanism": e.get("mechanism", head.get("mechanism"))}
            hosts.extend(h for h in ehosts if h not in hosts)
            stop = None
            continue
        if head is None:
            continue
        if kind == "runner-stop":
            stop = t
        elif kind == "start" and isinstance(task, str):
            kinds[task] = e.get("kind") if isinstance(e.get("kind"), str) else None
            on.setdefault(task, {}).update({h: t for h in ehosts})
            if e.get("kind") == "ondemand" and isinstance(e.get("notice"), str):
                unhold(e["notice"], t)
        elif kind == "end" and isinstance(task, str):
            close(task, list(on.get(task, {})), t, str(e.get("outcome") or "ended"))
        elif kind == "preempt" and isinstance(task, str):
            marks.extend(Mark(h, t, "preempt", task) for h in on.get(task, {}))
        elif kind in ("shrink", "expand") and isinstance(task, str) and task in on:
            # ``hosts`` is the task's host list after the change.
            gone = [h for h in on[task] if h not in ehosts]
            added = [h for h in ehosts if h not in on[task]]
            marks.extend(Mark(h, t, kind, task) for h in (*gone, *added))
            on[task].update({h: t for h in added})
            close(task, gone, t, "shrunk")
        elif kind == "reserve" and isinstance(e.get("notice"), str):
            mine = held.setdefault(e["notice"], {})
            for h in ehosts:
                mine.setdefault(h, t)
        elif kind == "release" and isinstance(e.get("notice"), str):
            unhold(e["notice"], t)
    if head is None:
        raise ValueError(f"the event log of job {jobid} has no runner-start event")
    final = stop if stop is not None else last
    for name in list(on):
        close(name, list(on[name]), final, None)
    for notice in list(held):
        unhold(notice, final)
    end = head.get("end")
    return Timeline(
        jobid=jobid, machine=head.get("machine"), mechanism=head.get("mechanism"),
        hosts=tuple(hosts), start=float(head["time"]), stop=final,
        end=float(end) if isinstance(end, int | float) and not isinstance(end, bool) else None,
        bars=tuple(sorted(bars, key=lambda b: (b.start, b.host))),
        holds=tuple(holds), marks=tuple(marks), stopped=stop is not None)
