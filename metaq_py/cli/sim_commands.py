"""``metaq simulate``: replay a trace (or a synthetic Theta-like workload) through a policy.

The simulator (the top-level ``sim`` package) is imported inside the command only, so the rest
of the CLI, and the live runner, never load it. Errors are one sentence on standard error,
with exit status 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.table import Table

from metaq_py.cli.app import app, console

if TYPE_CHECKING:
    from sim.run.metrics import Summary
    from sim.run.outputs import RunInfo
    from sim.run.result import SimulationResult
    from sim.trace.loader import Trace
    from sim.workload.model import HybridWorkload

DEFAULT_JOBS = 10_000
"""Jobs in the default synthetic workload: about five months of Theta, simulated in seconds."""
PROGRESS_FROM = 5_000
"""Runs of at least this many jobs show a progress bar."""



@app.command()
def simulate(
    trace: Annotated[Path | None, typer.Option(
        help="An SWF or ALCF CSV job trace (plain or .gz). Default: a synthetic Theta-like "
             "workload.")] = None,
    policy: Annotated[str, typer.Option(
        help="easy, conservative, or an on-demand mechanism such as CUA&SPAA.")] = "easy",
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
    plots: Annotated[bool, typer.Option(help="Write the PNG plots.")] = True,
) -> None:
    """Simulate a job trace under a scheduling policy and summarise what happened."""
    from metaq_py import build
    from metaq_py.policy import make_scheduler
    from sim.engine.core import simulate as run_simulation
    from sim.engine.errors import SimulationError
    from sim.run.outputs import write_outputs
    from sim.trace.loader import TraceError

    try:
        scheduler = make_scheduler(policy, oracle=oracle or cqsim_oracle)
        source, info = _source(trace=trace, seed=seed, workload=workload, jobs=jobs,
                               nodes=nodes)
    except (ValueError, TraceError, OSError) as e:
        _fail(e)
    count = len(source)
    console.print(f"Simulating {count:,} jobs of {info.trace}"
               f"{f' as workload {info.workload}' if info.workload else ''} "
               f"under {scheduler.name}{' (oracle)' if scheduler.oracle else ''}.")
    try:
        if count >= PROGRESS_FROM:
            result = _with_progress(run_simulation, source, scheduler, cqsim_oracle, count)
        else:
            result = run_simulation(source, policy=scheduler, cqsim_oracle=cqsim_oracle)
        summary = result.summary()
        written = write_outputs(result, out, info=info, summary=summary, plots=plots)
    except (SimulationError, OSError) as e:
        _fail(e)
    console.print(_table(result, summary))
    console.print(f"Simulated in {result.wall_seconds:.2f} s by the {build()} policy core "
               f"({count / result.wall_seconds:,.0f} jobs/s).")
    console.print(f"Wrote {', '.join(p.name for p in written)} to {out.resolve()}")


def _source(*, trace: Path | None, seed: int, workload: str, jobs: int | None,
            nodes: int | None) -> tuple[Trace | HybridWorkload, RunInfo]:
    """The trace or hybrid workload to simulate, and its description for ``summary.json``."""
    from sim.run.outputs import RunInfo
    from sim.trace.loader import load_trace
    from sim.trace.synthetic import synthetic_trace
    from sim.workload.model import WORKLOADS, WorkloadModel, hybrid_workload

    name = workload.strip().upper()
    if name != "NONE" and name not in WORKLOADS:
        raise ValueError(f"unknown workload {workload!r}; choose one of "
                         f"{', '.join(WORKLOADS)} or none")
    if nodes is not None and nodes < 1:
        raise ValueError(f"--nodes must be a positive number of nodes, not {nodes}")
    if trace is not None:
        if jobs is not None:
            raise ValueError("--jobs sets the size of the synthetic workload and cannot be "
                             "combined with --trace")
        if not trace.is_file():
            raise ValueError(f"no trace file at {trace}")
        base = load_trace(trace, nodes=nodes)
        label = trace.name
    else:
        count = DEFAULT_JOBS if jobs is None else jobs
        if count < 1:
            raise ValueError(f"--jobs must be at least 1, not {count}")
        base = synthetic_trace(jobs=count, seed=seed, **({"nodes": nodes} if nodes else {}))
        label = f"a synthetic Theta-like trace (seed {seed})"
    cleaning = tuple(base.report.lines())
    if name == "NONE":
        return base, RunInfo(trace=label, seed=seed if trace is None else None,
                             cleaning=cleaning)
    model = WorkloadModel.for_workload(name, seed=seed)
    return hybrid_workload(base, model), RunInfo(trace=label, seed=seed, workload=name,
                                                 cleaning=cleaning)


def _with_progress(run: Any, source: Any, scheduler: Any, cqsim_oracle: bool,
                   count: int) -> SimulationResult:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    with Progress("[progress.description]{task.description}", BarColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                  transient=True) as bar:
        task = bar.add_task("jobs finished", total=count)
        return run(source, policy=scheduler, cqsim_oracle=cqsim_oracle,
                   progress=lambda done: bar.update(task, completed=done))


def _hours(x: float | None) -> str:
    return "-" if x is None else f"{x / 3600:.2f} h"


def _share(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def _table(result: SimulationResult, summary: Summary) -> Table:
    """The run's headline figures as a rich table."""
    table = Table(title=f"{result.policy} on {result.nodes:,} nodes", title_justify="left")
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
