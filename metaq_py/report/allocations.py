"""What each batch job running metaq is doing now, rebuilt from its event log and leases.

``metaq status``, ``metaq explain`` and ``metaq notice`` look at the allocations from outside,
on a login node, without asking the batch system. Replaying a job's events gives its hosts,
GPUs and end (``runner-start``), the tasks running on which hosts (``start``, ``end``,
``shrink``, ``expand``), the nodes held for notices (``reserve``, ``release``) and the nodes
malleable tasks have lent to on-demand work (``shrink`` not yet undone by ``expand``).

The ``hosts`` of a ``shrink`` or ``expand`` event are the task's hosts after the change:
the hosts it no longer has after a shrink are lent to ``for_task``, and those it gains in an
expansion are given back. The ``hosts`` of a ``reserve``
are added to what the notice already holds; ``release`` frees them all, and so does the start
of the on-demand task that redeems the notice.

A job is *live* when it has started, has not written ``runner-stop``, its allocation has not
reached its end, no other runner has reclaimed its tasks as those of a dead job, and, if it
holds leases, at least one heartbeat is fresher than the queue's ``stale_after``. A runner
killed with ``kill -9`` therefore looks live until its leases go stale.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from metaq_py.queue.lease import Claim
from metaq_py.report.joblog import JobLog

__all__ = ["JobView", "RunningTask", "dead_jobs", "job_view", "live_jobs", "live_views"]


@dataclass(frozen=True, slots=True)
class RunningTask:
    """A task running in an allocation, as its job's events tell.

    ``hosts`` are the hosts it holds now (fewer than at ``start`` once shrunk); ``gpus`` the
    GPUs it was given in all; ``lent`` maps each on-demand task it lent hosts to onto those
    hosts.
    """

    task: str
    attempt: int | None
    hosts: tuple[str, ...]
    start: float
    gpus: int = 0
    kind: str | None = None
    project: str | None = None
    notice: str | None = None
    lent: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class JobView:
    """One batch job running metaq, replayed from its event log.

    ``end`` is the end of the allocation (``None``: no limit). ``reserved`` maps a notice name
    to the hosts held for it; some of them may run short borrowed work. ``stopped`` is the
    time of ``runner-stop`` (with ``stop_reason``), ``None`` while the runner runs.
    """

    jobid: str
    machine: str | None
    hosts: tuple[str, ...]
    gpus_per_node: int
    end: float | None
    mechanism: str | None
    started: float
    running: Mapping[str, RunningTask]
    reserved: Mapping[str, tuple[str, ...]]
    stopped: float | None = None
    stop_reason: str | None = None
    last_event: float = 0.0

    @property
    def nodes(self) -> int:
        return len(self.hosts)

    @property
    def gpus(self) -> int:
        """GPUs in the whole allocation."""
        return self.gpus_per_node * len(self.hosts)

    def time_left(self, now: float) -> float:
        """Seconds until the allocation ends (``inf`` without a limit)."""
        return math.inf if self.end is None else self.end - now

    def busy(self) -> set[str]:
        """Hosts running a task now."""
        return {h for r in self.running.values() for h in r.hosts}

    def idle(self) -> list[str]:
        """Hosts running nothing and held for no notice, in allocation order."""
        taken = self.busy() | {h for hs in self.reserved.values() for h in hs}
        return [h for h in self.hosts if h not in taken]

    def reserved_idle(self, notice: str) -> list[str]:
        """Hosts held for ``notice`` that run no borrowed work."""
        busy = self.busy()
        return [h for h in self.reserved.get(notice, ()) if h not in busy]

    def gpus_busy(self) -> int:
        """GPUs the running tasks use."""
        return sum(r.gpus for r in self.running.values())


def job_view(log: JobLog) -> JobView | None:
    """Replay ``log``; ``None`` when it has no ``runner-start`` (not a metaq runner's log)."""
    view: dict[str, Any] | None = None
    running: dict[str, dict[str, Any]] = {}
    reserved: dict[str, list[str]] = {}
    loans: dict[str, dict[str, tuple[str, ...]]] = {}
    """What a task restarted for a resize (``RESIZE restart``: an ``end`` requeued, then its
    ``start`` at the new size) had lent: its next start carries the loan on."""
    for e in log.events:
        kind = e["event"]
        t = float(e["time"])
        if kind == "runner-start":
            view = {"machine": _str(e.get("machine")), "hosts": _hosts(e.get("hosts")),
                    "gpus_per_node": _int(e.get("gpus_per_node")), "end": _num(e.get("end")),
                    "mechanism": _str(e.get("mechanism")), "started": t, "stopped": None,
                    "stop_reason": None}
            running.clear()
            reserved.clear()
            loans.clear()
        if view is None:
            continue
        view["last_event"] = t
        task = e.get("task")
        if kind == "runner-stop":
            view["stopped"] = t
            view["stop_reason"] = _str(e.get("reason"))
        elif kind == "start" and isinstance(task, str):
            running[task] = {"task": task, "attempt": _int_or_none(e.get("attempt")),
                             "hosts": list(_hosts(e.get("hosts"))), "start": t,
                             "gpus": _gpu_count(e.get("gpus")),
                             "kind": _str(e.get("kind")), "project": _str(e.get("project")),
                             "notice": _str(e.get("notice")), "lent": loans.pop(task, {})}
            notice = e.get("notice")
            if isinstance(notice, str) and e.get("kind") == "ondemand":
                reserved.pop(notice, None)  # redeemed: its nodes are now the task's
        elif kind == "end" and isinstance(task, str):
            ended = running.pop(task, None)
            if ended is not None and ended["lent"] and e.get("outcome") == "requeued":
                loans[task] = ended["lent"]
        elif kind in ("shrink", "expand") and task in running:
            r = running[task]
            new = list(_hosts(e.get("hosts")))
            gone = [h for h in r["hosts"] if h not in new]
            back = [h for h in new if h not in r["hosts"]]
            r["hosts"] = new
            if gone:
                to = str(e.get("for_task") or "?")
                r["lent"][to] = (*r["lent"].get(to, ()), *gone)
            for to, hs in list(r["lent"].items()):
                rest = tuple(h for h in hs if h not in back)
                if rest:
                    r["lent"][to] = rest
                else:
                    del r["lent"][to]
        elif kind == "reserve" and isinstance(e.get("notice"), str):
            held = reserved.setdefault(e["notice"], [])
            held.extend(h for h in _hosts(e.get("hosts")) if h not in held)
        elif kind == "release" and isinstance(e.get("notice"), str):
            reserved.pop(e["notice"], None)
    if view is None:
        return None
    tasks = {k: RunningTask(r["task"], r["attempt"], tuple(r["hosts"]), r["start"], r["gpus"],
                            r["kind"], r["project"], r["notice"], dict(r["lent"]))
             for k, r in running.items()}
    return JobView(jobid=log.jobid, running=tasks,
                   reserved={k: tuple(v) for k, v in reserved.items()}, **view)


def dead_jobs(logs: Iterable[JobLog]) -> set[str]:
    """Job ids whose tasks some runner reclaimed as those of a dead or lost job."""
    return {str(e["jobid"]) for log in logs for e in log.of("reclaim") if "jobid" in e}


def live_jobs(logs: Iterable[JobLog], claims: Iterable[Claim], *, now: float,
              stale_after: float) -> list[JobView]:
    """The jobs running metaq now (see the module's description of *live*), by job id."""
    logs = list(logs)
    return live_views((job_view(log) for log in logs), dead_jobs(logs), claims, now=now,
                      stale_after=stale_after)


def live_views(views: Iterable[JobView | None], dead: set[str], claims: Iterable[Claim], *,
               now: float, stale_after: float) -> list[JobView]:
    """Of the replayed jobs ``views``, those live now, given the job ids reclaimed as
    ``dead`` and the ``claims`` (see :func:`live_jobs`)."""
    beats: dict[str, list[float]] = {}
    for c in claims:
        beats.setdefault(c.jobid, []).append(c.heartbeat)
    out = []
    for view in views:
        if view is None or view.stopped is not None or view.jobid in dead:
            continue
        if view.end is not None and view.end <= now:
            continue
        hb = beats.get(view.jobid)
        if hb and now - max(hb) > stale_after:
            continue
        out.append(view)
    return out


def _hosts(value: object) -> tuple[str, ...]:
    if isinstance(value, list | tuple):
        return tuple(str(h) for h in value)
    return ()


def _gpu_count(value: object) -> int:
    """The runner may write a count, a list of device ids, or a map of host to device ids."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, list | tuple):
        return len(value)
    if isinstance(value, dict):
        return sum(len(v) if isinstance(v, list | tuple) else _int(v) for v in value.values())
    return 0


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
