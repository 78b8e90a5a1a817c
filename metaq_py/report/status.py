"""``metaq status`` as a value: everything the command shows, read once, drawn by the CLI.

A :class:`QueueStatus` holds the tasks counted per state, task folder, campaign folder and
project (:mod:`metaq_py.report.summary`), the tasks running now with their hosts and time
left, the live allocations with the nodes they hold for notices or have lent, the notices,
the allocations ``metaq alloc`` submitted with their state at its last pass, and the problems
found on the way (unreadable event-log lines and notice files, one sentence each). The table
view, ``--json`` and ``--watch`` (:mod:`metaq_py.cli.status_view`) all draw this one value, and
any other view (a Prometheus exposition, say) can be drawn from it too.

Running tasks come from the leases (the truth of what is claimed) and their hosts from the
runners' ``start``, ``shrink`` and ``expand`` events. A task's time left is what remains of its
``MIN_WC_TIME`` (or the queue's default) since it started, cut at the end of its allocation.
The event logs are read through :mod:`metaq_py.report.logcache`, so a past job's log is read
once, not on every call. Nothing here asks the batch system or writes the queue (but the
caches of :mod:`~metaq_py.report.summary` and :mod:`~metaq_py.report.logcache`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from metaq_py.alloc.journal import allocations as alloc_made
from metaq_py.durations import format_duration
from metaq_py.queue.lease import Claim
from metaq_py.queue.notices import NoticeFile, read_notices
from metaq_py.queue.store import Queue
from metaq_py.report.allocations import JobView, live_views
from metaq_py.report.logcache import JobDigest, job_digests
from metaq_py.report.summary import QueueCounts, queue_counts

__all__ = ["AllocationNow", "NoticeNow", "QueueStatus", "RunningNow", "notice_state",
           "read_status"]


@dataclass(frozen=True, slots=True)
class RunningNow:
    """A task running now: its identity, the batch job (``job``) and machine that hold it,
    its hosts (empty when its job's log does not say), when it started, the seconds it has
    left, and whether its job is live (a job found dead keeps its claims until they are taken
    back)."""

    task: str
    job: str
    machine: str
    hosts: tuple[str, ...]
    start: float
    time_left: float
    live: bool


@dataclass(frozen=True, slots=True)
class AllocationNow:
    """A live allocation running metaq: its nodes, how many are idle, its end (``None``: no
    limit) and the seconds left, its scheduler, the hosts it holds for each notice and those
    its malleable tasks have lent (``(task, to, hosts)``)."""

    job: str
    machine: str | None
    nodes: int
    idle: int
    end: float | None
    time_left: float | None
    mechanism: str | None
    reserved: Mapping[str, tuple[str, ...]]
    lent: tuple[tuple[str, str, tuple[str, ...]], ...]


@dataclass(frozen=True, slots=True)
class NoticeNow:
    """An advance notice as it stands: its file's values and its state (``in <duration>``
    before its arrival, ``due`` until its release, then ``released``)."""

    name: str
    nodes: int
    arrival: float
    walltime: float
    issued: float
    who: str
    state: str


@dataclass(frozen=True, slots=True)
class QueueStatus:
    """What ``metaq status`` shows, at ``now`` (see the module text). ``alloc`` is the last
    allocations ``metaq alloc`` submitted (:func:`metaq_py.alloc.journal.allocations`)."""

    queue: str
    now: float
    counts: QueueCounts
    running: tuple[RunningNow, ...]
    allocations: tuple[AllocationNow, ...]
    notices: tuple[NoticeNow, ...]
    alloc: tuple[Mapping[str, Any], ...]
    problems: tuple[str, ...]
    delayed: tuple[tuple[str, float], ...] = ()
    """The waiting tasks still in their retry delay, each with when it becomes eligible."""
    outcomes: Mapping[str, int] | None = None
    """The runs the queue's batch jobs ended, counted by outcome (the ``end`` events' words:
    ``finished``, ``oom``, ``timeout``, ...), most first."""

    def json(self) -> dict[str, Any]:
        """The value as ``metaq status --json`` prints it."""
        counts = self.counts
        return {
            "queue": self.queue,
            "states": {s: dict(sorted(c.items())) for s, c in counts.states.items()},
            "totals": counts.totals(),
            "projects": {p: dict(c) for p, c in sorted(counts.projects.items())},
            "campaigns": {f: dict(c) for f, c in sorted(counts.campaigns.items())},
            "invalid": [{"task": b.id, "reason": b.reason} for b in counts.invalid],
            "running": [{"task": r.task, "job": r.job, "machine": r.machine,
                         "hosts": list(r.hosts), "start": r.start, "time_left": r.time_left,
                         "live": r.live} for r in self.running],
            "allocations": [{"job": a.job, "machine": a.machine, "nodes": a.nodes,
                             "idle": a.idle, "end": a.end, "time_left": a.time_left,
                             "mechanism": a.mechanism,
                             "reserved": {n: list(hs) for n, hs in a.reserved.items()},
                             "lent": [{"task": t, "to": to, "hosts": list(hs)}
                                      for t, to, hs in a.lent]} for a in self.allocations],
            "notices": [{"name": n.name, "nodes": n.nodes, "arrival": n.arrival,
                         "walltime": n.walltime, "issued": n.issued, "who": n.who,
                         "state": n.state} for n in self.notices],
            "alloc": [dict(a) for a in self.alloc],
            "problems": list(self.problems),
            "delayed": [{"task": t, "eligible": at} for t, at in self.delayed],
            "outcomes": dict(self.outcomes or {}),
        }


def read_status(q: Queue, *, now: float) -> QueueStatus:
    """The status of ``q`` at ``now`` (see the module text)."""
    digests = job_digests(q.root, now=now)
    claims = q.leases(specs=True)
    dead = {jobid for d in digests for jobid in d.dead}
    jobs = {j.jobid: j for j in live_views((d.view for d in digests), dead, claims, now=now,
                                           stale_after=q.config.stale_after)}
    running = tuple(_running(q, c, jobs.get(c.jobid), now)
                    for c in sorted(claims, key=lambda c: c.start))
    records, bad = read_notices(q.root)
    notices = tuple(_notice(r, _released(digests), now) for r in records)
    problems = tuple([p for d in digests for p in d.problems] + bad)
    counts = queue_counts(q)
    outcomes: dict[str, int] = {}
    for d in digests:
        for word, n in (d.outcomes or {}).items():
            outcomes[word] = outcomes.get(word, 0) + n
    return QueueStatus(queue=str(q.root), now=now, counts=counts, running=running,
                       allocations=tuple(_allocation(j, now) for j in jobs.values()),
                       notices=notices, alloc=tuple(alloc_made(q.root)), problems=problems,
                       delayed=tuple(sorted(((t, at) for t, at in counts.delayed if at > now),
                                            key=lambda d: d[1])),
                       outcomes=dict(sorted(outcomes.items(), key=lambda o: (-o[1], o[0]))))


def _running(q: Queue, c: Claim, job: JobView | None, now: float) -> RunningNow:
    run = job.running.get(c.id) if job else None
    wc = (c.spec.min_wc_time if c.spec and c.spec.min_wc_time is not None
          else q.config.defaults.min_wc_time)
    ends = c.start + wc
    if job is not None and job.end is not None:
        ends = min(ends, job.end)
    return RunningNow(task=c.id, job=c.jobid, machine=c.machine,
                      hosts=tuple(run.hosts) if run else (), start=c.start,
                      time_left=max(0.0, ends - now), live=job is not None)


def _allocation(job: JobView, now: float) -> AllocationNow:
    lent = tuple((r.task, to, tuple(hs)) for r in job.running.values()
                 for to, hs in r.lent.items())
    return AllocationNow(
        job=job.jobid, machine=job.machine, nodes=job.nodes, idle=len(job.idle()),
        end=job.end, time_left=None if job.end is None else max(0.0, job.end - now),
        mechanism=job.mechanism, reserved={n: tuple(hs) for n, hs in job.reserved.items()},
        lent=lent)


def _released(digests: list[JobDigest]) -> dict[str, float]:
    """When the runners last released each notice as expired. A runner with a shorter
    ``--release-after`` may have released a notice before its default release time: its log
    says so (a later notice of the same name is not that one)."""
    expired: dict[str, float] = {}
    for d in digests:
        for name, when in (d.expired or {}).items():
            expired[name] = max(expired.get(name, 0.0), when)
    return expired


def _notice(r: NoticeFile, released: Mapping[str, float], now: float) -> NoticeNow:
    n = r.notice
    return NoticeNow(name=r.name, nodes=n.nodes, arrival=n.arrival, walltime=n.walltime,
                     issued=n.issued, who=r.who,
                     state=notice_state(n.arrival, r.release, now,
                                        released=released.get(r.name, 0.0) >= n.issued))


def notice_state(arrival: float, release: float, now: float, *, released: bool = False) -> str:
    """``in <duration>`` before the arrival, ``due`` until its release (``release``, or
    earlier when a runner's event log says it ``released`` it), then ``released``."""
    if released:
        return "released"
    if now < arrival:
        return f"in {format_duration(math.ceil(arrival - now))}"
    return "due" if now < release else "released"
