"""The Markdown report of a study, generated from its results table and findings.

It says what was run (study, trace, policies, workloads, seeds, variants), gives the headline
table (every paper metric per policy, seed-wise averaged over the workloads, as mean ± 95%
confidence half-width), puts the paper's findings beside ours, then the per-workload tables,
the variants side by side when the study has several, the extra metrics and the figures.
Nothing in it depends on the machine or the time it ran, so equal results give an equal report.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from sim.study.aggregate import ALL, Cell, ResultsTable
from sim.study.findings import Finding
from sim.study.metrics import BY_KEY, EXTRA_METRICS, PAPER_METRICS


@dataclass(frozen=True, slots=True)
class StudyContext:
    """What the report says about how the numbers were made."""

    name: str
    title: str
    question: str
    trace: str
    seeds: tuple[int, ...]
    runs: int
    command: str = ""


def _cell(c: Cell | None, metric: str) -> str:
    if c is None or c.n == 0:
        return "n/a"
    m = BY_KEY[metric]
    text = m.show(c.mean)
    if not math.isnan(c.ci95):
        half = m.show(c.ci95).removesuffix(f" {m.unit}") if m.unit != "ratio" else \
            f"{100 * c.ci95:.1f}"
        text += f" ± {half}"
    return text


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


def _short(metric: str) -> str:
    return BY_KEY[metric].label


def _holds(f: Finding) -> str:
    return {True: "holds", False: "**does not hold**", None: "cannot judge"}[f.holds]


def render(table: ResultsTable, findings: Sequence[Finding], context: StudyContext, *,
           figures: Sequence[tuple[str, str]] = (), beside: Sequence[str] = ()) -> str:
    """The report as Markdown; ``figures`` are (caption, relative path) pairs; ``beside`` is
    a section of Markdown lines put after the findings (the study at two loads)."""
    overall = ALL if len(table.workloads) > 1 else table.workloads[0]
    paper = [m.key for m in PAPER_METRICS if m.key in table.metrics]
    extra = [m.key for m in EXTRA_METRICS if m.key in table.metrics]
    seeds = context.seeds
    seed_text = (f"{len(seeds)} seeds ({seeds[0]}–{seeds[-1]})" if len(seeds) > 1
                 else f"seed {seeds[0]}")
    out = [f"# {context.title}", "", context.question, "",
           f"- Study: `{context.name}`, {context.runs} runs"
           + (f", made by `{context.command}`" if context.command else ""),
           f"- Trace: {context.trace}",
           f"- Policies: {', '.join(table.policies)}",
           f"- Workloads: {', '.join(table.workloads)}; {seed_text} each",
           f"- Variants: {', '.join(table.variants)} (findings judged on "
           f"`{table.reference}`)",
           "- Every figure is the mean over seeds ± the half-width of its 95% confidence "
           "interval (Student's t). Turnarounds in hours; rates in percent.", ""]

    where = "averaged over the workloads seed by seed" if overall == ALL else overall
    out += [f"## Headline ({table.reference}, {where})", ""]
    out += _table(["Policy", *(_short(m) for m in paper)],
                  [[p, *(_cell(table.cell(p, m, workload=overall), m) for m in paper)]
                   for p in table.policies])
    out += ["", "## The paper's findings beside ours", ""]
    out += _table(["Finding", "Paper", "Ours", "Verdict", "Why not / note"],
                  [[f.claim, f.paper, f.ours, _holds(f), f.reason or ""] for f in findings])
    if beside:
        out += ["", *beside]

    if len(table.variants) > 1:
        out += ["", "## Variants side by side", "",
                f"Each cell: {where}."]
        for m in paper + [k for k in extra if k.startswith("failure") or k == "lost_node_hours"]:
            out += ["", f"### {_short(m)}", ""]
            out += _table(["Policy", *table.variants],
                          [[p, *(_cell(table.cell(p, m, workload=overall, variant=v), m)
                                 for v in table.variants)] for p in table.policies])

    if len(table.workloads) > 1:
        out += ["", f"## By workload ({table.reference})", ""]
        for m in paper:
            out += [f"### {_short(m)}", ""]
            out += _table(["Policy", *table.workloads],
                          [[p, *(_cell(table.cell(p, m, workload=w), m)
                                 for w in table.workloads)] for p in table.policies])
            out.append("")

    if extra:
        out += ["", f"## Further metrics ({table.reference}, {where})", ""]
        shown = [m for m in extra
                 if any(table.cell(p, m, workload=overall) is not None
                        and table.cell(p, m, workload=overall).n > 0  # type: ignore[union-attr]
                        for p in table.policies)]
        out += _table(["Policy", *(_short(m) for m in shown)],
                      [[p, *(_cell(table.cell(p, m, workload=overall), m) for m in shown)]
                       for p in table.policies])

    if figures:
        out += ["", "## Figures", ""]
        for caption, path in figures:
            out += [f"![{caption}]({path})", "", f"*{caption}*", ""]
    return "\n".join(out).rstrip() + "\n"
