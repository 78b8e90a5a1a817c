"""The live part of ``metaq status``: running tasks with their hosts and time left, the live
allocations with the nodes they hold for notices or have lent, the live notices, and the
allocations ``metaq alloc`` submitted with their state at its last pass.

Running tasks come from the leases (the truth of what is claimed) and their hosts from the
runners' ``start``, ``shrink`` and ``expand`` events. A task's time left is what remains of its
``MIN_WC_TIME`` (or the queue's default) since it started, cut at the end of its allocation.
"""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console
from rich.table import Table

from metaq_py.alloc.journal import allocations as alloc_made
from metaq_py.durations import format_duration, format_time
from metaq_py.queue.notices import read_notices
from metaq_py.queue.store import Queue
from metaq_py.report.allocations import live_jobs
from metaq_py.report.joblog import read_job_logs

__all__ = ["live_section", "print_live"]


def live_section(q: Queue, *, now: float) -> dict[str, Any]:
    """What runs now, as JSON values: ``running``, ``allocations``, ``notices``, ``alloc``
    (the last allocations ``metaq alloc`` submitted) and ``problems`` (unreadable event-log
    lines and notice files, one sentence each)."""
    logs = read_job_logs(q.root)
    claims = q.leases(specs=True)
    jobs = {j.jobid: j for j in live_jobs(logs, claims, now=now,
                                          stale_after=q.config.stale_after)}
    running = []
    for c in sorted(claims, key=lambda c: c.start):
        job = jobs.get(c.jobid)
        run = job.running.get(c.id) if job else None
        wc = (c.spec.min_wc_time if c.spec and c.spec.min_wc_time is not None
              else q.config.defaults.min_wc_time)
        ends = c.start + wc
        if job is not None and job.end is not None:
            ends = min(ends, job.end)
        running.append({"task": c.id, "job": c.jobid, "machine": c.machine,
                        "hosts": list(run.hosts) if run else [], "start": c.start,
                        "time_left": max(0.0, ends - now), "live": job is not None})
    allocations = []
    for job in jobs.values():
        lent = [{"task": r.task, "to": to, "hosts": list(hs)}
                for r in job.running.values() for to, hs in r.lent.items()]
        allocations.append({
            "job": job.jobid, "machine": job.machine, "nodes": job.nodes,
            "idle": len(job.idle()), "end": job.end,
            "time_left": None if job.end is None else max(0.0, job.end - now),
            "mechanism": job.mechanism,
            "reserved": {n: list(hs) for n, hs in job.reserved.items()}, "lent": lent})
    records, bad = read_notices(q.root)
    # A runner with a shorter --release-after may have released a notice before its default
    # release time: its log says so (a later notice of the same name is not that one).
    expired: dict[str, float] = {}
    for log in logs:
        for e in log.of("release"):
            if e.get("reason") == "expired" and isinstance(e.get("notice"), str):
                expired[e["notice"]] = max(expired.get(e["notice"], 0.0), float(e["time"]))
    notices = [{"name": r.name, "nodes": r.notice.nodes, "arrival": r.notice.arrival,
                "walltime": r.notice.walltime, "issued": r.notice.issued, "who": r.who,
                "state": _notice_state(r.notice.arrival, r.release, now,
                                       released=expired.get(r.name, 0.0) >= r.notice.issued)}
                for r in records]
    problems = [p for log in logs for p in log.problems] + bad
    return {"running": running, "allocations": allocations, "notices": notices,
            "alloc": alloc_made(q.root), "problems": problems}


def print_live(section: dict[str, Any], out: Console) -> None:
    """Print :func:`live_section` as tables (nothing for an empty part)."""
    if section["running"]:
        t = Table(title="running")
        for col in ("task", "job", "hosts", "started", "time left"):
            t.add_column(col)
        for r in section["running"]:
            job = f"{r['job']} on {r['machine']}" + ("" if r["live"] else " (not live)")
            t.add_row(r["task"], job, ",".join(r["hosts"]) or "?", format_time(r["start"]),
                      format_duration(round(r["time_left"])))
        out.print(t)
    if section["allocations"]:
        t = Table(title="live allocations")
        for col in ("job", "nodes", "idle", "time left", "mechanism", "reserved", "lent"):
            t.add_column(col)
        for a in section["allocations"]:
            left = "no limit" if a["time_left"] is None else format_duration(
                round(a["time_left"]))
            reserved = "; ".join(f"{n}: {','.join(hs)}" for n, hs in a["reserved"].items())
            lent = "; ".join(f"{x['task']} -> {x['to']}: {','.join(x['hosts'])}"
                             for x in a["lent"])
            t.add_row(f"{a['job']} on {a['machine']}", str(a["nodes"]), str(a["idle"]), left,
                      a["mechanism"] or "", reserved, lent)
        out.print(t)
    if section["notices"]:
        t = Table(title="notices")
        for col in ("name", "nodes", "arrival", "walltime", "who", "state"):
            t.add_column(col)
        for n in section["notices"]:
            t.add_row(n["name"], str(n["nodes"]), format_time(n["arrival"]),
                      format_duration(n["walltime"]), n["who"], n["state"])
        out.print(t)
    if section["alloc"]:
        _print_alloc(section["alloc"], out)


def _print_alloc(made: list[dict[str, Any]], out: Console) -> None:
    """The allocations ``metaq alloc`` submitted, with their state as its last pass saw it."""
    seen = made[-1]["seen"]
    title = "allocations metaq alloc made" + (
        f" (states as of {format_time(seen)})" if seen is not None else "")
    t = Table(title=title)
    for col in ("job", "submitted", "nodes", "walltime", "state"):
        t.add_column(col)
    for a in made:
        wall = a["walltime"]
        t.add_row(a["job"], format_time(a["submitted"]), str(a["nodes"]),
                  format_duration(wall) if isinstance(wall, int | float) else "?", a["state"])
    out.print(t)


def _notice_state(arrival: float, release: float, now: float, *, released: bool = False) -> str:
    """``in <duration>`` before the arrival, ``due`` until its release (``release``, or
    earlier when a runner's event log says it ``released`` it), then ``released``."""
    if released:
        return "released"
    if now < arrival:
        return f"in {format_duration(math.ceil(arrival - now))}"
    return "due" if now < release else "released"
