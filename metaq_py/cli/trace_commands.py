"""``metaq trace convert``: read any trace the simulator reads and write it as SWF.

The simulator (``sim``) is imported inside the command only. Errors are one sentence on
standard error, with exit status 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from metaq_py.cli.shared import app, console

trace_app = typer.Typer(help="Job traces: convert a site's log to the Standard Workload Format.",
                        no_args_is_help=True)
app.add_typer(trace_app, name="trace")


@trace_app.command()
def convert(
    source: Annotated[Path, typer.Argument(
        help="A job trace: SWF, ALCF CSV, sacct --parsable2 output or a PBS accounting log "
             "(plain or .gz).")],
    target: Annotated[Path, typer.Argument(help="The SWF file to write (.gz to compress).")],
    nodes: Annotated[int | None, typer.Option(help="Machine size in nodes.")] = None,
    procs: Annotated[int | None, typer.Option(help="Machine size in processors.")] = None,
    unit: Annotated[str | None, typer.Option(
        help="What job sizes count: processors or nodes (see metaq simulate).")] = None,
    procs_per_node: Annotated[int | None, typer.Option(
        help="Processors in a node, for --unit nodes.")] = None,
    missing_walltime: Annotated[str, typer.Option(
        help="Walltime of jobs that requested none: limit, runtime, a multiple such as 2x, "
             "or drop.")] = "limit",
    cache: Annotated[bool, typer.Option(
        help="Keep parsed traces in the user's cache directory.")] = True,
    keep_names: Annotated[bool, typer.Option(
        "--keep-names", help="Keep user, group, account and queue names (by default they are "
                             "numbered, as the Parallel Workloads Archive does).")] = False,
) -> None:
    """Write SOURCE as SWF at TARGET: cleaned, in its unit, with the machine in the header,
    and anonymised unless --keep-names."""
    from sim.trace.formats.convert import convert_to_swf
    from sim.trace.loader import TraceError, load_trace
    from sim.trace.machine import UNITS

    try:
        if unit is not None and unit not in UNITS:
            raise ValueError(f"--unit must be processors or nodes, not {unit!r}")
        if not source.is_file():
            raise ValueError(f"no trace file at {source}")
        trace = load_trace(source, nodes=nodes, procs=procs, unit=unit,  # type: ignore[arg-type]
                           procs_per_node=procs_per_node, missing_walltime=missing_walltime,
                           cache=cache)
        for line in (*trace.notes, *trace.report.lines()):
            console.print(f"Trace: {line}.", highlight=False)
        written = convert_to_swf(trace, target, keep_names=keep_names)
    except (ValueError, TraceError, OSError) as e:
        typer.echo(f"metaq: {e}", err=True)
        raise typer.Exit(1) from None
    console.print(f"Wrote {len(trace):,} jobs ({trace.format}, {trace.nodes:,} {trace.unit}) "
                  f"to {written}", highlight=False)
