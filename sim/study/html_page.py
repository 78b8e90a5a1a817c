"""A study's HTML page (``report.html``, beside ``report.md``): its results table, findings
and figures handed to :func:`metaq_py.report.html.study.study_html` as plain values.

Kept apart from the Markdown report on purpose: it reads the study's table through its public
methods only (``policies``, ``workloads``, ``metrics``, ``cell``), so the Markdown may change
its layout freely.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from metaq_py.report.html.page import Sort
from metaq_py.report.html.study import BarChart, StudyPage, Table, study_html
from sim.study.aggregate import ALL, ResultsTable
from sim.study.findings import Finding
from sim.study.metrics import BY_KEY
from sim.study.report import StudyContext

__all__ = ["study_page"]


def _shown(metric: str, value: float) -> float:
    """A metric's value as shown: ratios in percent."""
    return 100 * value if BY_KEY[metric].unit == "ratio" else value


def study_page(table: ResultsTable, findings: Sequence[Finding], context: StudyContext, *,
               figures: Sequence[tuple[str, str]] = (), folder: Path) -> str:
    """The page of a study whose figures (caption, file name) are in ``folder``."""
    overall = ALL if len(table.workloads) > 1 else table.workloads[0]
    metrics = [m for m in table.metrics if m in BY_KEY]
    rows = []
    for policy in table.policies:
        row: list[object] = [policy]
        for m in metrics:
            c = table.cell(policy, m, workload=overall)
            if c is None or c.n == 0:
                row.append(None)
                continue
            text = BY_KEY[m].show(c.mean)
            if not math.isnan(c.ci95):
                text += f" ± {_shown(m, c.ci95):.3g}"
            row.append(Sort(text, c.mean))
        rows.append(row)
    charts = []
    for m in metrics:
        metric = BY_KEY[m]
        values = []
        for policy in table.policies:
            c = table.cell(policy, m, workload=overall)
            if c is not None and c.n > 0:
                spread = "" if math.isnan(c.ci95) else f" ± {_shown(m, c.ci95):.3g}"
                values.append((policy, _shown(m, c.mean),
                               f"{policy}: {metric.show(c.mean)}{spread} ({c.n} seeds; "
                               f"{metric.better} is better)"))
        if values:
            charts.append(BarChart(f"{metric.label} ({table.reference})", values,
                                   "%" if metric.unit == "ratio" else
                                   "" if metric.unit in ("x", "count") else metric.unit))
    seeds = context.seeds
    facts = [context.question, f"Study {context.name}: {context.runs} runs",
             f"Trace: {context.trace}", f"Policies: {', '.join(table.policies)}",
             f"Workloads: {', '.join(table.workloads)}; seeds {seeds[0]}–{seeds[-1]}"
             if len(seeds) > 1 else f"Workloads: {', '.join(table.workloads)}; seed {seeds[0]}",
             "Every figure is the mean over seeds ± the half-width of its 95% confidence "
             "interval."]
    verdict = {True: "holds", False: "does not hold", None: "cannot judge"}
    tables = [Table(f"Headline ({table.reference}, {overall})",
                    ["policy", *(BY_KEY[m].label for m in metrics)], rows)]
    if findings:
        tables.append(Table("The paper's findings beside ours",
                            ["finding", "paper", "ours", "verdict", "note"],
                            [[f.claim, f.paper, f.ours, verdict[f.holds], f.reason or ""]
                             for f in findings]))
    return study_html(StudyPage(
        title=context.title, subtitle=f"metaq experiment · {context.name} · {context.trace}",
        facts=facts, tables=tables, charts=charts,
        figures=[(caption, folder / name) for caption, name in figures]))
