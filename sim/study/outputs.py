"""Everything a study writes from its runs, in one directory:

- ``results.csv`` and ``results.json``: the results table (:mod:`sim.study.aggregate`);
- ``runs.csv``: every run's figures, one row per run, for re-analysis;
- ``findings.json``: the paper's findings judged on our numbers (:mod:`sim.study.findings`);
- ``fig6_<variant>.png``: Fig. 6-style panels per variant; ``variants.png`` when there are
  several variants (:mod:`sim.study.figures`);
- ``report.md``: the Markdown report (:mod:`sim.study.report`).

The same records give byte-identical tables, findings and report (figures too, up to
matplotlib's version).
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from metaq_py.policy.mechanisms import MECHANISMS
from sim.study.aggregate import ResultsTable, aggregate
from sim.study.execution import FinishedRun
from sim.study.figures import metric_panels, variant_panels
from sim.study.findings import Finding, judge
from sim.study.html_page import study_page
from sim.study.metrics import METRICS
from sim.study.report import StudyContext, render


@dataclass(frozen=True, slots=True)
class StudyOutputs:
    """What :func:`write_study` produced."""

    table: ResultsTable
    findings: tuple[Finding, ...]
    files: tuple[Path, ...]


def canonical_policies(records: Sequence[FinishedRun]) -> tuple[str, ...]:
    """The policies of ``records`` in the order of :data:`MECHANISMS` (baselines first), so
    the table's order does not depend on the order the runs finished or were read in."""
    seen = {r.spec.policy for r in records}
    return tuple(m for m in MECHANISMS if m in seen)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text)


def runs_csv(records: Sequence[FinishedRun]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    keys = [m.key for m in METRICS]
    writer.writerow(["variant", "policy", "workload", "seed", *keys])
    for r in records:
        s = r.spec
        writer.writerow([s.variant, s.policy, s.workload, s.seed,
                         *("" if r.metrics.get(k) is None else repr(r.metrics[k])
                           for k in keys)])
    return out.getvalue()


def write_study(records: Sequence[FinishedRun], out: Path, context: StudyContext, *,
                beside: Sequence[str] = ()) -> StudyOutputs:
    """Tabulate, judge, plot and report ``records`` into ``out``; ``beside`` is a section
    the report puts after the findings."""
    out.mkdir(parents=True, exist_ok=True)
    ordered = sorted(records, key=lambda r: (r.spec.policy, r.spec.workload, r.spec.seed))
    # keep the variants in the order the records name them (the study's order)
    variants = list(dict.fromkeys(r.spec.variant for r in records))
    ordered.sort(key=lambda r: variants.index(r.spec.variant))
    table = aggregate(ordered, policies=canonical_policies(records))
    findings = tuple(judge(table))
    files: list[Path] = []

    def write(name: str, text: str) -> None:
        path = out / name
        path.write_text(text)
        files.append(path)

    write("results.csv", table.to_csv())
    write("results.json", table.to_json())
    write("runs.csv", runs_csv(ordered))
    write("findings.json", json.dumps([asdict(f) for f in findings], indent=1) + "\n")
    figures: list[tuple[str, str]] = []
    for v in table.variants:
        name = f"fig6_{_slug(v)}.png"
        files.append(metric_panels(table, out / name, variant=v,
                                   title=f"{context.title}: {v}"))
        figures.append((f"Paper metrics by workload, {v} (mean over seeds, 95% CI)", name))
    if len(table.variants) > 1:
        files.append(variant_panels(table, out / "variants.png", title=context.title))
        figures.append(("Variants side by side, averaged over workloads", "variants.png"))
    write("report.md", render(table, findings, context, figures=figures, beside=beside))
    write("report.html", study_page(table, findings, context, figures=figures, folder=out))
    return StudyOutputs(table=table, findings=findings, files=tuple(files))
