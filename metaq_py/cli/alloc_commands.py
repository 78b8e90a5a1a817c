"""``metaq alloc``: submit batch allocations for the queue when its tasks wait; and
``metaq jobscript``, which prints the batch script that runs ``metaq run``, for people to copy.

``--once`` (the default) makes one pass, for cron; ``--watch`` makes one every ``--interval``
on a login node until Ctrl-C or SIGTERM; ``--dry-run`` prints the exact ``sbatch`` or ``qsub``
command a pass would run, and why, and writes nothing. Every submission and refusal goes to
the queue's ``alloc/events.jsonl``. Errors are one sentence on standard error, exit status 1.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from metaq_py.cli.shared import QueueOpt, app, open_queue, reported
from metaq_py.durations import DurationError, format_duration, parse_duration
from metaq_py.errors import QueueError
from metaq_py.words import counted

if TYPE_CHECKING:
    from metaq_py.alloc.loop import Pass

__all__ = ["alloc", "jobscript"]


@app.command()
def alloc(
    watch: Annotated[bool, typer.Option(
        "--watch", help="Keep going: one pass every --interval until Ctrl-C.")] = False,
    once: Annotated[bool, typer.Option(
        "--once", help="One pass, then exit (the default; for cron).")] = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print the command a pass would run, and why; submit nothing.")
    ] = False,
    interval: Annotated[str, typer.Option(
        "--interval", help="Time between two passes of --watch, such as 30s or 2m.")] = "30s",
    system: Annotated[str | None, typer.Option(
        "--system", help="slurm or pbs (default: alloc.system, else the one installed).")
    ] = None,
    jobscript: Annotated[Path | None, typer.Option(
        "--jobscript", help="The batch script (default: alloc.jobscript, else metaq-py's).")
    ] = None,
    queue: QueueOpt = Path("queue"),
) -> None:
    """Submit batch allocations for the queue by themselves when its tasks wait."""
    # Imported here: `metaq run`, `status` and `submit` need none of it (start-up time).
    from metaq_py.alloc.loop import Allocator

    with reported():
        if watch and (once or dry_run):
            raise QueueError("--watch keeps submitting; give it alone, or --once / --dry-run "
                             "for a single pass")
        if system is not None and system not in ("slurm", "pbs"):
            raise QueueError(f"--system {system!r} is not slurm or pbs")
        try:
            every = parse_duration(interval)
        except DurationError as e:
            raise QueueError(f"--interval: {e}") from None
        allocator = Allocator(open_queue(queue), system=system, jobscript=jobscript)
        if not watch:
            done = allocator.once(dry_run=dry_run)
            _say(done, dry_run=dry_run, quiet=False)
            if done.error is not None or getattr(done.decision, "code", None) == "batch":
                raise typer.Exit(1)
            return
        stop = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
        typer.echo(f"metaq alloc: watching {allocator.root} every {format_duration(every)} "
                   f"({allocator.system}, job name {allocator.name})")
        allocator.watch(interval=every, stop=stop,
                        report=lambda done: _say(done, dry_run=False, quiet=True))
        typer.echo("metaq alloc: stopped")


@app.command()
def jobscript(
    system: Annotated[str, typer.Argument(help="slurm, pbs or local.")],
) -> None:
    """Print the batch script metaq-py ships for SLURM, PBS or local use, to copy.

    metaq jobscript slurm > job.sh, adjust its #SBATCH lines, then sbatch job.sh. It runs
    metaq run; metaq alloc submits the same script when alloc.jobscript names none."""
    from metaq_py.share import JOBSCRIPT_SYSTEMS
    from metaq_py.share import jobscript as shipped

    with reported():
        if system not in JOBSCRIPT_SYSTEMS:
            raise QueueError(f"there is no job script for {system!r}; metaq-py has one for "
                             f"{', '.join(JOBSCRIPT_SYSTEMS)}")
        typer.echo(shipped(system).read_text(), nl=False)


def _say(done: Pass, *, dry_run: bool, quiet: bool) -> None:
    """One pass in words; ``quiet`` leaves out a refusal already said."""
    from metaq_py.alloc.policy import Submit

    d = done.decision
    if isinstance(d, Submit):
        if dry_run:
            typer.echo(f"would run: {done.command}")
            typer.echo(f"because: {d.reason}")
        elif done.error is not None:
            typer.echo(f"metaq: submission failed (next try after alloc.backoff): {done.error}",
                       err=True)
        else:
            typer.echo(f"submitted job {done.jobid}: {counted(d.nodes, 'node')} for "
                       f"{format_duration(d.walltime)}, because {d.reason}")
        return
    if quiet and not done.logged:
        return
    lead = "would submit nothing" if dry_run else "submitted nothing"
    typer.echo(f"{lead}: {d.reason}", err=d.code == "batch")
