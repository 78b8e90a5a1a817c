"""Commands that change the on-disk queue: init, submit, hold, release, cancel and retry;
and check, which reads task scripts before they are submitted.

Every command finds the queue through ``--queue``, else ``METAQ_QUEUE``, else ``./queue``.
``check`` moves nothing and works without a queue (with one, it checks the queue's limits
too). The read-only commands (status, ls, show) are in :mod:`metaq_py.cli.listing_commands`.
Errors are printed as one sentence on standard error, with exit status 1.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from metaq_py.cli.shared import JsonOpt, QueueOpt, app, open_layout, open_queue, reported
from metaq_py.directives import miscased_directives, read_head
from metaq_py.errors import MetaqError, QueueError
from metaq_py.queue.disk.folders import PeopleIds, is_array
from metaq_py.queue.judge import judge
from metaq_py.queue.layout import CANCELLED, FAILED, HOLD, PENDING, REJECTED, WORKING, Layout
from metaq_py.queue.submit import Submitter
from metaq_py.ranges import format_indices

if TYPE_CHECKING:
    from metaq_py.queue.campaign.arrays import ArrayInfo
    from metaq_py.queue.store import Queue


@app.command()
def init(
    directory: Annotated[Path, typer.Argument(help="Where to create the queue.")] = Path("queue"),
    group: Annotated[str | None, typer.Option(
        help="The collaboration's group: folders become setgid and group-writable.")] = None,
) -> None:
    """Create a queue: its folders and a commented metaq.yaml."""
    with reported():
        q = Layout.init(directory, group=group)
        typer.echo(f"queue ready at {q.root} (settings in {q.root / 'metaq.yaml'})")


HeaderOnlyOpt = Annotated[bool, typer.Option(
    "--header-only", help="Take #METAQ lines below the first command as the script's own "
                          "text, not directives (as #METAQ HEADER_ONLY).")]


@app.command()
def submit(
    scripts: Annotated[list[Path], typer.Argument(help="Task scripts to submit.")],
    hold: Annotated[bool, typer.Option("--hold", help="Submit into hold/.")] = False,
    priority: Annotated[bool, typer.Option(
        "--priority", help="Submit into the priority folder.")] = False,
    folder: Annotated[str | None, typer.Option(
        "--folder", help="Sub-folder inside the task folder, such as alice/run7.")] = None,
    array: Annotated[str | None, typer.Option(
        "--array", help="Queue one task per index: 0-999, 1-99:2 or 1,5,7; 0-999%4 runs "
                        "at most 4 at once (as #METAQ ARRAY). An array of that name "
                        "in the queue grows by the new indices.")] = None,
    after: Annotated[list[str] | None, typer.Option(
        "--after", help="Wait until this task, array or glob has finished "
                        "(as #METAQ AFTER; repeatable).")] = None,
    header_only: HeaderOnlyOpt = False,
    force: Annotated[bool, typer.Option(
        "--force", help="Run it even when every output its #METAQ CREATES names exists "
                        "(as #METAQ FORCE).")] = False,
    max_fails: Annotated[int | None, typer.Option(
        "--max-fails", min=1, help="For an array: after this many failed indices, hold the "
                                   "rest (as #METAQ MAX_FAILS).")] = None,
    again: Annotated[bool, typer.Option(
        "--again", help="Queue it even when a task of the same content is already waiting, "
                        "held or running, or an index of its array has run.")] = False,
    queue: QueueOpt = Path("queue"),
) -> None:
    """Check each script and copy it into the queue, all or nothing.

    If any script is bad, or names an unknown task or a cycle in AFTER, none is submitted.
    A #METAQ line below the first command makes a script bad (METAQ read it; here the
    header ends at the first command), unless --header-only says it belongs to the script.
    An array is queued as one task per index, each seeing METAQ_ARRAY_INDEX; the same
    script with new indices adds them to its array in the queue. A script
    whose content already waits, is held or runs in the queue is refused (--again queues it
    once more)."""
    with reported():
        q = open_layout(queue)
        target = "priority" if priority else None
        if target is not None and target not in q.config.folders:
            raise QueueError(f"this queue has no priority folder; its task folders are "
                             f"{', '.join(q.config.folders)}")
        where = {s: f"{target or q.config.default_folder}/{folder + '/' if folder else ''}"
                    f"{s.name}" for s in scripts}
        grown = {s: _array(q.root, ident) if is_array(q.root, ident) else None
                 for s, ident in where.items()}  # arrays the scripts may add indices to
        made = Submitter(q).submit_all(scripts, folder=target, sub=folder, hold=hold,
                                       array=array, after=tuple(after or ()),
                                       header_only=header_only, force=force, again=again,
                                       max_fails=max_fails)
        for script, dst in zip(scripts, made, strict=True):
            rel = dst.relative_to(q.root)
            info = _array(q.root, str(rel)) if dst.is_dir() else None
            old = grown[script]
            if info is not None and old is not None:
                new = sorted(set(info.indices) - set(old.indices))
                what = (f"{len(new)} new tasks [{format_indices(new)}]" if new else
                        "indices that ran, queued again")
                typer.echo(f"submitted {script} into the array {rel}: {what}, now "
                           f"{rel}[{format_indices(list(info.indices))}]")
            elif info is not None:
                span = format_indices(list(info.indices))
                typer.echo(f"submitted {script} as the array {rel}[{span}] "
                           f"({len(info.indices)} tasks)")
            else:
                typer.echo(f"submitted {script} as {rel}")


def _array(root: Path, ident: str) -> ArrayInfo | None:
    from metaq_py.queue.campaign.arrays import read_array  # only an array's folder

    return read_array(root, ident)


@app.command()
def check(
    scripts: Annotated[list[Path], typer.Argument(help="Task scripts to check.")],
    json_out: JsonOpt = False,
    header_only: HeaderOnlyOpt = False,
    queue: QueueOpt = Path("queue"),
) -> None:
    """Show what each script asks for, or what is wrong with it.

    When the queue exists, its limits (caps, log roots) are checked too."""
    from metaq_py.cli.task_view import print_spec, spec_json  # only check shows a spec
    q = Layout(queue) if queue.is_dir() else None
    results: list[dict[str, Any]] = []
    bad = 0
    for script in scripts:
        try:
            if q is not None:
                spec = judge(script, root=q.root, config=q.config,
                             header_only=header_only).accepted()
            else:
                spec = judge(script, header_only=header_only).accepted()
        except MetaqError as e:
            bad += 1
            results.append({"script": str(script), "ok": False, "error": str(e)})
            if not json_out:
                typer.echo(f"metaq: {e}", err=True)
            continue
        miscased = miscased_directives(read_head(script)[0])
        results.append({"script": str(script), "ok": True, "spec": spec_json(spec),
                        "ignored_lines": miscased})
        if not json_out:
            print_spec(spec)
            for n in miscased:
                typer.echo(f"warning: {script}, line {n}: directives are written #METAQ in "
                           f"capitals; this line is a comment, so it is ignored", err=True)
    if json_out:
        typer.echo(json.dumps(results, indent=2))
    if bad:
        raise typer.Exit(1)


_MOVE_STATES = {"hold": (PENDING,), "release": (HOLD,), "cancel": (PENDING, HOLD, WORKING),
                "retry": (FAILED, REJECTED, CANCELLED)}
"""The states each move takes a task from: an array ref selects its indices in them."""


def _move_command(verb: str, tasks: list[str], queue: Path,
                  states: tuple[str, ...] | None = None) -> None:
    """Move the tasks each ref names: one line per ref naming one task, and one summary line
    per ref naming several (an array's 4,500 indices are one line, not 4,500)."""
    from metaq_py.queue.admin import QueueAdmin  # submit and check move no task

    with reported():
        q = open_queue(queue)
        admin = QueueAdmin(q)
        action = getattr(admin, verb)
        retried: set[str] = set()
        named = PeopleIds(q.root)
        for ref in tasks:
            entries = admin.select(ref, states=states or _MOVE_STATES[verb])
            if verb == "retry":
                retried.update(e.id for e in entries)
            if len(entries) == 1:
                moved = action(entries[0].id)
                typer.echo(f"{verb}: {named(entries[0].id)} -> "
                           f"{moved.path.relative_to(q.root)}"
                           + (" (the running job will stop it)" if moved.state == "working"
                              else ""))
                continue
            went: Counter[str] = Counter()
            for e in entries:
                try:
                    moved = action(e.id)
                except QueueError:  # moved meanwhile, by a runner or a person
                    went["gone"] += 1
                    continue
                top = moved.path.relative_to(q.root).parts[0]
                went["working" if moved.state == "working" else f"{top}/"] += 1
            typer.echo(f"{verb}: {_moved_words(ref, len(entries), went)}")
        if retried:
            _warn_failed_dependencies(q, retried)


def _warn_failed_dependencies(q: Queue, retried: set[str]) -> None:
    """Say which of the tasks just ``retried`` wait on a dependency that failed for good:
    the next runner would move them back to ``failed/`` at once."""
    from metaq_py.queue.campaign.deps import Dependencies

    deps = Dependencies(q)
    doomed = [(t.id, why) for t in q.scan().tasks if t.id in retried and t.spec.after
              and (why := deps.check(t).failed) is not None]
    named = PeopleIds(q.root)
    for ident, why in doomed[:WARNED]:
        dep = why.split(" ")[1]  # "dependency todo/prop.sh[13] failed"
        typer.echo(f"warning: {named(ident)} is back, but its {why}: the next runner moves it to "
                   f"failed/ again unless 'metaq retry {dep}' comes first", err=True)
    if len(doomed) > WARNED:
        typer.echo(f"warning: and {len(doomed) - WARNED} more of the tasks retried wait on "
                   f"a dependency that did not finish ('metaq ls' notes each)", err=True)


WARNED = 5
"""How many retried tasks with a failed dependency are named (the rest are counted)."""


def _moved_words(ref: str, asked: int, went: Counter[str]) -> str:
    """``4500 tasks of prop.sh[0-4499]: 4497 to cancelled/, 3 running (their jobs will stop
    them)``: where the tasks ``ref`` named went, by destination."""
    parts = [f"{n} to {where}" for where, n in sorted(went.items())
             if where not in ("working", "gone")]
    if went["working"]:
        parts.append(f"{went['working']} running (their jobs will stop "
                     f"{'it' if went['working'] == 1 else 'them'})")
    if went["gone"]:
        parts.append(f"{went['gone']} moved by someone else meanwhile, left as they are")
    from metaq_py.words import counted  # only moving many tasks counts them
    return f"{counted(asked, 'task')} of {ref}: {', '.join(parts)}"


TasksArg = Annotated[list[str], typer.Argument(
    help="Tasks, as <folder>/<path> (e.g. todo/run.sh), file paths, or file names that "
         "one task has (run.sh); an array as a whole (run.sh) or some of its indices "
         "(run.sh[17], run.sh[0-9]).")]


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
