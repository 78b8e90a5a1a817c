"""A comparison with the recorded waits, written down: a Markdown table for people
(``compare-recorded.md``), a CSV for tools (``compare-recorded.csv``) and a figure
(``compare-recorded.png``: mean and p90 waits by month and by size class, recorded against
each policy's)."""

from __future__ import annotations

import csv
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from sim.validate.recorded import Comparison, Figures, Row

__all__ = ["hours", "markdown", "percent", "write_comparison"]

HOUR = 3600.0
_COLOURS = {"EASY on estimates": "tab:blue", "EASY on runtimes": "tab:green",
            "conservative": "tab:purple", "FCFS": "tab:orange"}


def hours(seconds: float) -> str:
    return f"{seconds / HOUR:.2f}"


def percent(error: float | None) -> str:
    return "-" if error is None else f"{error:+.0f}%"


def _cells(figures: Figures, recorded: Figures) -> list[str]:
    errors = figures.errors(recorded)
    return [f"{hours(v)} ({percent(e)})" for v, e in
            zip((figures.mean, figures.median, figures.p90), errors, strict=True)]


def markdown(comparison: Comparison, title: str) -> str:
    """The comparison as Markdown: the policies overall, then the closest one by size class
    and by month (waits in hours, errors in percent of the recorded figure)."""
    overall = comparison.overall
    lines = [f"### {title}", "",
             f"{comparison.compared:,} jobs compared; waits in hours, error in percent of the "
             "recorded figure.", ""]
    skipped = comparison.skipped_sentence()
    if skipped:
        lines += [f"The comparison {skipped}.", ""]
    lines += ["| policy | mean wait | median wait | p90 wait | closeness (mean abs. error) |",
              "|---|---|---|---|---|",
              f"| recorded | {hours(overall.recorded.mean)} | {hours(overall.recorded.median)} "
              f"| {hours(overall.recorded.p90)} | |"]
    for name, figures in overall.simulated.items():
        mark = " **(closest)**" if name == comparison.closest else ""
        lines.append(f"| {name}{mark} | " + " | ".join(_cells(figures, overall.recorded))
                     + f" | {comparison.closeness[name]:.0f}% |")
    closest = comparison.closest
    for kind, label in (("size", f"size class ({comparison.unit})"), ("month", "month")):
        rows = comparison.of(kind)
        if not rows:
            continue
        lines += ["", f"By {label}, recorded against {closest}:", "",
                  f"| {label} | jobs | recorded mean | simulated mean | recorded median | "
                  "simulated median | recorded p90 | simulated p90 |", "|---" * 8 + "|"]
        for row in rows:
            sim = row.simulated[closest]
            errors = sim.errors(row.recorded)
            lines.append(
                f"| {row.group} | {row.jobs:,} | {hours(row.recorded.mean)} | "
                f"{hours(sim.mean)} ({percent(errors[0])}) | {hours(row.recorded.median)} | "
                f"{hours(sim.median)} ({percent(errors[1])}) | {hours(row.recorded.p90)} | "
                f"{hours(sim.p90)} ({percent(errors[2])}) |")
    return "\n".join(lines) + "\n"


def write_csv(comparison: Comparison, path: Path) -> Path:
    """One line per group and policy (the recorded figures as policy ``recorded``)."""
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(("kind", "group", "jobs", "policy", "mean_wait", "median_wait",
                      "p90_wait", "mean_error_pct", "median_error_pct", "p90_error_pct"))
        for row in comparison.rows:
            r = row.recorded
            out.writerow((row.kind, row.group, row.jobs, "recorded", r.mean, r.median, r.p90,
                          "", "", ""))
            for name, s in row.simulated.items():
                errors = ["" if e is None else f"{e:.3f}" for e in s.errors(r)]
                out.writerow((row.kind, row.group, row.jobs, name, s.mean, s.median, s.p90,
                              *errors))
    return path


def draw(comparison: Comparison, path: Path) -> Path:
    """Mean (solid) and p90 (dashed) waits by month and by size class: recorded in black,
    each policy in its colour."""
    fig = Figure(figsize=(12, 4.8), dpi=100)
    FigureCanvasAgg(fig)
    for i, (kind, label) in enumerate((("month", "month of submission"),
                                       ("size", f"size class ({comparison.unit})"))):
        ax = fig.add_subplot(1, 2, i + 1)
        rows: list[Row] = comparison.of(kind)
        x = list(range(len(rows)))
        ax.plot(x, [r.recorded.mean / HOUR for r in rows], color="black", marker="o",
                label="recorded, mean")
        ax.plot(x, [r.recorded.p90 / HOUR for r in rows], color="black", linestyle="--",
                label="recorded, p90")
        for name in comparison.overall.simulated:
            colour = _COLOURS.get(name)
            ax.plot(x, [r.simulated[name].mean / HOUR for r in rows], color=colour,
                    marker=".", label=f"{name}, mean")
            ax.plot(x, [r.simulated[name].p90 / HOUR for r in rows], color=colour,
                    linestyle="--", alpha=0.6)
        ax.set_xticks(x, [r.group for r in rows], rotation=45, ha="right", fontsize=8)
        ax.set_xlabel(label)
        ax.set_ylabel("wait (hours)")
        ax.grid(axis="y", color="#dddddd")
        if i == 0:
            ax.legend(fontsize=7, frameon=False)
    fig.suptitle(f"simulated against recorded waits ({comparison.compared:,} jobs; "
                 f"closest: {comparison.closest})")
    fig.tight_layout()
    fig.savefig(path, format="png")
    return path


def write_comparison(comparison: Comparison, out: Path, *, title: str,
                     plot: bool = True) -> list[Path]:
    """Write the Markdown table, the CSV and (with ``plot``) the figure into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    md = out / "compare-recorded.md"
    md.write_text(markdown(comparison, title))
    written = [md, write_csv(comparison, out / "compare-recorded.csv")]
    if plot:
        written.append(draw(comparison, out / "compare-recorded.png"))
    return written
