"""One allocation's history as bars on hosts: who ran where and when, rebuilt from its event
log. :mod:`metaq_py.report.gantt` draws it; tests and tools can read it as values.

A :class:`Bar` is one task on one host for one stretch of time. The ``hosts`` of a ``shrink``
or ``expand`` event are the task's hosts after the change: a task that is shrunk loses the bars
of the hosts it lent at that moment, and gets new ones when it is expanded. A task holding a
share of a node (some of its cores, from its ``start`` event's ``cores``) takes that part of
the host (:meth:`Timeline.parts`), so shares side by side on a node are drawn side by side and
count for their part of the node's time. A
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
from typing import Any, TypeGuard

__all__ = ["Bar", "Hold", "Mark", "Timeline", "build_timeline"]


@dataclass(frozen=True, slots=True)
class Bar:
    """``task`` ran on ``host`` from ``start`` to ``end``. ``outcome`` is the ``end`` event's
    (``finished``, ``preempted``, ...), ``shrunk`` when the host was lent away, ``None``
    when the log ends first. ``cores`` are the ids of the cores a share of the node held
    (``None``: the whole node)."""

    host: str
    task: str
    start: float
    end: float
    kind: str | None = None
    outcome: str | None = None
    cores: tuple[int, ...] | None = None


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
    else the last event; ``end`` is the end of the allocation (``None``: no limit).
    ``cores_per_node`` is the runner's (its ``runner-start`` says), else, for a log that does
    not say, one past the highest core a share held (``None`` without shares)."""

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
    cores_per_node: int | None = None

    def parts(self, bar: Bar) -> list[tuple[float, float]]:
        """The part of its host's row ``bar`` takes, as ``(from, height)`` fractions of the
        node: ``[(0, 1)]`` for the whole node; for a share, one part per run of neighbouring
        cores, in its cores' place on the node (core ``c`` of ``n`` from ``c / n``)."""
        n = self.cores_per_node
        if bar.cores is None or not bar.cores or not n:
            return [(0.0, 1.0)]
        runs: list[list[int]] = []
        for c in sorted(set(bar.cores)):
            if runs and c == runs[-1][1]:
                runs[-1][1] = c + 1
            else:
                runs.append([c, c + 1])
        return [(lo / n, (hi - lo) / n) for lo, hi in runs if lo < n]

    def busy_seconds(self, host: str) -> float:
        """Node-seconds ``host`` ran tasks: a share's time counts for its part of the node."""
        return sum((b.end - b.start) * sum(h for _, h in self.parts(b))
                   for b in self.bars if b.host == host)

    def idle_seconds(self) -> float:
        """Node-seconds with no task between ``start`` and ``stop``, over all hosts."""
        span = self.stop - self.start
        return sum(span - self.busy_seconds(h) for h in self.hosts)


class _Replay:
    """One pass over a job's events, keeping the bars, holds and marks open so far."""

    def __init__(self) -> None:
        self.hosts: list[str] = []
        self.bars: list[Bar] = []
        self.holds: list[Hold] = []
        self.marks: list[Mark] = []
        self.on: dict[str, dict[str, float]] = {}  # task -> host -> since
        self.kinds: dict[str, str | None] = {}
        self.cores: dict[str, tuple[int, ...] | None] = {}  # task -> a share's cores
        self.held: dict[str, dict[str, float]] = {}  # notice -> host -> since
        self.head: dict[str, Any] | None = None
        self.stop: float | None = None
        self.last = 0.0

    def close(self, task: str, which: Iterable[str], t: float, outcome: str | None) -> None:
        open_ = self.on.get(task, {})
        for h in list(which):
            since = open_.pop(h, None)
            if since is not None:
                self.bars.append(Bar(h, task, since, t, self.kinds.get(task), outcome,
                                     self.cores.get(task)))
        if not open_:
            self.on.pop(task, None)

    def unhold(self, notice: str, t: float) -> None:
        for h, since in self.held.pop(notice, {}).items():
            self.holds.append(Hold(h, notice, since, t))

    def close_all(self, t: float) -> None:
        for name in list(self.on):
            self.close(name, list(self.on[name]), t, None)
        for notice in list(self.held):
            self.unhold(notice, t)

    def runner_start(self, e: dict[str, Any], t: float, ehosts: list[str]) -> None:
        self.close_all(t)
        head = self.head if self.head is not None else e
        self.head = {**head, "end": e.get("end"),
                     "mechanism": e.get("mechanism", head.get("mechanism"))}
        self.hosts.extend(h for h in ehosts if h not in self.hosts)
        self.stop = None

    def event(self, e: dict[str, Any]) -> None:
        kind, t = e["event"], float(e["time"])
        self.last = max(self.last, t)
        task = e.get("task")
        ehosts = [str(h) for h in e.get("hosts") or () if isinstance(h, str | int)]
        if kind == "runner-start":
            self.runner_start(e, t, ehosts)
        elif self.head is None:
            return
        elif kind == "runner-stop":
            self.stop = t
        elif kind == "start" and isinstance(task, str):
            self.kinds[task] = e.get("kind") if isinstance(e.get("kind"), str) else None
            cores = e.get("cores")
            self.cores[task] = tuple(c for c in cores if _count(c)) \
                if isinstance(cores, list) else None
            self.on.setdefault(task, {}).update({h: t for h in ehosts})
            if e.get("kind") == "ondemand" and isinstance(e.get("notice"), str):
                self.unhold(e["notice"], t)
        elif kind == "end" and isinstance(task, str):
            self.close(task, list(self.on.get(task, {})), t, str(e.get("outcome") or "ended"))
        elif kind == "preempt" and isinstance(task, str):
            self.marks.extend(Mark(h, t, "preempt", task) for h in self.on.get(task, {}))
        elif kind in ("shrink", "expand") and isinstance(task, str) and task in self.on:
            # ``hosts`` is the task's host list after the change.
            gone = [h for h in self.on[task] if h not in ehosts]
            added = [h for h in ehosts if h not in self.on[task]]
            self.marks.extend(Mark(h, t, kind, task) for h in (*gone, *added))
            self.on[task].update({h: t for h in added})
            self.close(task, gone, t, "shrunk")
        elif kind == "reserve" and isinstance(e.get("notice"), str):
            mine = self.held.setdefault(e["notice"], {})
            for h in ehosts:
                mine.setdefault(h, t)
        elif kind == "release" and isinstance(e.get("notice"), str):
            self.unhold(e["notice"], t)


def build_timeline(events: Iterable[dict[str, Any]], *, jobid: str) -> Timeline:
    """The timeline of one job's events (in the order written). Raises ``ValueError`` when
    they hold no ``runner-start``, as the log of a job that never ran metaq."""
    replay = _Replay()
    for e in events:
        replay.event(e)
    head = replay.head
    if head is None:
        raise ValueError(f"the event log of job {jobid} has no runner-start event")
    final = replay.stop if replay.stop is not None else replay.last
    replay.close_all(final)
    end = head.get("end")
    cores = head.get("cores_per_node")
    held = [c for b in replay.bars for c in b.cores or ()]
    per_node = cores if _count(cores) and cores > 0 else (max(held) + 1 if held else None)
    return Timeline(
        jobid=jobid, machine=head.get("machine"), mechanism=head.get("mechanism"),
        hosts=tuple(replay.hosts), start=float(head["time"]), stop=final,
        end=float(end) if isinstance(end, int | float) and not isinstance(end, bool) else None,
        bars=tuple(sorted(replay.bars, key=lambda b: (b.start, b.host))),
        holds=tuple(replay.holds), marks=tuple(replay.marks), stopped=replay.stop is not None,
        cores_per_node=per_node)


def _count(value: object) -> TypeGuard[int]:
    """Whether ``value`` is a whole number of the log (a core id, a count), not a bool."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
