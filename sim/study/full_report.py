"""The report of ``--study all``: the 17 observations per trace, the paper's load beside the
trace's own, the traces beside each other, and how stable the ranking of the mechanisms is.

Like :mod:`sim.study.report`, it depends only on the results, the seeds and the command, so
equal runs give an equal report; the wall-clock time is stated by the command, not here.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from sim.study.aggregate import ALL, ResultsTable
from sim.study.calibrate import CALIBRATION_METRIC, TABLE_III_HEADER, table_iii
from sim.study.full import SENSITIVITY_LOADS, VARIANT_WORKLOAD, TraceResults
from sim.study.grid import MECHANISM_NAMES
from sim.study.metrics import BY_KEY, PAPER_METRICS
from sim.study.observations import OBSERVATIONS, READINGS, Verdict
from sim.study.report import _cell, _table

RANK_METRIC = "turnaround_all"


@dataclass(frozen=True, slots=True)
class FullContext:
    command: str
    seeds: tuple[int, ...]
    runs: int
    reading: str | None = None


def _word(v: Verdict) -> str:
    return {True: "holds", False: "**does not hold**", None: "cannot judge"}[v.holds]


def _cause(paper: Verdict, own: Verdict, number: int, factor: float) -> str:
    """Why a verdict is what it is, as the runs show it."""
    if paper.holds is None:
        return paper.broken
    if number >= 13:
        cause = "" if paper.holds else f"fails: {paper.broken}"
    elif paper.holds and own.holds is False:
        cause = (f"holds at the paper's load (x{factor:g}); at the trace's own (x1) it does "
                 f"not: {own.broken}")
    elif paper.holds is False and own.holds:
        cause = (f"at the trace's own load (x1) it holds; at the paper's (x{factor:g}) it "
                 f"does not: {paper.broken}")
    elif paper.holds is False:
        cause = f"fails at both loads; at the paper's: {paper.broken}"
    else:
        cause = "holds at both loads" if own.holds else ""
    if paper.noise:
        cause += ("; " if cause else "") + f"within the 95% noise: {paper.noise}"
    return cause


def ranking(table: ResultsTable, *, workload: str = ALL, metric: str = RANK_METRIC,
            variant: str | None = None) -> list[str]:
    """The six mechanisms from best to worst on ``metric``."""
    better = BY_KEY[metric].better
    values = {m: table.mean(m, metric, workload=workload, variant=variant)
              for m in MECHANISM_NAMES}
    known = [m for m in MECHANISM_NAMES if not math.isnan(values[m])]
    return sorted(known, key=lambda m: values[m], reverse=better == "higher")


def kendall_tau(a: Sequence[str], b: Sequence[str]) -> float:
    """Kendall's tau between two orders of the same items: 1 equal, -1 reversed."""
    items = [x for x in a if x in b]
    pa, pb = {x: i for i, x in enumerate(a)}, {x: i for i, x in enumerate(b)}
    pairs = [(x, y) for i, x in enumerate(items) for y in items[i + 1:]]
    if not pairs:
        return math.nan
    agree = sum(1 if (pa[x] - pa[y]) * (pb[x] - pb[y]) > 0 else -1 for x, y in pairs)
    return agree / len(pairs)


def _headline(t: ResultsTable) -> list[str]:
    metrics = [m.key for m in PAPER_METRICS]
    overall = ALL if len(t.workloads) > 1 else t.workloads[0]
    return _table(["Policy", *(BY_KEY[m].label for m in metrics)],
                  [[p, *(_cell(t.cell(p, m, workload=overall), m) for m in metrics)]
                   for p in t.policies])


def _observations(r: TraceResults) -> list[str]:
    factor = r.plan.factor
    rows = []
    for o, paper, own in zip(OBSERVATIONS, r.verdicts.paper, r.verdicts.own, strict=True):
        own_word = "—" if o.number >= 13 else _word(own)
        rows.append([str(o.number), o.claim, paper.ours, _word(paper), own_word,
                     _cause(paper, own, o.number, factor)])
    return _table(["#", "The paper's claim", f"Ours at the paper's load (x{factor:g})",
                   f"Verdict at x{factor:g}", "Verdict at x1", "Cause / note"], rows)


def _sensitivity(r: TraceResults) -> list[str]:
    factor = r.plan.factor
    paper = r.tables["paper"]
    reference = ranking(paper, workload=VARIANT_WORKLOAD)
    out = [f"Ranking of the six mechanisms by {BY_KEY[RANK_METRIC].label.lower()}, best "
           f"first, on {VARIANT_WORKLOAD}; τ is Kendall's tau against the ranking at F "
           f"(1: the same order, -1: reversed).", ""]
    rows = []
    loads = sorted((*SENSITIVITY_LOADS, 1.0))
    for multiple in loads:
        t = paper if multiple == 1.0 else r.tables.get(f"load-{multiple:g}")
        if t is None:
            continue
        order = ranking(t, workload=VARIANT_WORKLOAD)
        rows.append([f"{multiple:g} F = x{factor * multiple:.4g}", " > ".join(order),
                     f"{kendall_tau(reference, order):+.2f}"])
    out += _table(["Load", "Ranking", "τ"], rows)
    out += ["", "As the notice accuracy changes (W1 mostly no notice, W2 accurate, W3 early, "
                "W4 late, W5 an equal mix), at F:", ""]
    rows = []
    overall = ranking(paper)
    for w in paper.workloads:
        order = ranking(paper, workload=w)
        rows.append([w, " > ".join(order), f"{kendall_tau(overall, order):+.2f}"])
    out += _table(["Workload", "Ranking", "τ against all workloads"], rows)
    return out


def _both(results: Sequence[TraceResults]) -> list[str]:
    names = [r.verdicts.trace for r in results]
    rows = []
    for i, o in enumerate(OBSERVATIONS):
        verdicts = [r.verdicts.paper[i].holds for r in results]
        if all(v is True for v in verdicts):
            where = "holds on every trace"
        elif all(v is False for v in verdicts):
            where = "fails on every trace"
        elif any(v is None for v in verdicts):
            where = "cannot judge on some trace"
        else:
            where = "holds on " + ", ".join(n for n, v in zip(names, verdicts, strict=True)
                                            if v) + " only"
        rows.append([str(o.number), o.claim, *(_word(r.verdicts.paper[i]) for r in results),
                     where])
    return _table(["#", "Claim", *(f"{n} (paper's load)" for n in names), "Conclusion"], rows)


def two_loads(r: TraceResults) -> list[str]:
    """The study at the trace's own load and at the paper's, side by side: the factor F and
    the baseline beside Table III, the 17 verdicts at both loads, the headline at each.
    ``--study all`` shows it per trace; ``--calibrate paper`` in its report."""
    cal = r.plan.calibration
    out = ["### The paper's load", "",
           f"F = {cal.factor:g}: baseline EASY reaches {100 * cal.reached:.2f}% against "
           f"the paper's {100 * cal.target:.2f}% (steps tried: "
           + ", ".join(f"x{f:g} → {100 * u:.2f}%" for f, u in cal.steps) + ").", ""]
    out += [*_table(TABLE_III_HEADER, table_iii(cal)), ""]
    out += ["### The 17 observations", "", *_observations(r), ""]
    for name, label in (("paper", f"at the paper's load (x{r.plan.factor:g})"),
                        ("own", "at the trace's own load (x1)")):
        t = r.tables[name]
        where = "averaged over the workloads seed by seed" if len(t.workloads) > 1 else \
            t.workloads[0]
        out += [f"### Headline {label}, {where}", "", *_headline(t), ""]
        extra = ["utilisation_paper", "busy_utilisation", "useful_node_hours",
                 "busy_node_hours", "lost_node_hours", "ondemand_work_share"]
        overall = ALL if len(t.workloads) > 1 else t.workloads[0]
        rows = [[p, *(_cell(t.cell(p, m, workload=overall), m) for m in extra)]
                for p in t.policies]
        out += [*_table(["Policy", *(BY_KEY[m].label for m in extra)], rows), ""]
    return out


def render_full(results: Sequence[TraceResults], context: FullContext) -> str:
    """The whole report as Markdown."""
    seeds = context.seeds
    out = ["# The paper's 17 observations on our traces", "",
           "Fan et al., \"Hybrid Workload Scheduling on HPC Systems\" (IPDPS 2022), judged "
           "claim by claim.", "",
           f"- Command: `{context.command}`",
           f"- Seeds: {', '.join(map(str, seeds))} (each seed draws the hybrid workload "
           f"model: job types, notices, setups, failures; the trace is the same for every "
           f"seed); {context.runs} runs in all",
           f"- Traces: {', '.join(r.verdicts.trace for r in results)}",
           "- **Utilisation** in every finding is the steady-state one: useful node-hours "
           "(work lost to preemption excluded) over the window from the first submit plus a "
           "week (at most a tenth of the span) to the last submit, a window that ends before "
           "the queue drains. The paper's definition as we read it (useful node-hours over "
           "the node-hours from the first submit to the last end) and the busy utilisation "
           "(lost work included) are in the tables below; on a whole trace every policy "
           "does the same useful work, so the paper's reading cannot separate them.",
           "- The paper's load: each trace's inter-arrival gaps are divided by the factor F "
           f"at which baseline EASY reaches the paper's 83.93% ({CALIBRATION_METRIC}, the "
           "paper's reading; W5, seed 0). Observations 1-12 are judged at F and, beside, at "
           "the trace's own load (x1); 13-17 from the variant studies at F on "
           f"{_variant_workloads(results)}.",
           "- Tolerances for the paper's loose words are fixed in `sim/study/observations.py` "
           "and were not tuned: about = within 10 points, slightly = under 5 points, much "
           "more = at least 1.5 times. Every figure is a mean over seeds; \"within the 95% "
           "noise\" marks comparisons whose Student-t intervals overlap.",
           "- The modelling choices that move a verdict, with the verdict under each "
           "alternative, are listed in `docs/model.md` (*Choices that move a verdict*).",
           *_reading_line(context.reading), ""]
    if len(results) > 1:
        out += ["## On every trace", "", *_both(results), ""]
    for r in results:
        out += [f"## {r.verdicts.trace}", "", *two_loads(r)]
        out += ["### Sensitivity of the ranking", "", *_sensitivity(r), ""]
        for name in ("checkpoint", "failures", "malleable-min", "setup"):
            if name not in r.tables:
                continue
            t = r.tables[name]
            on = ALL if len(t.workloads) > 1 else t.workloads[0]
            where = "averaged over " + ", ".join(t.workloads) if on == ALL else on
            out += [f"### Study `{name}` at x{r.plan.factor:g}, {where}", ""]
            metrics = ["turnaround_all", "turnaround_rigid", "utilisation", "instant_start",
                       "preempt_rigid", "preempt_malleable"]
            rows = [[p, v, *(_cell(t.cell(p, m, workload=on, variant=v), m)
                             for m in metrics)] for v in t.variants for p in t.policies]
            out += [*_table(["Policy", "Variant", *(BY_KEY[m].label for m in metrics)], rows),
                    ""]
    return "\n".join(out).rstrip() + "\n"


def _variant_workloads(results: Sequence[TraceResults]) -> str:
    found = [r.tables["checkpoint"].workloads for r in results if "checkpoint" in r.tables]
    return ", ".join(found[0]) + (" (averaged)" if len(found[0]) > 1 else "") if found else \
        VARIANT_WORKLOAD


def _reading_line(reading: str | None) -> list[str]:
    if reading is None:
        return []
    return [f"- **Reading `{reading}`**: {READINGS[reading][0]}, in every preemption ratio "
            f"the verdicts read (an alternative to the default, where only the mechanisms "
            f"preempt)."]


def _write_observations(results: Sequence[TraceResults], out: Path,
                        reading: str | None) -> Path:
    """``observations.json``: every trace's 17 verdicts at the paper's load and its own."""
    data = [{"trace": r.verdicts.trace, "factor": r.plan.factor, "reading": reading,
             "calibration_steps": r.plan.calibration.steps,
             "observations": [{"number": o.number, "claim": o.claim,
                               "paper_load": asdict(p), "own_load": asdict(w)}
                              for o, p, w in zip(OBSERVATIONS, r.verdicts.paper,
                                                 r.verdicts.own, strict=True)]}
            for r in results]
    path = out / "observations.json"
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path


def side_by_side(r: TraceResults, *, reading: str | None = None) -> list[str]:
    """The section ``metaq experiment --calibrate paper`` adds to a study's report."""
    return ["## At the trace's own load and at the paper's, side by side", "",
            f"The same runs at the trace's own load (x1) and at the paper's (x{r.plan.factor:g}"
            f"), with the paper's 17 observations judged on each as far as this study's runs "
            f"go (the rest say what they lack; `--study all` runs everything). Utilisation in "
            f"the verdicts is the steady-state one.", *_reading_line(reading), "",
            *two_loads(r)]


def write_two_loads(r: TraceResults, out: Path, *, reading: str | None = None) -> list[Path]:
    """Beside a study's outputs: ``results_own.csv`` (the table at the trace's own load) and
    ``observations.json``."""
    path = out / "results_own.csv"
    path.write_text(r.tables["own"].to_csv())
    return [path, _write_observations([r], out, reading)]


def write_full(results: Sequence[TraceResults], out: Path, context: FullContext) -> list[Path]:
    """``report.md``, ``observations.json`` and one ``results_<trace>_<part>.csv`` per part."""
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for r in results:
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", r.verdicts.trace)
        for name, table in r.tables.items():
            path = out / f"results_{slug}_{name}.csv"
            path.write_text(table.to_csv())
            files.append(path)
    files.append(_write_observations(results, out, context.reading))
    path = out / "report.md"
    path.write_text(render_full(results, context))
    files.append(path)
    return files
