"""The report of ``--study all``: the 17 observations per trace at the paper's load and at a
saturating one, the traces beside each other, what decided each verdict, and the command that
reruns each row.

Like :mod:`sim.study.report`, it depends only on the results, the seeds and the command, so
equal runs give an equal report; the wall-clock time is stated by the command, not here.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sim.run.spec import BASELINE_RULES, PAPER_RULES
from sim.study.aggregate import ALL, ResultsTable
from sim.study.calibrate import CALIBRATION_METRIC, PAPER_TABLE_III, TABLE_III_HEADER, table_iii
from sim.study.causes import CAUSES
from sim.study.full import VARIANT_WORKLOAD, TraceResults
from sim.study.grid import MECHANISM_NAMES
from sim.study.judging import (
    DEFAULT_READING,
    MUCH,
    READINGS,
    SATURATED,
    SETTLES,
    Verdict,
    Word,
)
from sim.study.metrics import BY_KEY, PAPER_METRICS
from sim.study.observations import OBSERVATIONS
from sim.study.report import _cell, _table

RANK_METRIC = "turnaround_all"

LOAD_NAMES: Mapping[str, str] = {"paper": "the paper's load", "saturated": "a saturating load",
                                 "own": "the trace's own load"}

@dataclass(frozen=True, slots=True)
class FullContext:
    """How the numbers were made: the ``command``, the first ``seeds`` (more where a verdict
    was undecided), the number of ``runs``, the ``reading``, the sentence saying which trace
    each is and why (``traces``), and per trace the command that reruns a row of it, to be
    followed by ``--observation N`` (``rerun``)."""

    command: str
    seeds: tuple[int, ...]
    runs: int
    reading: str | None = None
    traces: Mapping[str, str] = field(default_factory=dict)
    rerun: Mapping[str, str] = field(default_factory=dict)
    max_seeds: int = 10


def _word(v: Verdict) -> str:
    word = str(v.word)
    return f"**{word}**" if v.word is Word.CONTRADICTED else word


def _cell_of(v: Verdict) -> str:
    return f"{_word(v)} ({v.seeds} seeds)" if v.seeds else _word(v)


def cause(v: Verdict, *, max_seeds: int = 10, rerun: str = "") -> str:
    """What made a verdict what it is, from its parts; for one left undecided below
    ``max_seeds``, the command that gives it more (``rerun``). The cause by rule is
    :func:`row_cause`'s, once a row."""
    if v.word is Word.HOLDS:
        return ""
    said = []
    if v.broken:
        said.append(f"contradicted: {v.broken}")
    if v.noise:
        said.append(f"inside the 95% interval at {v.seeds} seeds: {v.noise}")
    if v.word is Word.UNDECIDED and v.seeds < max_seeds:
        more = f"`{rerun} --observation {v.number}`" if rerun else "`--observation`"
        said.append(f"not given more seeds (the study's budget of added runs went to "
                    f"cheaper rows): {more} gives it {max_seeds}")
    if v.unjudged:
        said.append(f"cannot judge: {v.unjudged}")
    return "; ".join(said)


def row_cause(r: TraceResults, index: int, *, max_seeds: int = 10, rerun: str = "") -> str:
    """The cause column of observation ``OBSERVATIONS[index]`` on one trace: each load's
    parts that did not hold (:func:`cause`), then, once, the cause the runs of issue 30 name
    for it (:data:`sim.study.causes.CAUSES`); empty where it holds at every load."""
    parts = [f"at {load_label(r, x)}: {c}" for x in loads_of(r)
             if (c := cause(r.verdicts.at[x][index], max_seeds=max_seeds, rerun=rerun))]
    number = OBSERVATIONS[index].number
    if parts and number in CAUSES:
        parts.append(f"cause (the Theta runs of issue 30): {CAUSES[number]}")
    return "; ".join(parts)


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


def loads_of(r: TraceResults) -> list[str]:
    return [load for load in r.plan.factors if load in r.verdicts.at]


def load_label(r: TraceResults, load: str) -> str:
    return f"x{r.plan.factors[load]:g}"


def outcome(results: Sequence[TraceResults]) -> list[str]:
    """The 17 rows x traces x loads: each cell a verdict and its seeds."""
    header = ["#", "The paper's claim"]
    for r in results:
        header += [f"{r.verdicts.trace}, {LOAD_NAMES.get(load, load)} "
                   f"({load_label(r, load)})" for load in loads_of(r)]
    rows = []
    for i, o in enumerate(OBSERVATIONS):
        row = [str(o.number), o.claim]
        for r in results:
            row += [_cell_of(r.verdicts.at[load][i]) for load in loads_of(r)]
        rows.append(row)
    return _table(header, rows)


def _observations(r: TraceResults, rerun: str, max_seeds: int) -> list[str]:
    loads = loads_of(r)
    header = ["#", *(f"Verdict at {load_label(r, x)}" for x in loads),
              *(f"Ours at {load_label(r, x)}" for x in loads), "Cause / note"]
    rows = []
    for i, o in enumerate(OBSERVATIONS):
        verdicts = [r.verdicts.at[x][i] for x in loads]
        rows.append([str(o.number), *(_cell_of(v) for v in verdicts),
                     *(v.ours for v in verdicts),
                     row_cause(r, i, max_seeds=max_seeds, rerun=rerun)])
    out = _table(header, rows)
    if rerun:
        out += ["", "To rerun one row (its runs at both loads, stored runs reused; add "
                    "`--fresh` to run them again):", "", "```"]
        out += [f"{rerun} --observation {o.number}" for o in OBSERVATIONS]
        out += ["```"]
    return out


def _baseline(r: TraceResults) -> list[str]:
    cal = r.plan.calibration
    out = [f"F = {cal.factor:g}: the baseline reaches {100 * cal.reached:.2f}% against the "
           f"paper's {100 * cal.target:.2f}% (steps tried: "
           + ", ".join(f"x{f:g} → {100 * u:.2f}%" for f, u in cal.steps) + ").", ""]
    out += [*_table(TABLE_III_HEADER, table_iii(cal)), ""]
    ta = cal.calibrated.get("turnaround_all")
    inst = cal.calibrated.get("instant_start")
    if ta is not None and inst is not None:
        out += [f"Gap to Table III at F: turnaround {ta - PAPER_TABLE_III['turnaround_all']:+.1f}"
                f" h ({100 * (ta / PAPER_TABLE_III['turnaround_all'] - 1):+.0f}%), "
                f"instant start {100 * (inst - PAPER_TABLE_III['instant_start']):+.1f} points "
                f"(the paper's 2019 trace is not ours; utilisation is matched by "
                f"construction).", ""]
    return out


def loads_line(r: TraceResults) -> list[str]:
    """Each load's factor and offered load, and whether the trace is too small for it or
    does not saturate the machine there (also said in the console)."""
    parts = []
    for load in loads_of(r):
        t = r.tables.get(load)
        offered = math.nan if t is None else t.mean("easy", "offered_load")
        if math.isnan(offered) and t is not None:
            offered = t.mean(t.policies[0], "offered_load")
        where = "n/a" if math.isnan(offered) else f"{offered:.2f}"
        parts.append(f"{LOAD_NAMES.get(load, load)} {load_label(r, load)} (offered load "
                     f"{where})")
        window = math.nan if t is None else t.mean(t.policies[0], "window_runtimes")
        if not math.isnan(window) and window < SETTLES:
            parts[-1] += (f": this trace is too small for this load (its steady-state window "
                          f"lasts {window:.1f} mean runtimes, under {SETTLES:g}), so its "
                          f"utilisation claims are not judged there; the others are")
        elif not math.isnan(offered) and load == "saturated" and offered < SATURATED:
            parts[-1] += (": this trace does not saturate the machine even there, so its "
                          "utilisation claims cannot be judged")
    return ["Loads: " + "; ".join(parts) + ".", ""]


def _sensitivity(r: TraceResults) -> list[str]:
    loads = [x for x in loads_of(r) if x in r.tables]
    if not loads:
        return []
    reference = ranking(r.tables[loads[0]], workload=VARIANT_WORKLOAD)
    out = [f"Ranking of the six mechanisms by {BY_KEY[RANK_METRIC].label.lower()}, best "
           f"first, on {VARIANT_WORKLOAD}; τ is Kendall's tau against the first row.", ""]
    rows = []
    for load in loads:
        order = ranking(r.tables[load], workload=VARIANT_WORKLOAD)
        rows.append([load_label(r, load), " > ".join(order),
                     f"{kendall_tau(reference, order):+.2f}"])
    return out + _table(["Load", "Ranking", "τ"], rows)


def _variants(r: TraceResults) -> list[str]:
    out: list[str] = []
    for name, t in r.tables.items():
        if "@" not in name:
            continue
        study, load = name.split("@")
        out += [f"### Study `{study}` at {load_label(r, load)}, {VARIANT_WORKLOAD}", ""]
        metrics = ["turnaround_all", "turnaround_rigid", "utilisation", "instant_start",
                   "preempt_rigid", "preempt_malleable"]
        on = t.workloads[0]
        rows = [[p, v, *(_cell(t.cell(p, m, workload=on, variant=v), m) for m in metrics)]
                for v in t.variants for p in t.policies]
        out += [*_table(["Policy", "Variant", *(BY_KEY[m].label for m in metrics)], rows), ""]
    return out


def trace_section(r: TraceResults, *, rerun: str = "", max_seeds: int = 10) -> list[str]:
    """One trace: its loads, the baseline beside Table III, the 17 verdicts with their
    causes and rerun commands, observation 14 under the other reading, the headlines."""
    out = [*loads_line(r), "### The baseline beside the paper's Table III (R14)", "",
           *_baseline(r), "### The 17 observations", "",
           *_observations(r, rerun, max_seeds), ""]
    plain = r.verdicts.mechanisms_only
    if plain:
        out += ["Observation 14 read with only the mechanisms' preemptions counted (R19's "
                "other reading): " + "; ".join(
                    f"{load_label(r, x)} {_cell_of(v)} ({v.ours})"
                    for x, v in plain.items() if x in r.plan.factors) + ".", ""]
    for load in loads_of(r):
        t = r.tables.get(load)
        if t is None:
            continue
        where = "averaged over the workloads run by run" if len(t.workloads) > 1 else \
            t.workloads[0]
        out += [f"### Headline at {LOAD_NAMES.get(load, load)} ({load_label(r, load)}), "
                f"{where}", "", *_headline(t), ""]
        extra = ["utilisation_paper", "busy_utilisation", "offered_load", "lost_node_hours",
                 "ondemand_work_share"]
        overall = ALL if len(t.workloads) > 1 else t.workloads[0]
        rows = [[p, *(_cell(t.cell(p, m, workload=overall), m) for m in extra)]
                for p in t.policies]
        out += [*_table(["Policy", *(BY_KEY[m].label for m in extra)], rows), ""]
    out += ["### Sensitivity of the ranking", "", *_sensitivity(r), "", *_variants(r)]
    return out


def _rules_lines() -> list[str]:
    rules = ", ".join(f"`{k}={v}`" for k, v in (*PAPER_RULES, *BASELINE_RULES))
    return [f"- **The paper's rules** (`paper-rules.md`, R1-R20; `docs/model.md`, \"Rules of "
            f"the paper\"): every run follows them where our model had chosen otherwise: "
            f"{rules} (the last two for the baseline only), and R12 (the victims of an "
            f"on-demand job resume on its nodes when it ends). `--set KEY=WORD` with the "
            f"other word of a key brings back the choice before it."]


def render_full(results: Sequence[TraceResults], context: FullContext) -> str:
    """The whole report as Markdown."""
    reading = context.reading or DEFAULT_READING
    out = ["# The paper's 17 observations on our traces", "",
           "Fan et al., \"Hybrid Workload Scheduling on HPC Systems\" (IPDPS 2022), judged "
           "claim by claim.", "",
           f"- Command: `{context.command}`",
           *(f"- Trace {name}: {why}" for name, why in context.traces.items()),
           f"- Seeds: {', '.join(map(str, context.seeds))} for every run; an observation "
           f"undecided at a load gets more seeds, up to {context.max_seeds} (the paper "
           f"averages ten traces, R18), for the runs its undecided parts read, the cheapest "
           f"rows first within the study's budget of added runs; each verdict says how many "
           f"seeds it rests on. Each seed draws the hybrid workload model (job types, "
           f"notices, setups, failures); the trace is the same. {context.runs} runs in all.",
           "- **Verdicts**: *holds* (every part shows, outside the noise); *contradicted* "
           "(a part shows the opposite, outside the noise); *undecided* (a difference inside "
           "its 95% interval); *cannot judge* (the quantity cannot move at this load, or a "
           "figure is missing). Every comparison pairs runs of the same workload and seed; "
           "the interval is Student's t over those pairs.",
           *_rules_lines(),
           "- **Loads**: each trace's inter-arrival gaps are divided by the factor F at which "
           f"the baseline reaches the paper's 83.93% ({CALIBRATION_METRIC}: useful node-hours "
           "from the first submit to the last end; W5, seed 0), and by a saturating factor "
           "S (at least 1.2 F, and enough for the work offered in the steady-state window to "
           "reach 1.1 of the machine).",
           "- **Utilisation** in the verdicts is the steady-state one: useful node-hours "
           "(work lost to preemption and charged checkpoint time excluded) over the window "
           "from the first submit plus a week (at most a tenth of the span) to the last "
           f"submit. Where the work offered in it is below {SATURATED:g} of the machine, every "
           "policy does the work as it comes and a utilisation claim cannot be judged.",
           f"- **Preempted** means: {READINGS[reading][0]} (reading `{reading}`).",
           f"- Tolerances for the paper's loose words are fixed in `sim/study/judging.py` "
           f"and were not tuned: about = within 10 points, slightly = under 5 points, much "
           f"more = at least {MUCH:g} times.", ""]
    out += ["## The outcome", "", *outcome(results), ""]
    for r in results:
        out += [f"## {r.verdicts.trace}", "",
                *trace_section(r, rerun=context.rerun.get(r.verdicts.trace, ""),
                               max_seeds=context.max_seeds)]
    return "\n".join(out).rstrip() + "\n"


def _write_observations(results: Sequence[TraceResults], out: Path,
                        reading: str | None, traces: Mapping[str, str] | None = None) -> Path:
    """``observations.json``: every trace's 17 verdicts at each load, with the sentence
    saying which file it is and why it was used (``traces``)."""
    data = [{"trace": r.verdicts.trace, "why": (traces or {}).get(r.verdicts.trace),
             "factors": dict(r.plan.factors),
             "reading": reading or DEFAULT_READING,
             "calibration_steps": r.plan.calibration.steps,
             "observations": [{"number": o.number, "claim": o.claim,
                               **{load: {**asdict(r.verdicts.at[load][i]),
                                         "word": str(r.verdicts.at[load][i].word),
                                         "undecided": sorted(
                                             r.verdicts.at[load][i].undecided)}
                                  for load in loads_of(r)}}
                              for i, o in enumerate(OBSERVATIONS)]}
            for r in results]
    path = out / "observations.json"
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path


def side_by_side(r: TraceResults, *, reading: str | None = None) -> list[str]:
    """The section ``metaq experiment --calibrate paper`` adds to a study's report."""
    return ["## At the trace's own load and at the paper's, side by side", "",
            f"The same runs at the paper's load ({load_label(r, 'paper')}) and at the "
            f"trace's own (x1), with the paper's 17 observations judged on each as far as "
            f"this study's runs go (the rest say what they lack; `--study all` runs "
            f"everything). Preempted means: {READINGS[reading or DEFAULT_READING][0]} "
            f"(reading `{reading or DEFAULT_READING}`).", "",
            *trace_section(r)]


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
            path = out / f"results_{slug}_{name.replace('@', '_at_')}.csv"
            path.write_text(table.to_csv())
            files.append(path)
    files.append(_write_observations(results, out, context.reading, context.traces))
    path = out / "report.md"
    path.write_text(render_full(results, context))
    files.append(path)
    return files
