"""``metaq simulate``: replay a trace (or a synthetic Theta-like workload) through a policy.

The simulator (the top-level ``sim`` package) is imported inside the command only, so the rest
of the CLI, and the live runner, never load it. Errors are one sentence on standard error,
with exit status 1.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.table import Table

from metaq_py.cli.shared import SCHEDULER_HELP, app, console, one_scheduler
from metaq_py.errors import MetaqError

if TYPE_CHECKING:
    from sim.run.metrics import Summary
    from sim.run.outputs import RunInfo
    from sim.run.result import SimulationResult
    from sim.trace.loader import Trace
    from sim.workload.model import HybridWorkload

DEFAULT_JOBS = 10_000
"""Jobs in the default synthetic workload: about five months of Theta, simulated in seconds."""
PROGRESS_FROM = 5_000
"""Runs of at least this many jobs show a progress bar (on a terminal: elsewhere it would
not be drawn, and importing it is a few percent of a whole command)."""



# Over 80 lines, because typer reads every option of the command from this signature, one
# declaration with its help text each, and takes most of these lines.
@app.command()
def simulate(
    trace: Annotated[Path | None, typer.Option(
        help="A job trace (plain or .gz): SWF, ALCF CSV, sacct --parsable2 output or a PBS "
             "accounting log. Default: a synthetic Theta-like workload.")] = None,
    scheduler: Annotated[str | None, typer.Option(help=SCHEDULER_HELP + " Default easy.")
                         ] = None,
    policy: Annotated[str | None, typer.Option(
        hidden=True, help="The old name of --scheduler.")] = None,
    seed: Annotated[int, typer.Option(
        help="Seed of the synthetic trace and of the hybrid workload model.")] = 0,
    out: Annotated[Path, typer.Option(help="Directory for jobs.csv, summary.json and the "
                                           "plots.")] = Path("simulation"),
    oracle: Annotated[bool, typer.Option(
        "--oracle", help="Decide on true runtimes instead of requested walltimes.")] = False,
    cqsim_oracle: Annotated[bool, typer.Option(
        "--cqsim-oracle", help="CQSim's oracle: true runtimes for waiting jobs, walltimes for "
                               "running ones (to compare with CQSim).")] = False,
    workload: Annotated[str, typer.Option(
        help="Hybrid workload W1..W5 (rigid, malleable and on-demand jobs), or none.")] = "none",
    jobs: Annotated[int | None, typer.Option(
        help=f"Jobs in the synthetic workload (default {DEFAULT_JOBS:,}).")] = None,
    nodes: Annotated[int | None, typer.Option(
        help="Machine size in nodes (default: the trace's, or 4,360 for Theta).")] = None,
    procs: Annotated[int | None, typer.Option(
        help="Machine size in processors, for traces that count processors (SWF).")] = None,
    unit: Annotated[str | None, typer.Option(
        help="What job sizes count: processors (SWF's default) or nodes (whole nodes, "
             "rounding up; the default for the ALCF, SLURM and PBS logs).")] = None,
    procs_per_node: Annotated[int | None, typer.Option(
        help="Processors in a node, for --unit nodes (default: MaxProcs / MaxNodes).")] = None,
    missing_walltime: Annotated[str, typer.Option(
        help="Walltime of jobs that requested none: limit (their queue's), runtime, a "
             "multiple such as 2x, or drop.")] = "limit",
    load: Annotated[float, typer.Option(
        help="Scale the arrivals: the same jobs arrive F times as fast (inter-arrival gaps "
             "divided by F, as CQSim's density option).", metavar="F")] = 1.0,
    dependencies: Annotated[bool, typer.Option(
        "--dependencies", help="Honour SWF fields 17 and 18: a job that names a preceding job "
                               "arrives after its end plus the think time.")] = False,
    plots: Annotated[bool, typer.Option(help="Write the PNG plots.")] = True,
    cache: Annotated[bool, typer.Option(
        help="Keep parsed traces in the user's cache directory, keyed by content "
             "(METAQ_TRACE_CACHE=0 turns it off too).")] = True,
    compare_recorded: Annotated[bool, typer.Option(
        "--compare-recorded", help="Replay the trace under EASY (on estimates and on "
        "runtimes), conservative and FCFS, and set their waits beside the recorded ones: "
        "compare-recorded.md, .csv and .png.")] = False,
    format_: Annotated[str, typer.Option(
        "--format", help="jobs.csv as metaq writes it, or batsim: Batsim's jobs.csv and "
                         "schedule.csv, for evalys.")] = "metaq",
) -> None:
    """Simulate a job trace under a scheduling policy and summarise what happened."""
    from metaq_py import build
    from metaq_py.policy import make_scheduler
    from sim.engine.core import simulate as run_simulation
    from sim.engine.errors import SimulationError
    from sim.run.outputs import write_outputs
    from sim.trace.loader import TraceError

    try:
        if format_ not in ("metaq", "batsim"):
            raise ValueError(f"--format must be metaq or batsim, not {format_!r}")
        name = one_scheduler(scheduler, policy, "--policy") or "easy"
        chosen = make_scheduler(name, oracle=oracle or cqsim_oracle)
        reading = TraceReading(nodes=nodes, procs=procs, unit=unit,
                               procs_per_node=procs_per_node,
                               missing_walltime=missing_walltime, cache=cache, load=load,
                               dependencies=dependencies)
        source, info = _source(trace=trace, seed=seed, workload=workload, jobs=jobs,
                               reading=reading)
    except (ValueError, TraceError, OSError, MetaqError) as e:
        _fail(e)
    count = len(source)
    _print_checks(info)
    if count == 0:
        _fail(ValueError(f"no job of {info.trace} is left to simulate: "
                         f"{'; '.join(info.cleaning) or 'the trace holds no job'}."))
    if compare_recorded:
        _compare(source, info, out, plots)
        return
    console.print(f"Simulating {count:,} jobs of {info.trace} ({info.why})"
               f"{f' as workload {info.workload}' if info.workload else ''} "
               f"under {chosen.name}{' (oracle)' if chosen.oracle else ''}.")
    try:
        if count >= PROGRESS_FROM and console.is_terminal:
            result = _with_progress(run_simulation, source, chosen, cqsim_oracle, count,
                                    dependencies)
        else:
            result = run_simulation(source, policy=chosen, cqsim_oracle=cqsim_oracle,
                                    dependencies=dependencies)
        summary = result.summary()
        written = write_outputs(result, out, info=info, summary=summary, plots=plots)
        if format_ == "batsim":
            from metaq_py.cli.recorded_view import write_batsim

            written = [p for p in written if p.name != "jobs.csv"]
            written += write_batsim(result, source, out)
    except (SimulationError, OSError, ValueError) as e:
        _fail(e)
    unit = str(info.machine["unit"]) if info.machine is not None else "nodes"
    console.print(_table(result, summary, unit))
    console.print(f"Simulated in {result.wall_seconds:.2f} s by the {build()} policy core "
               f"({count / result.wall_seconds:,.0f} jobs/s).")
    console.print(f"Wrote {', '.join(p.name for p in written)} to {out.resolve()}")


def _compare(source: Trace | HybridWorkload, info: RunInfo, out: Path, plots: bool) -> None:
    """``--compare-recorded``: the candidate policies' waits against the recorded ones."""
    from metaq_py.cli.recorded_view import compare_recorded
    from sim.engine.errors import SimulationError
    from sim.trace.loader import Trace

    if not isinstance(source, Trace) or info.seed is not None:
        _fail(ValueError("--compare-recorded needs a --trace whose jobs were recorded, not a "
                         "synthetic trace or a hybrid workload"))
    try:
        compare_recorded(source, label=info.trace, out=out, plots=plots)
    except (SimulationError, OSError, ValueError) as e:
        _fail(e)


@dataclass(frozen=True, slots=True)
class TraceReading:
    """How to read a trace file: the machine size, the unit, and the missing-walltime
    estimate (the options of the same names)."""

    nodes: int | None = None
    procs: int | None = None
    unit: str | None = None
    procs_per_node: int | None = None
    missing_walltime: str = "limit"
    cache: bool = True
    load: float = 1.0
    dependencies: bool = False


def _print_checks(info: RunInfo) -> None:
    """The trace's machine, offered load, reading notes, cleaning and warnings, before the
    run: every step that dropped or changed jobs says so here."""
    if info.machine is not None:
        console.print(f"Machine: {info.machine['size']:,} {info.machine['unit']} "
                      f"({info.machine['source']}).")
    if info.offered_load is not None:
        console.print(f"Offered load: {info.offered_load:.0%} of the machine over the "
                      "submit span.")
    for line in (*info.reading, *info.cleaning):
        console.print(f"Trace: {line}.", highlight=False)
    for warning in info.warnings:
        console.print(f"[bold]Warning:[/bold] {warning}", highlight=False)


def _source(*, trace: Path | None, seed: int, workload: str, jobs: int | None,
            reading: TraceReading) -> tuple[Trace | HybridWorkload, RunInfo]:
    """The trace or hybrid workload to simulate, and its description for ``summary.json``."""
    from sim.run.outputs import RunInfo
    from sim.trace.cleaning import WalltimeEstimate
    from sim.trace.loader import load_trace
    from sim.trace.machine import UNITS
    from sim.trace.sanity import check_trace
    from sim.trace.scaling import scale_load
    from sim.workload.model import WORKLOADS, WorkloadModel, hybrid_workload

    nodes = reading.nodes

    name = workload.strip().upper()
    if name != "NONE" and name not in WORKLOADS:
        raise ValueError(f"unknown workload {workload!r}; choose one of "
                         f"{', '.join(WORKLOADS)} or none")
    if nodes is not None and nodes < 1:
        raise ValueError(f"--nodes must be a positive number of nodes, not {nodes}")
    if reading.procs is not None and reading.procs < 1:
        raise ValueError(f"--procs must be a positive number of processors, not "
                         f"{reading.procs}")
    if reading.dependencies and name != "NONE":
        raise ValueError("--dependencies applies to a plain trace, not to a hybrid workload "
                         "(whose advance notices assume the recorded submit times)")
    if reading.unit is not None and reading.unit not in UNITS:
        raise ValueError(f"--unit must be processors or nodes, not {reading.unit!r}")
    estimate = WalltimeEstimate.parse(reading.missing_walltime)
    if trace is not None:
        if jobs is not None:
            raise ValueError("--jobs sets the size of the synthetic workload and cannot be "
                             "combined with --trace")
        if not trace.is_file():
            raise ValueError(f"no trace file at {trace}")
        base = load_trace(trace, nodes=nodes, procs=reading.procs,
                          unit=reading.unit,  # type: ignore[arg-type]
                          procs_per_node=reading.procs_per_node,
                          missing_walltime=reading.missing_walltime, cache=reading.cache,
                          dependencies=reading.dependencies)
        label, why = trace.name, f"--trace {trace}"
    else:
        from sim.trace.synthetic import synthetic_trace

        count = DEFAULT_JOBS if jobs is None else jobs
        if count < 1:
            raise ValueError(f"--jobs must be at least 1, not {count}")
        base = synthetic_trace(jobs=count, seed=seed, **({"nodes": nodes} if nodes else {}))
        label = f"a synthetic Theta-like trace (seed {seed})"
        why = "no --trace given: metaq simulate's default is the synthetic workload"
    own = base
    if reading.load != 1.0:
        base = scale_load(base, reading.load)
        base = replace(base, notes=(*base.notes, f"arrivals scaled {reading.load:g} times as "
                                    "fast (--load)"))
    check = check_trace(base)
    machine = base.machine.to_dict() if base.machine is not None else {
        "size": base.nodes, "unit": base.unit, "source": "the synthetic workload",
        "procs_per_node": None, "header_fields": []}
    info = RunInfo(trace=label, why=why, seed=seed if trace is None else None,
                   cleaning=tuple(base.report.lines()), machine=machine,
                   offered_load=check.to_dict()["offered_load"],  # type: ignore[arg-type]
                   reading=base.notes, warnings=check.warnings,
                   walltime_estimate=estimate.describe() if trace is not None else None)
    if name == "NONE":
        return base, info
    if base.unit != "nodes":
        raise ValueError("the hybrid workloads preempt and resize whole nodes, so read the "
                         "trace with --unit nodes")
    model = WorkloadModel.for_workload(name, seed=seed)
    # typed at the trace's own load: a seed types each job alike at every --load
    return hybrid_workload(base, model, typed_on=own), replace(info, workload=name, seed=seed)


def _with_progress(run: Any, source: Any, scheduler: Any, cqsim_oracle: bool,
                   count: int, dependencies: bool) -> SimulationResult:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    with Progress("[progress.description]{task.description}", BarColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                  transient=True) as bar:
        task = bar.add_task("jobs finished", total=count)
        return run(source, policy=scheduler, cqsim_oracle=cqsim_oracle,
                   dependencies=dependencies,
                   progress=lambda done: bar.update(task, completed=done))


def _hours(x: float | None) -> str:
    return "-" if x is None else f"{x / 3600:.2f} h"


def _share(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def _table(result: SimulationResult, summary: Summary, unit: str) -> Table:
    """The run's headline figures as a rich table."""
    table = Table(title=f"{result.policy} on {result.nodes:,} {unit}", title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    u = summary.utilisation
    rows = [
        ("jobs finished", f"{summary.finished:,} of {summary.jobs:,}"),
        ("wait: mean / median / p95", " / ".join(
            _hours(x) for x in (summary.wait.all.mean, summary.wait.all.median,
                                summary.wait.all.p95))),
        ("turnaround: mean", _hours(summary.turnaround.all.mean)),
    ]
    if result.hybrid:
        for kind, stats in summary.turnaround.kinds.items():
            rows.append((f"turnaround: mean, {kind}", _hours(stats.mean)))
    bsld = summary.bounded_slowdown.all.mean
    rows += [
        ("bounded slowdown: mean (10 s)", "-" if bsld is None else f"{bsld:.2f}"),
        (f"utilisation over {(u.end - u.start) / 86400:.1f} days", _share(u.value)),
        ("utilisation, CQSim's formula", _share(summary.cqsim_utilisation)),
    ]
    if result.hybrid:
        rows += [
            ("on-demand instant starts", _share(summary.instant_start_rate)),
            ("rigid jobs preempted", _share(summary.preemption_ratio.get("rigid"))),
            ("malleable jobs preempted", _share(summary.preemption_ratio.get("malleable"))),
            ("malleable jobs shrunk", _share(summary.shrink_ratio)),
            ("node-hours lost to preemption", f"{summary.lost_node_hours:,.0f}"),
        ]
    d = summary.decision_time
    rows += [
        ("decision time: mean / p99",
         "-" if d.mean is None or d.p99 is None else f"{d.mean * 1e3:.3f} / {d.p99 * 1e3:.3f} ms"),
        ("wall time", f"{result.wall_seconds:.2f} s "
                      f"({result.agenda_items_per_second:,.0f} agenda items/s)"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    return table


def _fail(e: BaseException) -> NoReturn:
    typer.echo(f"metaq: {e}", err=True)
    raise typer.Exit(1)
