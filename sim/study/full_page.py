"""The HTML page of ``--study all`` (``report.html``, beside ``report.md``): the 17
observations per trace and load as one sortable table, each trace's verdicts with their
figures, causes and the command that reruns each row, the baseline beside the paper's
Table III, and a chart of how many observations got each verdict at each load.

It takes the same values as :mod:`sim.study.full_report` and draws them through
:func:`metaq_py.report.html.study.study_html`, so the page stands alone (no network) and says
nothing the Markdown does not.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from metaq_py.report.html.study import BarChart, StudyPage, Table, study_html
from sim.study.calibrate import TABLE_III_HEADER, table_iii
from sim.study.full import TraceResults
from sim.study.full_report import LOAD_NAMES, FullContext, load_label, loads_of, row_cause
from sim.study.judging import Verdict, Word
from sim.study.observations import OBSERVATIONS

__all__ = ["full_page", "write_full_page"]

WORDS = (Word.HOLDS, Word.CONTRADICTED, Word.UNDECIDED, Word.CANNOT)
"""The four verdicts, in the order the chart shows them."""


def _cell(v: Verdict) -> str:
    return f"{v.word} ({v.seeds} seeds)" if v.seeds else str(v.word)


def _column(r: TraceResults, load: str) -> str:
    return f"{r.verdicts.trace}, {LOAD_NAMES.get(load, load)} ({load_label(r, load)})"


def _trace_table(r: TraceResults, rerun: str, max_seeds: int) -> Table:
    loads = loads_of(r)
    rows = []
    for i, o in enumerate(OBSERVATIONS):
        verdicts = [r.verdicts.at[x][i] for x in loads]
        rows.append([o.number, *(_cell(v) for v in verdicts), *(v.ours for v in verdicts),
                     row_cause(r, i, max_seeds=max_seeds, rerun=rerun).replace("`", ""),
                     f"{rerun} --observation {o.number}" if rerun else ""])
    return Table(f"{r.verdicts.trace}: each observation, its figures and its cause",
                 ["#", *(f"verdict at {load_label(r, x)}" for x in loads),
                  *(f"ours at {load_label(r, x)}" for x in loads), "cause / note",
                  "rerun this row"], rows)


def full_page(results: Sequence[TraceResults], context: FullContext) -> str:
    """The page of a ``--study all`` run."""
    facts = [f"Command: {context.command}",
             *(f"Trace {name}: {why}" for name, why in context.traces.items()),
             f"Seeds: {', '.join(map(str, context.seeds))} for every run, more (up to "
             f"{context.max_seeds}) where a verdict was undecided; {context.runs} runs in all.",
             "Verdicts: holds (every part shows, outside the noise); contradicted (a part "
             "shows the opposite, outside the noise); undecided (a difference inside its 95% "
             "interval); cannot judge (the quantity cannot move at this load, or a figure is "
             "missing). report.md beside this page says how each is judged."]
    columns = [(r, load) for r in results for load in loads_of(r)]
    outcome = Table("The outcome: 17 observations, each trace at each load",
                    ["#", "the paper's claim", *(_column(r, x) for r, x in columns)],
                    [[o.number, o.claim, *(_cell(r.verdicts.at[x][i]) for r, x in columns)]
                     for i, o in enumerate(OBSERVATIONS)])
    tables = [outcome]
    for r in results:
        tables.append(_trace_table(r, context.rerun.get(r.verdicts.trace, ""),
                                   context.max_seeds))
        tables.append(Table(f"{r.verdicts.trace}: the baseline beside the paper's Table III",
                            TABLE_III_HEADER, table_iii(r.plan.calibration)))
    charts = []
    for r, load in columns:
        counts = Counter(v.word for v in r.verdicts.at[load])
        charts.append(BarChart(f"Verdicts, {_column(r, load)}",
                               [(str(w), counts[w], f"{w!s}: {counts[w]} of 17")
                                for w in WORDS], "of 17"))
    return study_html(StudyPage(title="The paper's 17 observations on our traces",
                                subtitle="metaq experiment --study all", facts=facts,
                                tables=tables, charts=charts))


def write_full_page(results: Sequence[TraceResults], out: Path, context: FullContext) -> Path:
    """``report.html`` in ``out``."""
    path = out / "report.html"
    path.write_text(full_page(results, context))
    return path
