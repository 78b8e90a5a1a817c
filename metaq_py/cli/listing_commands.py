"""The queue's read-only listings: ls and show (``status`` is
:mod:`metaq_py.cli.status_commands`).

``ls`` lists the tasks in one state, streaming its rows, with the indices of an array that
come together on one row; ``show`` shows one task: where it is, what it asks for, where it runs
and its history. They move no task, so they work on a read-only copy of a queue. The commands
that change the queue are in :mod:`metaq_py.cli.queue_commands`. Errors are printed as one
sentence on standard error, with exit status 1.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from metaq_py.cli.shared import (
    JsonOpt,
    QueueOpt,
    TaskArg,
    app,
    open_queue,
    printable,
    reported,
)
from metaq_py.cli.task_view import entry_json, print_history, print_spec
from metaq_py.durations import format_duration
from metaq_py.errors import QueueError
from metaq_py.queue.admin import Entry, QueueAdmin
from metaq_py.queue.campaign.arrays import read_array
from metaq_py.queue.layout import DONE_STATES, PENDING, STATES
from metaq_py.queue.logbook import find_logbook
from metaq_py.queue.store import Queue
from metaq_py.ranges import format_indices
from metaq_py.words import counted

LS_COLUMNS = ("task", "type", "nodes", "gpus", "time", "project", "note")
LS_PAGE = 50
"""Rows whose widths set the columns of ``ls``: the first screen is printed as soon as they
are read, and the rest follows as it is read."""


@app.command("ls")
def ls_(
    state: Annotated[str, typer.Argument(
        help=f"One of: {', '.join(STATES)}.")] = PENDING,
    json_out: JsonOpt = False,
    each: Annotated[bool, typer.Option(
        "--each", help="One row per index of an array, not one per array.")] = False,
    queue: QueueOpt = Path("queue"),
) -> None:
    """List the tasks in one state (waiting tasks in the order they will be picked).

    Rows are printed as they are read, so a long history starts showing at once. The
    indices of an array that come together are one row, such as todo/run.sh[0-999]."""
    with reported():
        q = open_queue(queue)
        if state not in STATES:
            raise QueueError(f"{state!r} is not a state; use one of {', '.join(STATES)}")
        entries = QueueAdmin(q).entries(state)
        try:
            if json_out:
                _stream_json(entry_json(e) for e in entries)
            else:
                typer.echo(f"{state} in {q.root}")
                rows = (_ls_row(e) for e in entries) if each else _array_rows(entries, q.root)
                _stream_rows(rows, LS_COLUMNS)
        except BrokenPipeError:
            # The reader (head, less) has seen enough: stop quietly, as ls would.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _ls_row(e: Entry) -> tuple[str, ...]:
    s = e.spec
    note = e.reason or (f"{e.machine} job {e.jobid}" if e.jobid else "")
    if e.attempts:
        note = f"{counted(e.attempts, 'attempt')} " + note
    if s is None:
        return (e.id, "", "", "", "", "", note)
    wc = format_duration(s.min_wc_time) if s.min_wc_time is not None else "default"
    nodes = f"{s.min_nodes}-{s.nodes}" if s.min_nodes != s.nodes else str(s.nodes)
    return (e.id, s.type.value, nodes, str(s.gpus), wc, s.project or "", note)


def _array_rows(entries: Iterator[Entry], root: Path) -> Iterator[tuple[str, ...]]:
    """The rows of ``ls``, with each run of indices of one array that come one after the
    other made into one row: ``todo/run.sh[0-999]``, noting how many tasks it holds."""
    arrays: dict[str, bool] = {}
    run: list[Entry] = []
    run_id = ""

    def array_of(e: Entry) -> str:
        parent, _, last = e.id.rpartition("/")
        if not last.isdigit() or "/" not in parent:
            return ""
        if parent not in arrays:
            arrays[parent] = read_array(root, parent) is not None
        return parent if arrays[parent] else ""

    def flush() -> Iterator[tuple[str, ...]]:
        if len(run) == 1:
            yield _ls_row(run[0])
        elif run:
            first = _ls_row(run[0])
            span = format_indices([int(e.id.rpartition("/")[2]) for e in run])
            yield (f"{run_id}[{span}]", *first[1:-1], f"{len(run)} tasks of an array")

    for e in entries:
        ident = array_of(e)
        if run and ident != run_id:
            yield from flush()
            run = []
        if ident:
            run_id = ident
            run.append(e)
        else:
            yield _ls_row(e)
    yield from flush()


def _stream_rows(rows: Iterator[tuple[str, ...]], header: tuple[str, ...]) -> None:
    """Print ``rows`` under ``header`` in aligned columns, as they come: the widths are
    those of the first :data:`LS_PAGE` rows (a longer cell later pushes its row along)."""
    rows = (tuple(map(printable, row)) for row in rows)  # a newline in a name stays \n
    page = list(itertools.islice(rows, LS_PAGE))
    widths = [max(len(c) for c in col) for col in zip(header, *page, strict=False)]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    out = sys.stdout
    out.write(line(header) + "\n" + "  ".join("-" * w for w in widths) + "\n")
    for row in itertools.chain(page, rows):
        out.write(line(row) + "\n")
        if out.isatty():
            out.flush()
    out.flush()


def _stream_json(items: Iterator[dict[str, Any]]) -> None:
    """Print ``items`` as one JSON array (as ``json.dumps(..., indent=2)`` would), item by
    item."""
    out = sys.stdout
    first = True
    for item in items:
        text = json.dumps(item, indent=2).replace("\n", "\n  ")
        out.write(("[\n  " if first else ",\n  ") + text)
        first = False
    out.write("[]\n" if first else "\n]\n")
    out.flush()


@app.command()
def show(
    task: TaskArg,
    json_out: JsonOpt = False,
    queue: QueueOpt = Path("queue"),
) -> None:
    """Show one task: where it is, what it asks for, and its history."""
    with reported():
        q = open_queue(queue)
        admin = QueueAdmin(q)
        e = admin.find(task)
        found = next((x for x in admin.entries(e.state) if x.path == e.path), e)
        logbook = find_logbook(found.path, found.path.lstat().st_ino,
                               q.packed if found.state in DONE_STATES else None)
        data = entry_json(found)
        data["submitted"] = logbook.submit if logbook else None
        data["history"] = list(logbook.history) if logbook else []
        data["running"] = _placement(q, found) if found.state == "working" else None
        if json_out:
            typer.echo(json.dumps(data, indent=2))
            return
        typer.echo(printable(f"{found.id}: {found.state} ({found.path})"))
        if found.reason:
            typer.echo(f"reason: {printable(found.reason)}")
        if found.spec is not None:
            print_spec(found.spec, header=False, words=True)
        if data["running"]:
            _print_placement(data["running"])
        print_history(data["submitted"], data["history"], now=time.time())


def _placement(q: Queue, e: Entry) -> dict[str, Any] | None:
    """Where a running task runs, from the last ``start`` event of its job: its hosts, cores
    (``None``: whole nodes) and GPU ids."""
    if not e.jobid:
        return None
    last = None
    for ev in q.events(e.jobid):  # read in bounded pieces; a FIFO or a link has no events
        if ev.get("event") == "start" and str(ev.get("task", "")).endswith("/" + e.relpath):
            last = ev
    if last is None:
        return None
    return {"hosts": last.get("hosts", []), "cores": last.get("cores"),
            "gpu_ids": last.get("gpu_ids", []), "bound": last.get("bound")}


def _print_placement(where: dict[str, Any]) -> None:
    """The running task's hosts, cores and GPUs, one line each."""
    from metaq_py.ranges import cpu_list

    typer.echo(f"running on: {', '.join(where['hosts'])}")
    cores = where.get("cores")
    bound = "" if not cores else (" (bound)" if where.get("bound") else " (not bound)")
    typer.echo(f"cores: {cpu_list(cores) + bound if cores else 'whole nodes'}")
    gpus = where.get("gpu_ids")
    typer.echo(f"GPUs: {','.join(map(str, gpus)) if gpus else 'none given'}")
