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
from metaq_py.cli.task_view import (
    entry_json,
    print_attempts,
    print_history,
    print_spec,
)
from metaq_py.durations import format_duration
from metaq_py.errors import QueueError
from metaq_py.queue.admin import QueueAdmin
from metaq_py.queue.disk.folders import PeopleIds
from metaq_py.queue.finding import STATE_WORDS, Entry
from metaq_py.queue.layout import DONE_STATES, PENDING, REJECTED, STATES
from metaq_py.queue.logbook import find_logbook
from metaq_py.queue.settings.admission import resolve_log
from metaq_py.queue.store import Queue
from metaq_py.ranges import format_indices
from metaq_py.report.attempts import Attempt, last_starts, task_attempts
from metaq_py.words import counted

LS_COLUMNS = ("task", "type", "nodes", "gpus", "time", "project", "note")
LS_PAGE = 50
"""Rows whose widths set the columns of ``ls``: the first screen is printed as soon as they
are read, and the rest follows as it is read."""


@app.command("ls")
def ls_(
    state: Annotated[str, typer.Argument(
        help=f"One of: {', '.join(STATES)}; or as people say them: "
             f"{', '.join(w for s, w in STATE_WORDS.items() if w != s)}.")] = PENDING,
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
        state = {w: s for s, w in STATE_WORDS.items()}.get(state, state)
        if state not in STATES:
            raise QueueError(f"{state!r} is not a state; use one of {', '.join(STATES)} (or "
                             f"waiting, held, running)")
        entries = QueueAdmin(q).entries(state)
        named = PeopleIds(q.root)
        waits = _waits(q, named) if state == PENDING else {}
        try:
            if json_out:
                _stream_json(entry_json(e) for e in entries)
            else:
                typer.echo(f"{state} in {q.root}")
                rows = (_ls_row(e, named, waits) for e in entries) if each \
                    else _array_rows(entries, named, waits)
                _stream_rows(rows, LS_COLUMNS)
        except BrokenPipeError:
            # The reader (head, less) has seen enough: stop quietly, as ls would.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _waits(q: Queue, named: PeopleIds) -> dict[str, str]:
    """For each waiting task whose dependencies are not met: the note ``ls`` gives it
    (``waiting on todo/prop.sh[13] (running)``)."""
    from metaq_py.queue.campaign.deps import Dependencies

    deps = Dependencies(q)
    notes: dict[str, str] = {}
    for t in q.scan().tasks:
        if not (t.spec.after or t.spec.after_any):
            continue
        ready = deps.check(t)
        if ready.failed is not None:
            notes[t.id] = f"{ready.failed}: the next runner moves it to failed/"
        elif not ready.ready and ready.waits_for is not None:
            notes[t.id] = f"waiting on {named(ready.waits_for)} ({ready.state})"
    return notes


def _ls_row(e: Entry, named: PeopleIds, waits: dict[str, str]) -> tuple[str, ...]:
    s = e.spec
    note = e.reason or (f"{e.machine} job {e.jobid}" if e.jobid else "") or \
        waits.get(e.id, "")
    if e.attempts:
        note = f"{counted(e.attempts, 'attempt')} " + note
    if s is None:
        return (named(e.id), "", "", "", "", "", note)
    wc = format_duration(s.min_wc_time) if s.min_wc_time is not None else "default"
    nodes = f"{s.min_nodes}-{s.nodes}" if s.min_nodes != s.nodes else str(s.nodes)
    return (named(e.id), s.type.value, nodes, str(s.gpus), wc, s.project or "", note)


def _array_rows(entries: Iterator[Entry], named: PeopleIds,
                waits: dict[str, str]) -> Iterator[tuple[str, ...]]:
    """The rows of ``ls``, with each run of indices of one array that come one after the
    other made into one row: ``todo/run.sh[0-999]``, noting how many tasks it holds."""
    run: list[Entry] = []
    run_id = ""

    def flush() -> Iterator[tuple[str, ...]]:
        if len(run) == 1:
            yield _ls_row(run[0], named, waits)
        elif run:
            first = _ls_row(run[0], named, waits)
            span = format_indices([int(e.id.rpartition("/")[2]) for e in run])
            blocked = sum(1 for e in run if e.id in waits)
            note = f"{len(run)} tasks of an array" + (
                f", {blocked} waiting on their dependencies (ls --each names them)"
                if blocked else "")
            yield (f"{run_id}[{span}]", *first[1:-1], note)

    for e in entries:
        ident = named.array_of(e.id)
        if run and ident != run_id:
            yield from flush()
            run = []
        if ident:
            run_id = ident
            run.append(e)
        else:
            yield _ls_row(e, named, waits)
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
        tries = _attempts(q, found, data["history"])
        data["attempts"] = [a.to_json() for a in tries]
        named = PeopleIds(q.root)
        array = _array_json(q, named.array_of(found.id))
        if array is not None:
            data["array"] = array
        if json_out:
            typer.echo(json.dumps(data, indent=2))
            return
        typer.echo(printable(f"{named(found.id)}: {found.state} ({found.path})"))
        if found.reason:
            typer.echo(f"reason: {printable(found.reason)}")
        if found.state == REJECTED:
            typer.echo(printable(f"to run it: fix the file where it is now, {found.path}, "
                                 f"then 'metaq retry {found.id}'"))
        if found.spec is not None:
            print_spec(found.spec, header=False, words=True)
        if array is not None:
            limit = array["throttle"]
            typer.echo(printable(f"  {'array':<12} {array['id']}[{array['indices']}]"
                                 f"{f', at most {limit} at once' if limit else ''}"))
        if data["running"]:
            _print_placement(data["running"])
        print_history(data["submitted"], data["history"], now=time.time())
        retries = q.config.defaults.retries
        if found.spec is not None and found.spec.retries is not None:
            retries = found.spec.retries
        print_attempts(tries, retries=retries)


def _array_json(q: Queue, ident: str) -> dict[str, Any] | None:
    """The array ``ident`` (``""``: none) as ``show`` gives it: identity, indices, throttle."""
    if not ident:
        return None
    from metaq_py.queue.campaign.arrays import read_array  # only an index's show

    info = read_array(q.root, ident)
    if info is None:
        return None
    return {"id": info.id, "indices": format_indices(info.indices), "throttle": info.throttle}


def _attempts(q: Queue, e: Entry, history: list[dict[str, Any]]) -> list[Attempt]:
    """Every attempt of ``e`` its jobs' event logs tell: the jobs its logbook names, and
    the job that holds it now."""
    jobs = [str(h["job"]) for h in history if isinstance(h.get("job"), str)]
    if e.jobid:
        jobs.append(e.jobid)
    log = None
    if e.spec is not None and e.spec.log is not None:
        log = resolve_log(e.spec.log, root=q.root, config=q.config)
    return task_attempts(q, e.id, jobs, log=log)


def _placement(q: Queue, e: Entry) -> dict[str, Any] | None:
    """Where a running task runs, from the last ``start`` event of its job: its hosts, cores
    (``None``: whole nodes) and GPU ids."""
    if not e.jobid:
        return None
    last = last_starts(q, e.jobid).get(e.id)
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
