"""Commands that work on the on-disk queue: init, submit, check, status, ls, show, hold,
release, cancel and retry.

Every command finds the queue through ``--queue``, else ``METAQ_QUEUE``, else ``./queue``.
Only ``init``, ``submit``, ``hold``, ``release``, ``cancel`` and ``retry`` write; ``check``,
``status``, ``ls`` and ``show`` never touch the queue, so they work on a read-only copy.
Errors are printed as one sentence on standard error, with exit status 1.
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from metaq_py.cli.live_view import live_section, print_live
from metaq_py.cli.shared import JsonOpt, QueueOpt, TaskArg, app, console, open_queue, reported
from metaq_py.cli.when import in_words, iso_local
from metaq_py.directives import TaskSpec, late_directives, miscased_directives, read_head
from metaq_py.durations import format_duration
from metaq_py.errors import MetaqError, QueueError
from metaq_py.queue.admin import Entry, QueueAdmin
from metaq_py.queue.judge import judge
from metaq_py.queue.logbook import read_logbook
from metaq_py.queue.store import PENDING, STATES, Queue


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
    queue: QueueOpt = Path("queue"),
) -> None:
    """Check each script and copy it into the queue, all or nothing.

    If any script is bad, none is submitted."""
    with reported():
        q = open_queue(queue)
        target = "priority" if priority else None
        if target is not None and target not in q.config.folders:
            raise QueueError(f"this queue has no priority folder; its task folders are "
                             f"{', '.join(q.config.folders)}")
        for script in scripts:  # validate them all first
            judge(script, root=q.root, config=q.config).accepted()
        admin = QueueAdmin(q)
        for script in scripts:
            dst = admin.submit(script, folder=target, sub=folder, hold=hold)
            typer.echo(f"submitted {script} as {dst.relative_to(q.root)}")


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
def status(json_out: JsonOpt = False, queue: QueueOpt = Path("queue")) -> None:
    """Count the tasks per state, folder and project, and show what runs now.

    Running tasks with their hosts and time left, live allocations with their reserved and
    lent nodes, notices, and the allocations metaq alloc submitted with their state."""
    with reported():
        q = open_queue(queue)
        live = live_section(q, now=time.time())
        counts: dict[str, Counter[str]] = {s: Counter() for s in STATES}
        projects: dict[str, Counter[str]] = defaultdict(Counter)
        invalid = []
        for state in STATES:
            for e in QueueAdmin(q).entries(state):
                counts[state][e.folder] += 1
                project = (e.spec.project if e.spec else None) or "-"
                projects[project][state] += 1
                if state == PENDING and e.spec is None:
                    invalid.append({"task": e.id, "reason": e.reason})
        if json_out:
            typer.echo(json.dumps({
                "queue": str(q.root),
                "states": {s: dict(sorted(c.items())) for s, c in counts.items()},
                "totals": {s: sum(c.values()) for s, c in counts.items()},
                "projects": {p: dict(c) for p, c in sorted(projects.items())},
                "invalid": invalid,
                **live,
            }, indent=2))
            return
        folders = sorted({f for c in counts.values() for f in c},
                         key=lambda f: (q.config.folders.index(f)
                                        if f in q.config.folders else 99, f))
        table = Table(title=f"queue {q.root}")
        table.add_column("folder")
        for s in STATES:
            table.add_column(s, justify="right")
        for f in folders:
            table.add_row(f, *(str(counts[s][f] or "") for s in STATES))
        table.add_row("[bold]total[/]", *(f"[bold]{sum(counts[s].values())}[/]" for s in STATES))
        console.print(table)
        if projects:
            pt = Table(title="by project")
            pt.add_column("project")
            for s in STATES:
                pt.add_column(s, justify="right")
            for p, c in sorted(projects.items()):
                pt.add_row(p, *(str(c[s] or "") for s in STATES))
            console.print(pt)
        print_live(live, console)
        for item in invalid:
            typer.echo(f"invalid: {item['reason']}", err=True)
        for problem in live["problems"]:
            typer.echo(f"warning: {problem}", err=True)


@app.command("ls")
def ls_(
    state: Annotated[str, typer.Argument(
        help=f"One of: {', '.join(STATES)}.")] = PENDING,
    json_out: JsonOpt = False,
    queue: QueueOpt = Path("queue"),
) -> None:
    """List the tasks in one state (waiting tasks in the order they will be picked)."""
    with reported():
        q = open_queue(queue)
        if state not in STATES:
            raise QueueError(f"{state!r} is not a state; use one of {', '.join(STATES)}")
        entries = list(QueueAdmin(q).entries(state))
        if json_out:
            typer.echo(json.dumps([_entry_json(e) for e in entries], indent=2))
            return
        table = Table(title=f"{state} in {q.root}")
        for col in ("task", "type", "nodes", "gpus", "time", "project", "note"):
            table.add_column(col)
        for e in entries:
            s = e.spec
            note = e.reason or (f"{e.machine} job {e.jobid}" if e.jobid else "")
            if e.attempts:
                note = f"{e.attempts} attempt(s) " + note
            if s is None:
                table.add_row(e.id, "", "", "", "", "", note)
                continue
            wc = format_duration(s.min_wc_time) if s.min_wc_time is not None else "default"
            nodes = f"{s.min_nodes}-{s.nodes}" if s.min_nodes != s.nodes else str(s.nodes)
            table.add_row(e.id, s.type.value, nodes, str(s.gpus), wc, s.project or "", note)
        console.print(table)


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
        if json_out:
            typer.echo(json.dumps(data, indent=2))
            return
        typer.echo(f"{found.id}: {found.state} ({found.path})")
        if found.reason:
            typer.echo(f"reason: {found.reason}")
        if found.spec is not None:
            _print_spec(found.spec, header=False, words=True)
        _print_history(data["submitted"], data["history"], now=time.time())


def _move_command(verb: str, tasks: list[str], queue: Path) -> None:
    with reported():
        q = open_queue(queue)
        action = getattr(QueueAdmin(q), verb)
        for ref in tasks:
            moved = action(ref)
            typer.echo(f"{verb}: {ref} -> {moved.path.relative_to(q.root)}"
                       + (" (the running job will stop it)" if moved.state == "working" else ""))


TasksArg = Annotated[list[str], typer.Argument(
    help="Tasks, as <folder>/<path> (e.g. todo/run.sh) or file paths.")]


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
def retry(tasks: TasksArg, queue: QueueOpt = Path("queue")) -> None:
    """Send failed, rejected or cancelled tasks back to their folder (checked again first)."""
    _move_command("retry", tasks, queue)


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
                         if k not in ("time", "event"))
        after = (f" ({in_words(max(0.0, when - submitted))} after submission)"
                 if submitted is not None else "")
        typer.echo(f"  {iso_local(when)}  {h.get('event', '?')}"
                   + (f": {rest}" if rest else "") + after)


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

