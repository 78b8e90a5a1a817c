"""The parts of ``metaq simulate`` that read or write what other tools and the machine itself
recorded: ``--compare-recorded`` (the simulated waits beside the trace's recorded ones, under
each candidate policy) and ``--format batsim`` (a run as Batsim writes it).

Loaded by :mod:`metaq_py.cli.sim_commands` only when one of them is asked for; the simulator
is imported inside each function.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.table import Table

from metaq_py.cli.shared import console

if TYPE_CHECKING:
    from sim.run.result import SimulationResult
    from sim.trace.loader import Trace
    from sim.validate.recorded import Comparison

FORMATS = ("metaq", "batsim")
"""What ``--format`` accepts: our own ``jobs.csv``, or Batsim's ``jobs.csv`` and
``schedule.csv``."""


def compare_recorded(trace: Trace, *, label: str, out: Path, plots: bool) -> Comparison:
    """Replay ``trace`` under each candidate policy, print how their waits compare with the
    recorded ones, and write the comparison into ``out``."""
    from sim.engine.core import simulate
    from sim.validate.candidates import candidates
    from sim.validate.recorded import compare_recorded as compare
    from sim.validate.writing import write_comparison

    results: dict[str, SimulationResult] = {}
    for name, scheduler in candidates().items():
        console.print(f"Simulating {len(trace):,} jobs of {label} under {name}.",
                      highlight=False)
        results[name] = simulate(trace, policy=scheduler)
    comparison = compare(trace, results)
    skipped = comparison.skipped_sentence()
    if skipped:
        console.print(f"Compare: {skipped}.", highlight=False)
    console.print(_table(comparison, label))
    console.print(f"Closest to the recorded waits: {comparison.closest} (mean absolute error "
                  f"{comparison.closeness[comparison.closest]:.0f}% over the mean, median "
                  "and p90 waits).", highlight=False)
    written = write_comparison(comparison, out, title=f"{label}: simulated against recorded "
                               "waits", plot=plots)
    console.print(f"Wrote {', '.join(p.name for p in written)} to {out.resolve()}",
                  highlight=False)
    return comparison


def _table(comparison: Comparison, label: str) -> Table:
    from sim.validate.writing import hours, percent

    overall = comparison.overall
    table = Table(title=f"waits on {label}: {comparison.compared:,} jobs (hours; error in % "
                        "of the recorded)", title_justify="left")
    for column in ("policy", "mean", "median", "p90", "closeness"):
        table.add_column(column, justify="left" if column == "policy" else "right")
    r = overall.recorded
    table.add_row("recorded", hours(r.mean), hours(r.median), hours(r.p90), "")
    for name, s in overall.simulated.items():
        errors = s.errors(r)
        table.add_row(name, *(f"{hours(v)} ({percent(e)})" for v, e in
                              zip((s.mean, s.median, s.p90), errors, strict=True)),
                      f"{comparison.closeness[name]:.0f}%")
    return table


def write_batsim(result: SimulationResult, source: object, out: Path) -> list[Path]:
    """Write the run as Batsim's ``jobs.csv`` and ``schedule.csv`` into ``out``."""
    from metaq_py import __version__, build
    from sim.run.batsim import write_batsim as write
    from sim.trace.loader import Trace

    walltimes: dict[int, float] = {}
    if isinstance(source, Trace):
        walltimes = dict(zip(source.jobs.id.tolist(), source.jobs.walltime.tolist(),
                             strict=True))
    written, left_out = write(result, walltimes, out,
                              version=f"metaq-py {__version__} ({build()})")
    if left_out:
        console.print(f"Batsim: left out {left_out:,} jobs that never finished.",
                      highlight=False)
    return written
