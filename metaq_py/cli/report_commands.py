"""Commands for on-demand notices, accounting and visibility: notice, report, explain, gantt.

``report`` and ``explain`` only read the queue. ``notice`` writes (or moves) one file in
``notices/``; ``gantt`` writes only its PNG. Errors are one sentence on standard error, exit 1.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from metaq_py.cli.shared import (
    JsonOpt,
    QueueOpt,
    TaskArg,
    app,
    cell,
    console,
    open_queue,
    reported,
)
from metaq_py.directive_keys import parse_indices
from metaq_py.durations import (
    DurationError,
    format_duration,
    format_time,
    parse_duration,
    parse_time,
)
from metaq_py.errors import QueueError
from metaq_py.hybrid import Notice
from metaq_py.queue.admin import QueueAdmin
from metaq_py.queue.campaign.arrays import split_ref
from metaq_py.queue.disk.folders import PeopleIds
from metaq_py.queue.notices import NodeLimit, NoticeError, cancel_notice, read_notices, write_notice
from metaq_py.queue.store import Queue
from metaq_py.ranges import format_indices
from metaq_py.report.accounting import Report, Use, build_report, parse_since
from metaq_py.report.allocations import live_jobs
from metaq_py.report.explain import explain as explain_task
from metaq_py.report.joblog import EVENTS_NAME, read_job_log, read_job_logs
from metaq_py.report.task_use import Named, TaskUse, task_use
from metaq_py.report.timeline import build_timeline
from metaq_py.words import counted


@app.command()
def notice(
    nodes: Annotated[int | None, typer.Option(
        "--nodes", help="Nodes the on-demand work will need.")] = None,
    at: Annotated[str | None, typer.Option(
        "--at", help="When it arrives: +20m, 2025-03-01T14:30 or 14:30.")] = None,
    walltime: Annotated[str | None, typer.Option(
        "--walltime", help="How long it runs, such as 1h or 1:30:00.")] = None,
    name: Annotated[str | None, typer.Option(
        "--name", help="The notice's name, for #METAQ NOTICE (generated if absent).")] = None,
    cancel: Annotated[str | None, typer.Option(
        "--cancel", metavar="NAME", help="Withdraw the notice NAME.")] = None,
    list_: Annotated[bool, typer.Option("--list", help="List the notices.")] = False,
    json_out: JsonOpt = False,
    queue: QueueOpt = Path("queue"),
) -> None:
    """Announce on-demand work in advance, withdraw a notice, or list them."""
    with reported():
        q = open_queue(queue)
        now = time.time()
        creating = any(v is not None for v in (nodes, at, walltime, name))
        if sum((creating, cancel is not None, list_)) != 1:
            raise NoticeError("give either --nodes, --at and --walltime (with an optional "
                              "--name) to announce work, or --cancel NAME, or --list")
        if list_:
            _list_notices(q, now, json_out)
            return
        if cancel is not None:
            moved = cancel_notice(q.root, cancel, now=now)
            typer.echo(f"notice {cancel} withdrawn (kept as {moved.relative_to(q.root)})")
            return
        missing = [flag for flag, v in (("--nodes", nodes), ("--at", at),
                                        ("--walltime", walltime)) if v is None]
        if missing:
            raise NoticeError(f"a notice needs {', '.join(missing)} as well")
        assert nodes is not None and at is not None and walltime is not None
        try:
            arrival = parse_time(at, now=now)
        except DurationError as e:
            raise NoticeError(f"--at: {e}") from None
        try:
            seconds = parse_duration(walltime)
        except DurationError as e:
            raise NoticeError(f"--walltime: {e}") from None
        limit = _node_limit(q, now)
        record = write_notice(q.root, nodes=nodes, arrival=arrival, walltime=seconds, now=now,
                              name=name, limit=limit)
        if limit is None:
            typer.echo("warning: no allocation is running and caps.nodes is not set, so the "
                       "size of this notice could not be checked", err=True)
        if json_out:
            typer.echo(json.dumps(_notice_json(record.notice, record.who), indent=2))
            return
        typer.echo(f"notice {record.name}: {nodes} nodes at {format_time(arrival)} for "
                   f"{format_duration(seconds)}; tasks redeem it with "
                   f"'#METAQ NOTICE {record.name}'")


def _node_limit(q: Queue, now: float) -> NodeLimit | None:
    """The most nodes a notice may ask for: ``caps.nodes`` when set (no task larger is ever
    accepted), else the largest live allocation, else unknown."""
    if q.config.caps.nodes is not None:
        return NodeLimit(q.config.caps.nodes, "caps.nodes in metaq.yaml")
    jobs = live_jobs(read_job_logs(q.root), q.leases(), now=now,
                     stale_after=q.config.stale_after)
    if not jobs:
        return None
    big = max(jobs, key=lambda j: j.nodes)
    return NodeLimit(big.nodes, f"the largest live allocation (job {big.jobid})")


def _list_notices(q: Queue, now: float, json_out: bool) -> None:
    records, problems = read_notices(q.root)
    if json_out:
        typer.echo(json.dumps({"notices": [_notice_json(r.notice, r.who) for r in records],
                               "problems": problems}, indent=2))
        return
    for p in problems:
        typer.echo(f"warning: {p}", err=True)
    if not records:
        typer.echo("no notices")
        return
    t = Table(title=f"notices in {q.root}")
    for col in ("name", "nodes", "arrival", "walltime", "issued", "who"):
        t.add_column(col)
    for r in records:
        n = r.notice
        when = format_time(n.arrival)
        when += f" (in {format_duration(round(n.arrival - now))})" if n.arrival > now else ""
        t.add_row(n.id, str(n.nodes), when, format_duration(n.walltime),
                  format_time(n.issued), r.who)
    console.print(t)


def _notice_json(n: Notice, who: str) -> dict:
    return {"name": n.id, "nodes": n.nodes, "arrival": n.arrival, "walltime": n.walltime,
            "issued": n.issued, "who": who}


@app.command()
def report(
    tasks: Annotated[list[str] | None, typer.Argument(
        help="Report on these tasks alone, one row each: <folder>/<path> or a file path; an "
             "array as one row (run.sh), or some of its indices (run.sh[0-9]).",
        show_default=False)] = None,
    each: Annotated[bool, typer.Option(
        "--each", help="With an array named, one row per index under the array's row.")
    ] = False,
    since: Annotated[str | None, typer.Option(
        "--since", metavar="DATE",
        help="Only events from DATE on: 2025-03-01, 2025-03-01T14:30, today, yesterday "
             "(from local midnight), or 7d ago.")] = None,
    json_out: JsonOpt = False,
    html: Annotated[Path | None, typer.Option(
        "--html", metavar="FILE", help="Write the campaign as one self-contained HTML page "
        "(progress, Gantt, utilisation, failures, retries, on-demand, projects).")] = None,
    queue: QueueOpt = Path("queue"),
) -> None:
    """Show node-hours, GPU-hours and CPU efficiency per project, or per task or array named.

    Without tasks: per project and per user (the owner of each task file), outcomes and
    on-demand work. With tasks (an array as one
    thing, as hold, cancel and retry take it): tasks finished and failed, node-hours,
    GPU-hours and CPU efficiency of each."""
    with reported():
        q = open_queue(queue)
        start = None
        if since is not None:
            try:
                start = parse_since(since, now=time.time())
            except DurationError as e:
                raise QueueError(f"--since: {e}") from None
        if tasks:
            named = [_named(QueueAdmin(q), ref) for ref in tasks]
            logs = read_job_logs(q.root)
            rows = task_use(logs, named, since=start, each=each)
            if json_out:
                typer.echo(json.dumps({"since": start, "tasks": [r.to_json() for r in rows]},
                                      indent=2))
            else:
                _print_task_use(rows, start)
            for log in logs:
                for p in log.problems:
                    typer.echo(f"warning: {p}", err=True)
            return
        if each:
            raise QueueError("--each lists the indices of an array: name one, such as "
                             "'metaq report run.sh --each'")
        if html is not None:
            _write_html(q, html, start)
            return
        rep = build_report(read_job_logs(q.root), since=start)
        if json_out:
            typer.echo(json.dumps(rep.to_json(), indent=2))
        else:
            _print_report(rep)
        for p in rep.problems:
            typer.echo(f"warning: {p}", err=True)


def _write_html(q: Queue, target: Path, since: float | None) -> None:
    """``metaq report --html FILE``: the campaign as one page (its modules load only here)."""
    from metaq_py.report.html.campaign import gather
    from metaq_py.report.html.campaign_page import campaign_html

    campaign = gather(read_job_logs(q.root), since=since)
    text = campaign_html(campaign, queue=str(q.root), generated=time.time())
    try:
        target.write_text(text, encoding="utf-8")
    except OSError as e:
        raise QueueError(f"cannot write {target} ({e.strerror})") from None
    for p in campaign.problems:
        typer.echo(f"warning: {p}", err=True)
    typer.echo(f"wrote {target}: {len(campaign.runs):,} runs of {len(campaign.tasks()):,} "
               f"tasks in {campaign.report.jobs} batch jobs, {len(text.encode()) / 1e6:.2f} MB")


def _named(admin: QueueAdmin, ref: str) -> Named:
    """The task, or the indices of the array, that ``ref`` names, in any state."""
    info = admin.array_of(ref)
    if info is None:
        task = admin.find(ref).id
        return Named(task, (task,))
    sel = split_ref(ref)[1]
    try:
        indices = info.indices if sel in (None, "*") else parse_indices(sel or "")
    except ValueError as e:
        raise QueueError(f"{ref!r}: {e}") from None
    unknown = sorted(set(indices) - set(info.indices))
    if unknown:
        raise QueueError(f"the array {info.id} has no index {unknown[0]} (its indices are "
                         f"{format_indices(info.indices)})")
    name = info.id if sel is None else f"{info.id}[{sel}]"
    return Named(name, tuple(info.member(i) for i in indices), array=True)


def _print_task_use(rows: list[TaskUse], since: float | None) -> None:
    span = f"since {format_time(since)}" if since is not None else "all time"
    t = Table(title=f"usage per task, {span}")
    for col in ("task", "tasks", "finished", "failed", "runs", "node-hours", "GPU-hours",
                "CPU efficiency"):
        t.add_column(col, justify="left" if col == "task" else "right")
    for row in rows:
        for r, indent in ((row, ""), *((m, "  ") for m in row.members)):
            t.add_row(indent + r.name, str(r.tasks), str(r.finished), str(r.failed),
                      str(r.runs), f"{r.node_hours:.2f}", f"{r.gpu_hours:.2f}",
                      _efficiency(r.cpu_hours, r.core_hours, r.measured))
    console.print(t)


def _efficiency(cpu_hours: float, core_hours: float, measured: int) -> str:
    """CPU time over cores times wall time, as ``seff`` prints it, and over how many runs."""
    if core_hours <= 0:
        return "n/a"
    return f"{cpu_hours / core_hours:.1%} ({counted(measured, 'run')})"


def _use_table(title: str, by: str, uses: tuple[Use, ...], outcomes: dict[str, int]) -> Table:
    """What each project's or user's runs used, with their total."""
    t = Table(title=title)
    t.add_column(by)
    t.add_column("node-hours", justify="right")
    t.add_column("GPU-hours", justify="right")
    t.add_column("runs", justify="right")
    t.add_column("CPU-hours", justify="right")
    t.add_column("CPU efficiency", justify="right")
    t.add_column("outcomes")
    for u in uses:
        t.add_row(cell(u.name), f"{u.node_hours:.2f}", f"{u.gpu_hours:.2f}", str(u.runs),
                  f"{u.cpu_hours:.2f}", _efficiency(u.cpu_hours, u.core_hours, u.measured),
                  ", ".join(f"{k} {v}" for k, v in u.outcomes.items()))
    cpu, core = sum(u.cpu_hours for u in uses), sum(u.core_hours for u in uses)
    t.add_row("[bold]total[/]", f"[bold]{sum(u.node_hours for u in uses):.2f}[/]",
              f"[bold]{sum(u.gpu_hours for u in uses):.2f}[/]",
              f"[bold]{sum(u.runs for u in uses)}[/]", f"[bold]{cpu:.2f}[/]",
              _efficiency(cpu, core, sum(u.measured for u in uses)),
              ", ".join(f"{k} {v}" for k, v in outcomes.items()))
    return t


def _print_report(rep: Report) -> None:
    span = f"since {format_time(rep.since)}" if rep.since is not None else "all time"
    console.print(_use_table(f"usage per project, {span} ({counted(rep.jobs, 'batch job')})",
                             "project", rep.projects, rep.outcomes))
    if rep.users:
        console.print(_use_table(f"usage per user, {span}", "user", rep.users, rep.outcomes))
    od = rep.ondemand
    rate = "n/a" if od.rate is None else f"{od.rate:.0%} ({od.instant} of {od.known})"
    typer.echo("on-demand:")
    typer.echo(f"  on-demand starts        {od.starts}")
    typer.echo(f"  instant-start rate      {rate}")
    typer.echo(f"  preemptions             {od.preemptions}")
    typer.echo(f"  shrinks                 {od.shrinks}")
    typer.echo(f"  node-hours lost         {od.lost_node_hours:.2f} (to preemption)")
    if rep.reclaims:
        typer.echo(f"reclaimed from dead jobs: {counted(rep.reclaims, 'task')}")


@app.command()
def explain(
    task: TaskArg,
    json_out: JsonOpt = False,
    queue: QueueOpt = Path("queue"),
) -> None:
    """Say why a task is not running (or where it is, if it is)."""
    with reported():
        q = open_queue(queue)
        ex = explain_task(q, task, now=time.time())
        if json_out:
            typer.echo(json.dumps({"task": ex.task, "state": ex.state,
                                   "reasons": list(ex.reasons)}, indent=2))
            return
        typer.echo(f"{PeopleIds(q.root)(ex.task)}: {ex.state}")
        for reason in ex.reasons:
            typer.echo(f"  - {reason}")


@app.command()
def jobs(
    json_out: JsonOpt = False,
    queue: QueueOpt = Path("queue"),
) -> None:
    """List the batch jobs that ran metaq on this queue, the latest last.

    Each with when it started, its nodes, how its tasks ended and why it stopped."""
    with reported():
        from metaq_py.report.jobs import job_record

        q = open_queue(queue)
        records = sorted((job_record(log) for log in read_job_logs(q.root)),
                         key=lambda r: (r.start is None, r.start or 0.0, r.jobid))
        if json_out:
            typer.echo(json.dumps([r.to_json() for r in records], indent=2))
            return
        if not records:
            typer.echo(f"no batch job has run metaq on {q.root} yet")
            return
        for r in records:
            began = format_time(r.start) if r.start is not None else "start unknown"
            ran = (f"for {format_duration(round(r.stop - r.start))}, stopped: {r.reason}"
                   if r.stop is not None and r.start is not None else
                   "no stop recorded (running, or killed)")
            tasks = ", ".join(f"{n} {o}" for o, n in sorted(r.ended.items())) or "no task"
            typer.echo(f"{r.jobid}  {began}  {counted(r.nodes, 'node')}  {tasks}  {ran}")


@app.command()
def gantt(
    jobid: Annotated[str | None, typer.Argument(
        help="The batch job id (a folder of jobs/; 'metaq jobs' lists them); default: the "
             "latest.")] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", help="Where to write the PNG (default gantt-JOBID.png here).")] = None,
    full: Annotated[bool, typer.Option(
        "--full", help="Show the whole allocation, not only the span of its tasks.")] = False,
    queue: QueueOpt = Path("queue"),
) -> None:
    """Draw one allocation as a Gantt chart: hosts against time, tasks as bars.

    The chart shows the span of the tasks and notes when the allocation ends past it; --full
    shows the whole allocation."""
    with reported():
        q = open_queue(queue)
        if jobid is None:
            from metaq_py.report.jobs import job_record, latest

            last = latest(job_record(log) for log in read_job_logs(q.root))
            if last is None:
                raise QueueError(f"no batch job has run metaq on {q.root} yet; there is "
                                 f"nothing to draw")
            jobid = last.jobid
        target = out if out is not None else Path(f"gantt-{jobid}.png")
        if target.suffix.lower() != ".png":
            raise QueueError(f"--out {target} must end in .png; the chart is a PNG image")
        job_dir = q.job_dir(jobid)
        path = job_dir / EVENTS_NAME
        if not path.is_file():
            raise QueueError(f"job {jobid} has no event log at {path}; 'ls {job_dir.parent}' "
                             f"shows the jobs this queue has seen")
        log = read_job_log(path, jobid=jobid)
        for p in log.problems:
            typer.echo(f"warning: {p}", err=True)
        try:
            tl = build_timeline(log.events, jobid=jobid)
        except ValueError as e:
            raise QueueError(f"{path}: {e}") from None
        # matplotlib takes 0.6 s to import: only here
        from metaq_py.report.gantt import draw_gantt, view

        try:
            draw_gantt(tl, target, full=full)
        except OSError as e:
            raise QueueError(f"cannot write {target} ({e.strerror})") from None
        lo, hi = view(tl, full=full)
        shown = "" if full else (f", showing the tasks' {format_duration(round(hi - lo))} "
                                 f"(--full for all of it)")
        typer.echo(f"wrote {target}: {counted(len(tl.hosts), 'host')}, "
                   f"{counted(len({b.task for b in tl.bars}), 'task')}, "
                   f"{format_duration(round(tl.stop - tl.start))}{shown}")
