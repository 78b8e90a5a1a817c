"""A study's report as one self-contained page, beside its ``report.md``
(``metaq experiment``).

The page takes the study's values as plain data, so that however a study builds its tables
the page shows what it is given: a few lines saying what was run, tables (sortable), bar
charts (each bar's value and interval on hover) and the study's PNG figures, embedded as
``data:`` URLs so that the file stands alone.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from metaq_py.report.html.page import Cell, Section, esc, page, table
from metaq_py.report.html.svg import PALETTE, Bar, bars

__all__ = ["BarChart", "StudyPage", "Table", "study_html"]


@dataclass(frozen=True, slots=True)
class Table:
    """A captioned table: its columns and rows of cells."""

    caption: str
    columns: Sequence[str]
    rows: Sequence[Sequence[Cell]]


@dataclass(frozen=True, slots=True)
class BarChart:
    """One value per label (say, a metric per policy): (label, value, hover text) triples,
    with ``unit`` after each value."""

    caption: str
    values: Sequence[tuple[str, float, str]]
    unit: str = ""


@dataclass(frozen=True, slots=True)
class StudyPage:
    """What a study's page shows, in order: ``facts`` (lines of text), ``tables``,
    ``charts`` and ``figures`` (caption, PNG file)."""

    title: str
    subtitle: str
    facts: Sequence[str] = ()
    tables: Sequence[Table] = ()
    charts: Sequence[BarChart] = ()
    figures: Sequence[tuple[str, Path]] = field(default_factory=tuple)


def _figure(caption: str, path: Path) -> str:
    try:
        data = base64.b64encode(path.read_bytes()).decode("ascii")
    except OSError as e:
        return f'<p class="note">{esc(caption)}: the figure {esc(path.name)} cannot be read ' \
               f"({esc(e.strerror or e)}).</p>"
    return (f'<figure><img alt="{esc(caption)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{esc(caption)}</figcaption></figure>")


def study_html(study: StudyPage) -> str:
    """The page of ``study``."""
    sections = []
    if study.facts:
        sections.append(Section("study", "The study", "<ul>" + "".join(
            f"<li>{esc(line)}</li>" for line in study.facts) + "</ul>"))
    for i, t in enumerate(study.tables):
        sections.append(Section(f"table{i}", t.caption, table(t.columns, t.rows)))
    if study.charts:
        body = []
        for chart in study.charts:
            unit = chart.unit
            body.append(f"<h3>{esc(chart.caption)}</h3>")
            body.append(bars([Bar(label, value, PALETTE[k % len(PALETTE)], tip)
                              for k, (label, value, tip) in enumerate(chart.values)
                              if value == value],
                             value_text=lambda v, u=unit: f"{v:,.3g}{' ' + u if u else ''}"))
        sections.append(Section("charts", "Charts", "".join(body)))
    if study.figures:
        sections.append(Section("figures", "Figures", "".join(
            _figure(caption, path) for caption, path in study.figures)))
    return page(study.title, study.subtitle, sections)
