"""The live part of ``metaq status``: running tasks with their hosts and time left, the live
allocations with the nodes they hold for notices or have lent, the live notices, and the
allocations ``metaq alloc`` submitted with their state at its last pass.

Running tasks come from the leases (the truth of what is claimed) and their hosts from the
runners' ``start``, ``shrink`` and ``expand`` events. A task's time left is what remains of its
``MIN_WC_TIME`` (or the queue's default) since it started, cut at the end of its allocation.

The event logs are read through :mod:`metaq_py.report.logcache`, so a past job's log is read
once, not on every call. ``metaq status --watch`` shows the same screen live, with a progress
bar per campaign folder (:func:`watch`).
"""

from __future__ import annotations

import math
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from metaq_py.alloc.journal import allocations as alloc_made
from metaq_py.cli.shared import cell
from metaq_py.durations import format_duration, format_time
from metaq_py.queue.layout import FAILED, HOLD, PENDING, STATES, WORKING
from metaq_py.queue.notices import read_notices
from metaq_py.queue.store import Queue
from metaq_py.queue.tally import summary_dir
from metaq_py.queue.watcher import QueueWatcher
from metaq_py.report.allocations import live_views
from metaq_py.report.logcache import job_digests
from metaq_py.report.summary import QueueCounts, queue_counts

__all__ = ["campaign_table", "count_tables", "live_section", "live_tables", "print_live",
           "watch", "watch_screen"]

MIN_GAP = 0.5
"""Seconds at least between two screens of ``--watch``: a busy queue changes at every claim."""
CAMPAIGN_ROWS = 15
"""Campaign folders shown at most by ``--watch``."""


def live_section(q: Queue, *, now: float) -> dict[str, Any]:
    """What runs now, as JSON values: ``running``, ``allocations``, ``notices``, ``alloc``
    (the last allocations ``metaq alloc`` submitted) and ``problems`` (unreadable event-log
    lines and notice files, one sentence each)."""
    digests = job_digests(q.root, now=now)
    claims = q.leases(specs=True)
    dead = {jobid for d in digests for jobid in d.dead}
    jobs = {j.jobid: j for j in live_views((d.view for d in digests), dead, claims, now=now,
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
    for d in digests:
        for name, when in (d.expired or {}).items():
            expired[name] = max(expired.get(name, 0.0), when)
    notices = [{"name": r.name, "nodes": r.notice.nodes, "arrival": r.notice.arrival,
                "walltime": r.notice.walltime, "issued": r.notice.issued, "who": r.who,
                "state": _notice_state(r.notice.arrival, r.release, now,
                                       released=expired.get(r.name, 0.0) >= r.notice.issued)}
                for r in records]
    problems = [p for d in digests for p in d.problems] + bad
    return {"running": running, "allocations": allocations, "notices": notices,
            "alloc": alloc_made(q.root), "problems": problems}


def print_live(section: dict[str, Any], out: Console) -> None:
    """Print :func:`live_section` as tables (nothing for an empty part)."""
    for table in live_tables(section):
        out.print(table)


def live_tables(section: dict[str, Any]) -> list[Table]:
    """:func:`live_section` as tables: running tasks, live allocations, notices and the
    allocations ``metaq alloc`` made (none for an empty part)."""
    tables = []
    if section["running"]:
        t = Table(title="running")
        for col in ("task", "job", "hosts", "started", "time left"):
            t.add_column(col)
        for r in section["running"]:
            job = f"{r['job']} on {r['machine']}" + ("" if r["live"] else " (not live)")
            t.add_row(cell(r["task"]), cell(job), ",".join(r["hosts"]) or "?",
                      format_time(r["start"]), format_duration(round(r["time_left"])))
        tables.append(t)
    if section["allocations"]:
        t = Table(title="live allocations")
        for col in ("job", "nodes", "idle", "time left", "mechanism", "reserved", "lent"):
            t.add_column(col)
        for a in section["allocations"]:
            left = "no limit" if a["time_left"] is None else format_duration(
                round(a["time_left"]))
            reserved = "; ".join(f"{n}: {','.join(hs)}" for n, hs in a["reserved"].items())
            lent = "; ".join(cell(f"{x['task']} -> {x['to']}: {','.join(x['hosts'])}")
                             for x in a["lent"])
            t.add_row(f"{a['job']} on {a['machine']}", str(a["nodes"]), str(a["idle"]), left,
                      a["mechanism"] or "", reserved, lent)
        tables.append(t)
    if section["notices"]:
        t = Table(title="notices")
        for col in ("name", "nodes", "arrival", "walltime", "who", "state"):
            t.add_column(col)
        for n in section["notices"]:
            t.add_row(cell(n["name"]), str(n["nodes"]), format_time(n["arrival"]),
                      format_duration(n["walltime"]), cell(n["who"]), n["state"])
        tables.append(t)
    if section["alloc"]:
        tables.append(_alloc_table(section["alloc"]))
    return tables


def _alloc_table(made: list[dict[str, Any]]) -> Table:
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
    return t


def count_tables(q: Queue, counts: QueueCounts) -> list[Table]:
    """The tasks per state and task folder, and per state and project."""
    folders = sorted({f for c in counts.states.values() for f in c},
                     key=lambda f: (q.config.folders.index(f)
                                    if f in q.config.folders else 99, f))
    table = Table(title=f"queue {q.root}")
    table.add_column("folder")
    for s in STATES:
        table.add_column(s, justify="right")
    for f in folders:
        table.add_row(f, *(str(counts.states[s][f] or "") for s in STATES))
    table.add_row("[bold]total[/]", *(f"[bold]{n}[/]" for n in counts.totals().values()))
    tables = [table]
    if counts.projects:
        pt = Table(title="by project")
        pt.add_column("project")
        for s in STATES:
            pt.add_column(s, justify="right")
        for p, c in sorted(counts.projects.items()):
            pt.add_row(cell(p), *(str(c[s] or "") for s in STATES))
        tables.append(pt)
    return tables


def campaign_table(counts: QueueCounts, *, rows: int = CAMPAIGN_ROWS) -> Table | None:
    """A progress bar per campaign folder: its done tasks (finished, failed, rejected or
    cancelled) out of all its tasks. Unfinished campaigns first; at most ``rows`` rows."""
    if not counts.campaigns:
        return None
    done_states = STATES[3:]
    items = []
    for name, c in counts.campaigns.items():
        total = sum(c.values())
        done = sum(c[s] for s in done_states)
        items.append((done == total, name, done, total, c))
    items.sort(key=lambda i: (i[0], i[1]))
    t = Table(title="campaign folders")
    for col in ("folder", "progress", "done", "running", "waiting", "failed"):
        t.add_column(col, justify="left" if col in ("folder", "progress") else "right")
    for _complete, name, done, total, c in items[:rows]:
        t.add_row(cell(name), ProgressBar(total=total, completed=done, width=30),
                  f"{done}/{total}", str(c[WORKING] or ""), str(c[PENDING] + c[HOLD] or ""),
                  str(c[FAILED] or ""))
    if len(items) > rows:
        left = items[rows:]
        t.caption = (f"and {len(left)} more campaign folders, "
                     f"{sum(1 for i in left if i[0])} of them done")
    return t


def watch_screen(q: Queue, *, now: float) -> Group:
    """One screen of ``metaq status --watch``: counts, campaign progress and what runs now,
    with the problems found as warnings at the end."""
    counts = queue_counts(q)
    section = live_section(q, now=now)
    parts: list[Any] = [Text(f"metaq status --watch  {format_time(now)}  (Ctrl-C to stop)",
                             style="bold")]
    parts.extend(count_tables(q, counts))
    progress = campaign_table(counts)
    if progress is not None:
        parts.append(progress)
    parts.extend(live_tables(section))
    for item in counts.invalid:
        parts.append(Text(f"invalid: {item['reason']}", style="yellow"))
    for problem in section["problems"]:
        parts.append(Text(f"warning: {problem}", style="yellow"))
    return Group(*parts)


def watch(q: Queue, out: Console, *, interval: float) -> None:
    """Show :func:`watch_screen` until interrupted (Ctrl-C raises ``KeyboardInterrupt``).

    It is shown again when the queue changes (the queue's watcher: file-system events where
    the system has them, and polling where not, as over NFS and Lustre) and at least every
    ``interval`` seconds, so times left keep counting down; never twice in
    :data:`MIN_GAP` seconds. In a terminal the screen is redrawn in place; elsewhere (a pipe,
    a log file, a dumb terminal) each screen is printed after the last. SIGTERM and SIGHUP
    (``kill``, a closed terminal) end it as Ctrl-C does, so the terminal gets its cursor
    back."""
    folders = [q.root / f for f in (*q.config.folders, HOLD, WORKING, "notices", "alloc")]
    folders.append(summary_dir(q.root) / "tally")
    with _stopped_by_signals(), \
            QueueWatcher(folders, interval=min(interval, q.config.poll_interval)) as watcher:
        if out.is_terminal and not out.is_dumb_terminal:
            with Live(console=out, auto_refresh=False, transient=False) as live:
                while True:
                    live.update(watch_screen(q, now=time.time()), refresh=True)
                    _pause(watcher, interval)
        else:
            while True:
                out.print(watch_screen(q, now=time.time()))
                out.print()
                out.file.flush()
                _pause(watcher, interval)


@contextmanager
def _stopped_by_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP raise ``KeyboardInterrupt`` meanwhile: the live display unwinds and
    shows the cursor it hid, where the default action would leave the terminal without one."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    before = {s: signal.signal(s, interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


def _pause(watcher: QueueWatcher, interval: float) -> None:
    """Wait for a change or ``interval`` seconds, and at least :data:`MIN_GAP` seconds."""
    started = time.monotonic()
    watcher.wait(timeout=interval)
    time.sleep(max(0.0, MIN_GAP - (time.monotonic() - started)))


def _notice_state(arrival: float, release: float, now: float, *, released: bool = False) -> str:
    """``in <duration>`` before the arrival, ``due`` until its release (``release``, or
    earlier when a runner's event log says it ``released`` it), then ``released``."""
    if released:
        return "released"
    if now < arrival:
        return f"in {format_duration(math.ceil(arrival - now))}"
    return "due" if now < release else "released"
