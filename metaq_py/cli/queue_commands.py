"""Commands that work on the on-disk queue: init, submit, check, status, ls, show, hold,
release, cancel and retry.

Every command finds the queue through ``--queue``, else ``METAQ_QUEUE``, else ``./queue``.
Only ``init``, ``submit``, ``hold``, ``release``, ``cancel`` and ``retry`` move tasks; ``check``,
``status``, ``ls`` and ``show`` work on a read-only copy. ``status`` keeps its caches in the
queue's ``jobs/.summary/`` folder where it may write (see :mod:`metaq_py.report.summary`).
Errors are printed as one sentence on standard error, with exit status 1.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer

from metaq_py.cli.live_view import count_tables, live_section, print_live, watch
from metaq_py.cli.shared import JsonOpt, QueueOpt, TaskArg, app, console, open_queue, reported
from metaq_py.cli.when import in_words, iso_local
from metaq_py.directives import late_directives, miscased_directives, read_head
from metaq_py.durations import format_duration
from metaq_py.errors import MetaqError, QueueError
from metaq_py.queue.admin import Entry, QueueAdmin
from metaq_py.queue.campaign.arrays import format_indices, read_array
from metaq_py.queue.judge import judge
from metaq_py.queue.layout import CANCELLED, FAILED, HOLD, PENDING, REJECTED, STATES, WORKING
from metaq_py.queue.logbook import USAGE_FIELDS, read_logbook
from metaq_py.queue.store import Queue
from metaq_py.report.summary import queue_counts
from metaq_py.task_spec import TaskSpec


@app.command()
def init(
    directory: Annotated[Path, typer.Argument(help="Where to create the queue.")] = Path("queue"),
    group: Annotated[str | None, typer.Option(
        help="The collaboration's group: folders become setgid and group-writable.")] = None,
) -> None:
    """Create a queue: its folders and a commented metaq.yaml."""
    with reported():
        q = Queue.init(directory, group=group)
        typer.echo(f"queue ready at {q.root} (settings in {q.root / 'metaq.yaml'})")


@app.command()
def submit(
    scripts: Annotated[list[Path], typer.Argument(help="Task scripts to submit.")],
    hold: Annotated[bool, typer.Option("--hold", help="Submit into hold/.")] = False,
    priority: Annotated[bool, typer.Option(
        "--priority", help="Submit into the priority folder.")] = False,
    folder: Annotated[str | None, typer.Option(
        "--folder", help="Sub-folder inside the task folder, such as alice/run7.")] = None,
    array: Annotated[str | None, typer.Option(
        "--array", help="Queue one task per index: 0-999, 1-99:2 or 1,5,7 "
                        "(as #METAQ ARRAY).")] = None,
    after: Annotated[list[str] | None, typer.Option(
        "--after", help="Wait until this task, array or glob has finished "
                        "(as #METAQ AFTER; repeatable).")] = None,
    queue: QueueOpt = Path("queue"),
) -> None:
    """Check each script and copy it into the queue, all or nothing.

    If any script is bad, or names an unknown task or a cycle in AFTER, none is submitted.
    An array is queued as one task per index, each seeing METAQ_ARRAY_INDEX."""
    with reported():
        q = open_queue(queue)
        target = "priority" if priority else None
        if target is not None and target not in q.config.folders:
            raise QueueError(f"this queue has no priority folder; its task folders are "
                             f"{', '.join(q.config.folders)}")
        admin = QueueAdmin(q)
        made = admin.submit_all(scripts, folder=target, sub=folder, hold=hold, array=array,
                                after=tuple(after or ()))
        for script, dst in zip(scripts, made, strict=True):
            rel = dst.relative_to(q.root)
            info = admin.array_of(str(rel)) if dst.is_dir() else None
            if info is not None:
                span = format_indices(list(info.indices))
                typer.echo(f"submitted {script} as the array {rel}[{span}] "
                           f"({len(info.indices)} tasks)")
            else:
                typer.echo(f"submitted {script} as {rel}")


@app.command()
def check(
    scripts: Annotated[list[Path], typer.Argument(help="Task scripts to check.")],
    json_out: JsonOpt = False,
    queue: QueueOpt = Path("queue"),
) -> None:
    """Show what each script asks for, or what is wrong with it.

    When the queue exists, its limits (caps, log roots) are checked too."""
    q = Queue(queue) if queue.is_dir() else None
    results: list[dict[str, Any]] = []
    bad = 0
    for script in scripts:
        try:
            if q is not None:
                spec = judge(script, root=q.root, config=q.config).accepted()
            else:
                spec = judge(script).accepted()
        except MetaqError as e:
            bad += 1
            results.append({"script": str(script), "ok": False, "error": str(e)})
            if not json_out:
                typer.echo(f"metaq: {e}", err=True)
            continue
        head = read_head(script)[0]
        late = late_directives(head)
        miscased = miscased_directives(head)
        results.append({"script": str(script), "ok": True, "spec": _spec_json(spec),
                        "ignored_lines": sorted(late + miscased)})
        if not json_out:
            _print_spec(spec)
            for n in late:
                typer.echo(f"warning: {script}, line {n}: this #METAQ line comes after the "
                           f"first command, so it is ignored", err=True)
            for n in miscased:
                typer.echo(f"warning: {script}, line {n}: directives are written #METAQ in "
                           f"capitals; this line is a comment, so it is ignored", err=True)
    if json_out:
        typer.echo(json.dumps(results, indent=2))
    if bad:
        raise typer.Exit(1)


@app.command()
def status(
    json_out: JsonOpt = False,
    watch_: Annotated[bool, typer.Option(
        "--watch", help="Keep the view live, refreshed as the queue changes (Ctrl-C stops).")
    ] = False,
    interval: Annotated[float, typer.Option(
        help="With --watch: the most seconds between two refreshes.", min=0.5)] = 5.0,
    queue: QueueOpt = Path("queue"),
) -> None:
    """Count the tasks per state, folder and project, and show what runs now.

    Running tasks with their hosts and time left, live allocations with their reserved and
    lent nodes, notices, and the allocations metaq alloc submitted with their state. With
    --watch, a live view that adds a progress bar per campaign folder."""
    with reported():
        q = open_queue(queue)
        if watch_:
            if json_out:
                raise QueueError("--watch shows a live view for people; leave out --json")
            try:
                watch(q, console, interval=interval)
            except KeyboardInterrupt:
                raise typer.Exit(0) from None
            return
        live = live_section(q, now=time.time())
        counts = queue_counts(q)
        if json_out:
            typer.echo(json.dumps({
                "queue": str(q.root),
                "states": {s: dict(sorted(c.items())) for s, c in counts.states.items()},
                "totals": counts.totals(),
                "projects": {p: dict(c) for p, c in sorted(counts.projects.items())},
                "campaigns": {f: dict(c) for f, c in sorted(counts.campaigns.items())},
                "invalid": counts.invalid,
                **live,
            }, indent=2))
            return
        for table in count_tables(q, counts):
            console.print(table)
        print_live(live, console)
        for item in counts.invalid:
            typer.echo(f"invalid: {item['reason']}", err=True)
        for problem in live["problems"]:
            typer.echo(f"warning: {problem}", err=True)


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
                _stream_json(_entry_json(e) for e in entries)
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
        note = f"{e.attempts} attempt(s) " + note
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
        logbook = read_logbook(found.path, found.path.lstat().st_ino)
        data = _entry_json(found)
        data["submitted"] = logbook.submit if logbook else None
        data["history"] = list(logbook.history) if logbook else []
        data["running"] = _placement(q, found) if found.state == "working" else None
        if json_out:
            typer.echo(json.dumps(data, indent=2))
            return
        typer.echo(f"{found.id}: {found.state} ({found.path})")
        if found.reason:
            typer.echo(f"reason: {found.reason}")
        if found.spec is not None:
            _print_spec(found.spec, header=False, words=True)
        if data["running"]:
            _print_placement(data["running"])
        _print_history(data["submitted"], data["history"], now=time.time())


def _placement(q: Queue, e: Entry) -> dict[str, Any] | None:
    """Where a running task runs, from the last ``start`` event of its job: its hosts, cores
    (``None``: whole nodes) and GPU ids."""
    if not e.jobid:
        return None
    path = q.job_dir(e.jobid) / "events.jsonl"
    last = None
    try:
        with open(path) as f:
            for line in f:
                if '"start"' in line and e.relpath in line:
                    try:
                        ev = json.loads(line)
                    except ValueError:
                        continue  # a line cut short by a crash
                    if ev.get("event") == "start" and \
                            str(ev.get("task", "")).endswith("/" + e.relpath):
                        last = ev
    except OSError:
        return None
    if last is None:
        return None
    return {"hosts": last.get("hosts", []), "cores": last.get("cores"),
            "gpu_ids": last.get("gpu_ids", []), "bound": last.get("bound")}


def _print_placement(where: dict[str, Any]) -> None:
    """The running task's hosts, cores and GPUs, one line each."""
    from metaq_py.launch.binding import cpu_list

    typer.echo(f"running on: {', '.join(where['hosts'])}")
    cores = where.get("cores")
    bound = "" if not cores else (" (bound)" if where.get("bound") else " (not bound)")
    typer.echo(f"cores: {cpu_list(cores) + bound if cores else 'whole nodes'}")
    gpus = where.get("gpu_ids")
    typer.echo(f"GPUs: {','.join(map(str, gpus)) if gpus else 'none given'}")


_MOVE_STATES = {"hold": (PENDING,), "release": (HOLD,), "cancel": (PENDING, HOLD, WORKING),
                "retry": (FAILED, REJECTED, CANCELLED)}
"""The states each move takes a task from: an array ref selects its indices in them."""


def _move_command(verb: str, tasks: list[str], queue: Path,
                  states: tuple[str, ...] | None = None) -> None:
    with reported():
        q = open_queue(queue)
        admin = QueueAdmin(q)
        action = getattr(admin, verb)
        for ref in tasks:
            for e in admin.select(ref, states=states or _MOVE_STATES[verb]):
                moved = action(e.id)
                typer.echo(f"{verb}: {e.id} -> {moved.path.relative_to(q.root)}"
                           + (" (the running job will stop it)" if moved.state == "working"
                              else ""))


TasksArg = Annotated[list[str], typer.Argument(
    help="Tasks, as <folder>/<path> (e.g. todo/run.sh) or file paths; an array as a whole "
         "(run.sh) or some of its indices (run.sh[17], run.sh[0-9]).")]


@app.command()
def hold(tasks: TasksArg, queue: QueueOpt = Path("queue")) -> None:
    """Park waiting tasks in hold/."""
    _move_command("hold", tasks, queue)


@app.command()
def release(tasks: TasksArg, queue: QueueOpt = Path("queue")) -> None:
    """Let held tasks wait in their folder again."""
    _move_command("release", tasks, queue)


@app.command()
def cancel(tasks: TasksArg, queue: QueueOpt = Path("queue")) -> None:
    """Cancel waiting or held tasks, or ask the job running a task to stop it."""
    _move_command("cancel", tasks, queue)


@app.command()
def retry(
    tasks: TasksArg,
    failed: Annotated[bool, typer.Option(
        "--failed", help="Only tasks in failed/ (not rejected or cancelled ones).")] = False,
    queue: QueueOpt = Path("queue"),
) -> None:
    """Send failed, rejected or cancelled tasks back to their folder (checked again first)."""
    _move_command("retry", tasks, queue, states=(FAILED,) if failed else None)


# --- presentation --------------------------------------------------------------------------


def _spec_json(spec: TaskSpec) -> dict[str, Any]:
    data = asdict(spec)
    data.pop("lines", None)
    data["type"] = spec.type.value
    return data


def _entry_json(e: Entry) -> dict[str, Any]:
    return {"task": e.id, "state": e.state, "folder": e.folder, "relpath": e.relpath,
            "path": str(e.path), "spec": _spec_json(e.spec) if e.spec else None,
            "reason": e.reason, "machine": e.machine, "job": e.jobid, "attempts": e.attempts}


def _print_history(submitted: float | None, history: list[dict[str, Any]], *,
                   now: float) -> None:
    """A task's logbook for people: local ISO 8601 times, and durations in words."""
    if submitted is not None:
        typer.echo(f"submitted: {iso_local(submitted)} ({in_words(max(0.0, now - submitted))} "
                   f"ago)")
    if history:
        typer.echo("history:")
    for h in history:
        when = h.get("time")
        if not isinstance(when, int | float):
            typer.echo("  " + ", ".join(f"{k} {v}" for k, v in h.items()))
            continue
        rest = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in h.items()
                         if k not in ("time", "event", *USAGE_FIELDS))
        after = (f" ({in_words(max(0.0, when - submitted))} after submission)"
                 if submitted is not None else "")
        used = _usage_words(h)
        if used:
            rest = f"{rest}; used {used}" if rest else f"used {used}"
        typer.echo(f"  {iso_local(when)}  {h.get('event', '?')}"
                   + (f": {rest}" if rest else "") + after)


def _usage_words(entry: dict[str, Any]) -> str | None:
    """What the run a logbook entry ends used, for people: CPU time in user and system mode,
    peak memory, and where the figures come from; ``None`` when the entry does not say."""
    user, system = entry.get("cpu_user_seconds"), entry.get("cpu_system_seconds")
    if not isinstance(user, int | float) or not isinstance(system, int | float):
        return None
    words = f"CPU {user:.2f} s user + {system:.2f} s system"
    rss = entry.get("max_rss_bytes")
    if isinstance(rss, int) and not isinstance(rss, bool):
        words += f", peak memory {_bytes(rss)}"
    source = entry.get("usage_from")
    return words + (f", from {source}" if isinstance(source, str) else "")


def _bytes(n: int) -> str:
    """``n`` bytes in binary units, one decimal."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def _print_spec(spec: TaskSpec, *, header: bool = True, words: bool = False) -> None:
    """What ``spec`` asks for, one setting a line; ``words`` adds its wall clock in words."""
    if header:
        typer.echo(f"{spec.path}: ok")
    rows = [("type", spec.type.value),
            ("nodes", f"{spec.min_nodes} to {spec.nodes}" if spec.min_nodes != spec.nodes
             else str(spec.nodes)),
            ("gpus", str(spec.gpus)),
            ("min_wc_time", format_duration(spec.min_wc_time)
             + (f" ({in_words(spec.min_wc_time)})" if words else "")
             if spec.min_wc_time is not None else "queue default")]
    for name in ("project", "log", "machine", "notice", "retries"):
        value = getattr(spec, name)
        if value is not None:
            rows.append((name, str(value)))
    if spec.priority:
        rows.append(("priority", str(spec.priority)))
    if spec.setup:
        rows.append(("setup", format_duration(spec.setup)))
    if spec.checkpoint:
        rows.append(("checkpoint", f"every {format_duration(spec.checkpoint.interval)}, "
                                   f"costing {format_duration(spec.checkpoint.cost)}"))
    if spec.signal:
        rows.append(("signal", f"{spec.signal.name} {format_duration(spec.signal.before)} "
                               f"before the end"))
    if spec.resize:
        rows.append(("resize", spec.resize.mode + (f" ({spec.resize.signal})"
                                                   if spec.resize.signal else "")))
    for name, value in rows:
        typer.echo(f"  {name:<12} {value}")

