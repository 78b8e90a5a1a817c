"""The frame of a report page: its head (style, script, a policy that forbids every request),
a title, a bar of links to its sections, the sections, and sortable tables.

Every piece is a string of HTML; text is escaped here, so callers pass plain values.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

from metaq_py.report.html.assets import CSS, SCRIPT

__all__ = ["CSP", "Section", "Sort", "cards", "page", "table"]

CSP = ("default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
       "img-src data:; font-src 'none'; connect-src 'none'; form-action 'none'; "
       "base-uri 'none'")
"""The page's Content-Security-Policy: inline style and script of its own, pictures only as
``data:`` URLs, and no request of any kind."""


@dataclass(frozen=True, slots=True)
class Sort:
    """A table cell shown as ``text`` and sorted by ``value``."""

    text: str
    value: float


Cell = str | int | float | Sort | None


@dataclass(frozen=True, slots=True)
class Section:
    """One part of a page: its anchor, heading and HTML body."""

    anchor: str
    title: str
    body: str


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _cell(value: Cell) -> tuple[str, str, bool]:
    """(shown text, sort value, numeric) of a cell."""
    if value is None:
        return "–", "", False
    if isinstance(value, Sort):
        sort = "" if math.isnan(value.value) else repr(float(value.value))
        return value.text, sort, True
    if isinstance(value, bool):
        return str(value), "", False
    if isinstance(value, int):
        return f"{value:,}", str(value), True
    if isinstance(value, float):
        if math.isnan(value):
            return "–", "", True
        return f"{value:,.2f}", repr(value), True
    return value, "", False


def table(columns: Sequence[str], rows: Sequence[Sequence[Cell]], *,
          numeric: Sequence[bool] | None = None) -> str:
    """A sortable table: a click on a header sorts by that column (numbers by value).
    ``numeric`` says which columns are right-aligned (default: those whose cells are
    numbers)."""
    cells = [[_cell(v) for v in row] for row in rows]
    if numeric is None:
        numeric = [bool(cells) and all(c[i][2] or c[i][0] == "–" for c in cells)
                   for i in range(len(columns))]
    head = "".join(f'<th class="n">{esc(c)}</th>' if numeric[i] else f"<th>{esc(c)}</th>"
                   for i, c in enumerate(columns))
    body = []
    for row in cells:
        tds = []
        for i, (text, sort, _) in enumerate(row):
            cls = ' class="n"' if numeric[i] else ""
            data = f' data-v="{sort}"' if sort else ""
            tds.append(f"<td{cls}{data}>{esc(text)}</td>")
        body.append("<tr>" + "".join(tds) + "</tr>")
    return (f'<table class="sortable"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table>")


def cards(items: Sequence[tuple[str, str]]) -> str:
    """Headline figures: (value, what it is) pairs."""
    return '<div class="cards">' + "".join(
        f'<div class="card"><b>{esc(v)}</b><span>{esc(label)}</span></div>'
        for v, label in items) + "</div>"


def note(text: str) -> str:
    return f'<p class="note">{esc(text)}</p>'


def page(title: str, subtitle: str, sections: Sequence[Section]) -> str:
    """The whole document."""
    links = "".join(f'<a href="#{esc(s.anchor)}">{esc(s.title)}</a>' for s in sections)
    body = "".join(f'<section id="{esc(s.anchor)}"><h2>{esc(s.title)}</h2>{s.body}</section>'
                   for s in sections)
    return ("<!DOCTYPE html>\n"
            '<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{esc(CSP)}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
            f"<header><h1>{esc(title)}</h1><p>{esc(subtitle)}</p></header>"
            f"<nav>{links}</nav><main>{body}</main>"
            f'<div id="tip"></div><script>{SCRIPT}</script></body></html>\n')
