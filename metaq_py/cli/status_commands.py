"""``metaq status``: the queue's status (:class:`~metaq_py.report.status.QueueStatus`, read
by :func:`~metaq_py.report.status.read_status`) drawn as tables, as JSON (``--json``), or live
(``--watch``, with a progress bar per campaign folder).

This module only draws: what the status is comes from :mod:`metaq_py.report.status`. Errors
are printed as one sentence on standard error, with exit status 1.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from metaq_py.cli.shared import (
    JsonOpt,
    QueueOpt,
    app,
    cell,
    console,
    open_queue,
    printable,
    reported,
)
from metaq_py.durations import format_duration, format_time
from metaq_py.errors import QueueError
from metaq_py.queue.disk.folders import PeopleIds
from metaq_py.queue.layout import FAILED, HOLD, PENDING, STATES, WORKING
from metaq_py.queue.store import Queue
from metaq_py.report.status import QueueStatus, read_status
from metaq_py.report.summary import QueueCounts

if TYPE_CHECKING:
    from metaq_py.queue.watcher import QueueWatcher

__all__ = ["campaign_table", "count_tables", "live_tables", "status", "watch", "watch_screen"]

MIN_GAP = 0.5
"""Seconds at least between two screens of ``--watch``: a busy queue changes at every claim."""
CAMPAIGN_ROWS = 15
"""Campaign folders shown at most by ``--watch``."""
INVALID_SHOWN = 10
"""Invalid waiting files ``status`` names one by one; junk never floods it."""


@app.command()
def status(
    json_out: JsonOpt = False,
    watch_: Annotated[bool, typer.Option(
        "--watch", help="Keep the view live, refreshed as the queue changes (Ctrl-C stops).")
    ] = False,
    interval: Annotated[float, typer.Option(
        help="With --watch: the most seconds between two refreshes.", min=0.5)] = 5.0,
    prometheus: Annotated[bool, typer.Option(
        "--prometheus", help="Print the counts in Prometheus' text format, for "
                             "node_exporter's textfile collector.")] = False,
    queue: QueueOpt = Path("queue"),
) -> None:
    """Count the tasks per state, folder and project, and show what runs now.

    Running tasks with their hosts and time left, live allocations with their reserved and
    lent nodes, notices, and the allocations metaq alloc submitted with their state. With
    --watch, a live view that adds a progress bar per campaign folder."""
    with reported():
        q = open_queue(queue)
        if json_out + watch_ + prometheus > 1:
            raise QueueError("--json, --watch and --prometheus each choose the whole output; "
                             "give one of them")
        if watch_:
            try:
                watch(q, console, interval=interval)
            except KeyboardInterrupt:
                raise typer.Exit(0) from None
            return
        now = read_status(q, now=time.time())
        if prometheus:
            from metaq_py.report.prometheus import exposition
            typer.echo(exposition(now), nl=False)
            return
        if json_out:
            typer.echo(json.dumps(now.json(), indent=2))
            return
        counts = now.counts
        for table in [*count_tables(q, counts), *live_tables(now, PeopleIds(q.root))]:
            console.print(table)
        for line in invalid_lines(counts):
            typer.echo(line, err=True)
        for problem in now.problems:
            typer.echo(f"warning: {printable(problem)}", err=True)

def live_tables(now: QueueStatus, named: Callable[[str], str]) -> list[Table]:
    """What runs now as tables: running tasks, live allocations, notices and the allocations
    ``metaq alloc`` made (none for an empty part). Tasks are ``named`` as people write them
    (:class:`~metaq_py.queue.disk.folders.PeopleIds`)."""
    tables = []
    if now.running:
        t = Table(title="running")
        for col in ("task", "job", "hosts", "started", "time left"):
            t.add_column(col)
        for r in now.running:
            job = f"{r.job} on {r.machine}" + ("" if r.live else " (not live)")
            t.add_row(cell(named(r.task)), cell(job), ",".join(r.hosts) or "?",
                      format_time(r.start), format_duration(round(r.time_left)))
        tables.append(t)
    if now.outcomes:
        t = Table(title="runs ended, by outcome")
        for word in now.outcomes:
            t.add_column(word)
        t.add_row(*(str(n) for n in now.outcomes.values()))
        tables.append(t)
    if now.delayed:
        t = Table(title="waiting for a retry delay")
        for col in ("task", "eligible at", "in"):
            t.add_column(col)
        for task, at in now.delayed:
            t.add_row(cell(task), format_time(at), format_duration(round(at - now.now)))
        tables.append(t)
    if now.allocations:
        t = Table(title="live allocations")
        for col in ("job", "nodes", "idle", "time left", "mechanism", "reserved", "lent"):
            t.add_column(col)
        for a in now.allocations:
            left = "no limit" if a.time_left is None else format_duration(round(a.time_left))
            reserved = "; ".join(f"{n}: {','.join(hs)}" for n, hs in a.reserved.items())
            lent = "; ".join(cell(f"{named(task)} -> {to}: {','.join(hs)}")
                             for task, to, hs in a.lent)
            t.add_row(f"{a.job} on {a.machine}", str(a.nodes), str(a.idle), left,
                      a.mechanism or "", reserved, lent)
        tables.append(t)
    if now.notices:
        t = Table(title="notices")
        for col in ("name", "nodes", "arrival", "walltime", "who", "state"):
            t.add_column(col)
        for n in now.notices:
            t.add_row(cell(n.name), str(n.nodes), format_time(n.arrival),
                      format_duration(n.walltime), cell(n.who), n.state)
        tables.append(t)
    if now.alloc:
        tables.append(_alloc_table(now.alloc))
    return tables


def _alloc_table(made: tuple[Mapping[str, Any], ...]) -> Table:
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
    from rich.progress_bar import ProgressBar  # only --watch draws bars

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


def invalid_lines(counts: QueueCounts) -> list[str]:
    """The lines that tell of the waiting files that are not tasks: the first
    :data:`INVALID_SHOWN`, escaped, then how many more (100,000 junk files print 11 lines)."""
    lines = [f"invalid: {printable(b.reason)}" for b in counts.invalid[:INVALID_SHOWN]]
    if len(counts.invalid) > INVALID_SHOWN:
        lines.append(f"invalid: and {len(counts.invalid) - INVALID_SHOWN} more files that "
                     f"are not tasks ('metaq ls pending' lists them)")
    return lines


def watch_screen(q: Queue, *, now: float) -> Group:
    """One screen of ``metaq status --watch``: counts, campaign progress and what runs now,
    with the problems found as warnings at the end."""
    status = read_status(q, now=now)
    counts = status.counts
    parts: list[Any] = [Text(f"metaq status --watch  {format_time(now)}  (Ctrl-C to stop)",
                             style="bold")]
    parts.extend(count_tables(q, counts))
    progress = campaign_table(counts)
    if progress is not None:
        parts.append(progress)
    parts.extend(live_tables(status, PeopleIds(q.root)))
    parts.extend(Text(line, style="yellow") for line in invalid_lines(counts))
    for problem in status.problems:
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
    from rich.live import Live

    from metaq_py.queue.tally import summary_dir
    from metaq_py.queue.watcher import QueueWatcher

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
