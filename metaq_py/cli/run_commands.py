"""Commands of the runner: ``run`` (inside a batch job), ``running`` and ``reset`` (leases, by
hand), ``checkpoint`` (inside a task) and ``demo`` (the example queue on a pretend cluster).

Every option of ``metaq run`` is a field of :class:`~metaq_py.runner.loop.RunOptions` or of
:class:`~metaq_py.batch.BatchOverrides`, under the same name.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from metaq_py.batch import BatchError, BatchOverrides, BatchSystem, detect_batch
from metaq_py.cli.metaq_env import read_metaq_env
from metaq_py.cli.shared import JsonOpt, QueueOpt, app, one_scheduler, open_queue, reported
from metaq_py.durations import DurationError, parse_duration
from metaq_py.errors import MetaqError
from metaq_py.policy import MECHANISMS
from metaq_py.queue.disk.folders import PeopleIds
from metaq_py.runner.loop import Runner, RunOptions
from metaq_py.runner.reclaim import view_leases

_T = TypeVar("_T")


def _seconds(text: str | None, flag: str) -> float | None:
    if text is None:
        return None
    try:
        return parse_duration(text)
    except DurationError as e:
        raise typer.BadParameter(f"{flag} {e}") from None


# Over 80 lines, because typer reads every option of the command from this signature, one
# declaration with its help text each, and takes most of these lines.
@app.command()
def run(
    queue: Annotated[Path | None, typer.Option(
        "--queue", "-q", envvar="METAQ_QUEUE",
        help="The queue directory (or set METAQ_QUEUE, or METAQ as a METAQ job script "
             "does; default: ./queue).")] = None,
    nodes: Annotated[int | None, typer.Option(
        help="Use this many nodes: the size of a local pretend cluster, or the first N of the "
             "batch job's nodes.")] = None,
    walltime: Annotated[str | None, typer.Option(
        help="Stop by this duration from now even if the batch job could run longer.")] = None,
    scheduler: Annotated[str | None, typer.Option(
        help=f"The scheduler: {', '.join(MECHANISMS)} (default easy).")] = None,
    mechanism: Annotated[str | None, typer.Option(
        hidden=True, help="The old name of --scheduler.")] = None,
    linger: Annotated[bool | None, typer.Option(
        "--linger/--no-linger",
        help="Wait for new work until the wall clock ends, instead of stopping when nothing "
             "left fits (default: no, or METAQ_LOOP_FOREVER).")] = None,
    max_tasks: Annotated[int | None, typer.Option(
        help="At most this many tasks at once (default: caps.tasks in metaq.yaml).")] = None,
    launch_pause: Annotated[str | None, typer.Option(
        help="Pause between two launches (default: caps.launch_pause in metaq.yaml).")] = None,
    grace: Annotated[str, typer.Option(
        help="Time between SIGTERM and SIGKILL for tasks without #METAQ SIGNAL, and the "
             "warning before a resize by restart.")] = "60",
    margin: Annotated[str, typer.Option(
        help="Time kept free before the allocation ends, after the grace periods.")] = "10",
    srun: Annotated[bool, typer.Option(
        "--srun", help="Start each task script in its own srun step on its first node.")] = False,
    agents: Annotated[bool, typer.Option(
        "--agents", help="Start one agent on each node (one srun step on SLURM) and each "
                         "task script through the agent of its first node.")] = False,
    batch: Annotated[str | None, typer.Option(
        help="The batch system: slurm, pbs or local (default: detected).")] = None,
    jobid: Annotated[str | None, typer.Option(help="Override the batch job id.")] = None,
    machine: Annotated[str | None, typer.Option(help="Override the machine name.")] = None,
    gpus_per_node: Annotated[int | None, typer.Option(
        help="Override the GPUs per node (device ids 0..N-1).")] = None,
    cores_per_node: Annotated[int | None, typer.Option(
        help="The cores each node offers shares of a node (#METAQ CPUS); default: from the "
             "batch system, else the cores this process may use.")] = None,
    cores_per_gpu: Annotated[int | None, typer.Option(
        help="Cores per GPU held back from shares without GPUs, to keep GPU tasks' cores "
             "free (default 0).")] = None,
    release_after: Annotated[str, typer.Option(
        help="On-demand mechanisms: release a reservation this long after its estimated "
             "arrival.")] = "10m",
    warning: Annotated[str, typer.Option(
        help="On-demand mechanisms: how long before a planned preemption a malleable task is "
             "warned.")] = "2m",
    fs_events: Annotated[bool, typer.Option(
        "--fs-events/--no-fs-events",
        help="Wake at once on file-system events (watchdog) when the queue changes; without "
             "them, changes are found by polling every poll_interval of metaq.yaml.")] = True,
    verbose: Annotated[bool | None, typer.Option(
        "--verbose", "-v",
        help="A line per start and end of a task (default: no, or METAQ_VERBOSITY above "
             "0).")] = None,
    end_signal: Annotated[str, typer.Option(
        "--end-signal", metavar="SIGNAL",
        help="The stop signal that means the wall clock is ending (as the batch script's "
             "--signal sends it): TERM, USR1, INT, HUP, USR2 or ALRM. Every stop signal "
             "requeues the tasks; this one also brings the end forward.")] = "USR1",
) -> None:
    """Backfill the queue's tasks into this batch job's nodes until nothing left fits.

    With --linger, it keeps going until the wall clock ends. METAQ's job-script variables
    (METAQ, METAQ_NODES, METAQ_RUN_TIME, ...) are read when set; flags override them
    (docs/metaq-compat.md)."""
    with reported():
        metaq = read_metaq_env(os.environ, nodes=nodes)
        for line in metaq.warnings:
            typer.echo(f"warning: {line}", err=True)
        q = open_queue(queue or metaq.queue or Path("queue"))
        try:
            pause = _seconds(launch_pause, "--launch-pause")
            overrides = BatchOverrides(
                system=batch, machine=_first(machine, metaq.machine),
                jobid=_first(jobid, metaq.jobid), nnodes=_first(nodes, metaq.nodes),
                gpus_per_node=_first(gpus_per_node, metaq.gpus_per_node),
                cores_per_node=cores_per_node, cores_per_gpu=cores_per_gpu,
                walltime=_first(_seconds(walltime, "--walltime"), metaq.walltime))
            options = RunOptions(
                scheduler=one_scheduler(scheduler, mechanism, "--mechanism") or "easy",
                linger=bool(_first(linger, metaq.linger)),
                max_tasks=_first(max_tasks, metaq.max_tasks),
                launch_pause=_first(pause, metaq.launch_pause),
                grace=_seconds(grace, "--grace") or 0.0, margin=_seconds(margin, "--margin") or 0.0,
                srun=srun, agents=agents,
                release_after=_seconds(release_after, "--release-after") or 0.0,
                warning=_seconds(warning, "--warning") or 0.0, fs_events=fs_events,
                verbose=bool(_first(verbose, metaq.verbose)),
                end_signal=end_signal.upper().removeprefix("SIG"))
        except typer.BadParameter as e:
            raise MetaqError(str(e)) from None
        runner = Runner(q, detect_batch(overrides=overrides), options=options)
        code = runner.run()
    raise typer.Exit(code)


def _first(flag: _T | None, variable: _T | None) -> _T | None:
    """A flag's value if it was given, else the METAQ variable's: flags override variables."""
    return flag if flag is not None else variable


def _batch_for_leases(batch: str | None, machine: str | None) -> tuple[BatchSystem, str | None]:
    adapter = detect_batch(overrides=BatchOverrides(system=batch, machine=machine))
    if machine is None:
        try:
            machine = adapter.allocation().machine
        except BatchError:
            machine = None  # outside a job: only heartbeats can tell
    return adapter, machine


# Options of the commands that look at leases (`running`, `reset`).
LeaseBatchOpt = Annotated[str | None, typer.Option(
    help="Ask this batch system whether jobs are alive (default: detected).")]
LeaseMachineOpt = Annotated[str | None, typer.Option(
    help="The machine whose jobs the batch system can answer for.")]


@app.command()
def running(
    queue: QueueOpt = Path("queue"),
    json_out: JsonOpt = False,
    batch: LeaseBatchOpt = None,
    machine: LeaseMachineOpt = None,
) -> None:
    """List claimed tasks with their job, host, heartbeat age and whether the job is alive."""
    with reported():
        q = open_queue(queue)
        adapter, machine = _batch_for_leases(batch, machine)
        from metaq_py.cli.when import in_units  # only running speaks of ages
        from metaq_py.report.attempts import last_starts
        views = view_leases(q, adapter, machine=machine, now=time.time())
        starts = {job: last_starts(q, job) for job in {v.claim.jobid for v in views}}
        rows = [{"task": v.claim.id, "machine": v.claim.machine, "job": v.claim.jobid,
                 "host": v.claim.host, "pid": v.claim.pid, "age": round(v.age, 1),
                 "nodes": list(starts[v.claim.jobid].get(v.claim.id, {}).get("hosts") or []),
                 "alive": v.alive, "lost": v.lost} for v in views]
        if json_out:
            typer.echo(json.dumps(rows, indent=2))
            return
        if not rows:
            typer.echo("no task is running")
            return
        named = PeopleIds(q.root)
        for r in rows:
            alive = {True: "alive", False: "dead", None: "unknown"}[r["alive"]]
            nodes = ",".join(map(str, r["nodes"])) or "not started yet"
            line = (f"{named(r['task'])}  on {nodes}  job {r['machine']}/{r['job']}  runner on "
                    f"{r['host'] or '?'}  heartbeat {in_units(r['age'])} ago  job {alive}")
            if r["lost"]:
                line += f"  LOST: {r['lost']}"
            typer.echo(line)


@app.command()
def reset(
    dead: Annotated[bool, typer.Option(
        "--dead", help="Take back the tasks of dead jobs and stale leases.")] = False,
    queue: QueueOpt = Path("queue"),
    batch: LeaseBatchOpt = None,
    machine: LeaseMachineOpt = None,
) -> None:
    """Put the tasks of lost claims back in their folders, with their attempt count raised."""
    with reported():
        if not dead:
            raise MetaqError("say what to reset: --dead takes back the tasks of dead jobs")
        q = open_queue(queue)
        adapter, machine = _batch_for_leases(batch, machine)
        views = [v for v in view_leases(q, adapter, machine=machine, now=time.time()) if v.lost]
        for v in views:
            moved = q.reclaim(v.claim, reason=f"{v.lost} (metaq reset --dead)")
            where = "gone meanwhile" if moved is None else f"back in {moved.state}/"
            typer.echo(f"{v.claim.id}: {v.lost}; {where}")
        if not views:
            typer.echo("no lost claims")


@app.command()
def checkpoint() -> None:
    """Inside a task: tell the runner a checkpoint has just completed."""
    path = os.environ.get("METAQ_CHECKPOINT_FILE")
    if not path:
        typer.echo("metaq: METAQ_CHECKPOINT_FILE is not set; run this inside a task started by "
                   "metaq run", err=True)
        raise typer.Exit(1)
    try:
        Path(path).touch()
        os.utime(path)
    except OSError as e:
        typer.echo(f"metaq: cannot touch {path}: {e.strerror}", err=True)
        raise typer.Exit(1) from None


@app.command()
def demo(
    queue: Annotated[Path | None, typer.Option(
        "--queue", "-q", help="Run a copy of this queue instead (default: the example queue "
                              "metaq-py ships; METAQ_QUEUE is not read).")] = None,
    nodes: Annotated[int, typer.Option(help="Nodes of the pretend cluster.")] = 4,
    keep: Annotated[bool, typer.Option(
        "--keep", help="Keep the scratch copy, with its logs and events, and say where.")
    ] = False,
) -> None:
    """Run a copy of the example queue (or another) on a local pretend cluster.

    The copy goes to a scratch folder and runs with 2 GPUs per node; the result is shown,
    and the scratch folder is removed unless --keep. The original is never touched."""
    from metaq_py.share import example_queue

    with reported():
        src = open_queue(queue if queue is not None else example_queue())
        scratch = Path(tempfile.mkdtemp(prefix="metaq-demo-"))
        try:
            code, events = _demo_run(src.root, scratch / "queue", nodes)
        finally:
            if not keep:
                shutil.rmtree(scratch, ignore_errors=True)
        typer.echo(f"kept {scratch}; events: {events}" if keep
                   else f"removed {scratch} (--keep keeps it)")
    if code:
        raise typer.Exit(code)


def _demo_run(src: Path, dst: Path, nodes: int) -> tuple[int, Path]:
    """Copy the queue ``src`` to ``dst``, run it on ``nodes`` pretend nodes and show the
    result; the runner's exit status and its event log."""
    shutil.copytree(src, dst, symlinks=True, ignore=shutil.ignore_patterns("working", "jobs"))
    typer.echo(f"running a copy of {src} in {dst} on {nodes} pretend nodes")
    q = open_queue(dst)
    runner = Runner(q, detect_batch(overrides=BatchOverrides(
        system="local", nnodes=nodes, gpus_per_node=2)),
        options=RunOptions(grace=5.0, margin=1.0))
    code = runner.run()
    from metaq_py.cli.status_commands import status
    status(json_out=False, queue=dst)
    return code, q.events(runner.jobid).path
