"""The charts of a report page as inline SVG: lines, horizontal bars and a Gantt.

Every mark a reader may ask about carries its value twice: a ``<title>`` (the browser's own
tooltip) and a ``data-tip`` (the page's tooltip, :mod:`~metaq_py.report.html.assets`).
Charts take plain numbers and labels; the caller decides what the axes mean and how their
ticks read (``x_text``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from metaq_py.report.html.page import esc

__all__ = ["Bar", "GanttBar", "Series", "bars", "gantt", "legend", "lines"]

PALETTE = ("#2f6db3", "#e07b39", "#3a9a5b", "#b5443c", "#7b5ea7", "#8c6d3f", "#d16ba5",
           "#5f6b77", "#b8a21e", "#2aa3b5", "#8fb35a", "#c77c9a")
"""Colours for series, in order."""


@dataclass(frozen=True, slots=True)
class Series:
    """One line: its name, colour and points (x, y), x increasing."""

    name: str
    colour: str
    points: Sequence[tuple[float, float]]


@dataclass(frozen=True, slots=True)
class Bar:
    """One horizontal bar: its label, value, colour and hover text."""

    label: str
    value: float
    colour: str
    tip: str


@dataclass(frozen=True, slots=True)
class GanttBar:
    """A span on row ``row`` from ``start`` to ``end``, drawn in ``colour`` (or as an idle
    gap with ``idle``), with its hover text."""

    row: int
    start: float
    end: float
    colour: str
    tip: str
    idle: bool = False


def _mark(tip: str) -> str:
    return f' data-tip="{esc(tip)}"><title>{esc(tip)}</title>'


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    return [lo + (hi - lo) * i / (n - 1) for i in range(n)]


def legend(items: Sequence[tuple[str, str]]) -> str:
    """A row of (colour, name) swatches."""
    return '<div class="legend">' + "".join(
        f'<i style="background:{esc(c)}"></i>{esc(n)}' for c, n in items) + "</div>"


def lines(series: Sequence[Series], *, x_text: Callable[[float], str],
          y_text: Callable[[float], str], y_label: str, width: int = 900,
          height: int = 260, y_max: float | None = None, tip: Callable[[str, float, float],
                                                                        str] | None = None
          ) -> str:
    """Lines over a shared x axis; each point hovers with its series, x and y."""
    pts = [p for s in series for p in s.points]
    if not pts:
        return '<p class="note">Nothing to draw.</p>'
    x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
    top = y_max if y_max is not None else max(max(p[1] for p in pts), 1e-9)
    left, right, up, down = 64, 48, 12, 34
    w, h = width - left - right, height - up - down

    def x(v: float) -> float:
        return left + (w * (v - x0) / (x1 - x0) if x1 > x0 else w / 2)

    def y(v: float) -> float:
        return up + h - h * min(v, top) / top

    out = [f'<svg class="lines" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img">']
    for v in _ticks(0, top):
        out.append(f'<line class="grid" x1="{left}" x2="{left + w}" y1="{y(v):.1f}" '
                   f'y2="{y(v):.1f}"/><text x="{left - 6}" y="{y(v) + 4:.1f}" '
                   f'text-anchor="end">{esc(y_text(v))}</text>')
    for v in _ticks(x0, x1):
        out.append(f'<text x="{x(v):.1f}" y="{up + h + 16}" text-anchor="middle">'
                   f"{esc(x_text(v))}</text>")
    out.append(f'<line class="axis" x1="{left}" x2="{left + w}" y1="{up + h}" y2="{up + h}"/>'
               f'<text x="12" y="{up + h / 2:.0f}" transform="rotate(-90 12 {up + h / 2:.0f})" '
               f'text-anchor="middle">{esc(y_label)}</text>')
    for s in series:
        path = " ".join(f"{x(a):.1f},{y(b):.1f}" for a, b in s.points)
        out.append(f'<polyline fill="none" stroke="{esc(s.colour)}" stroke-width="1.8" '
                   f'points="{path}"/>')
        for a, b in s.points:
            text = tip(s.name, a, b) if tip else f"{s.name}\n{x_text(a)}: {y_text(b)}"
            out.append(f'<circle cx="{x(a):.1f}" cy="{y(b):.1f}" r="4" fill="{esc(s.colour)}"'
                       f"{_mark(text)}</circle>")
    out.append("</svg>")
    return '<div class="chart">' + "".join(out) + "</div>"


def bars(items: Sequence[Bar], *, value_text: Callable[[float], str], width: int = 900
         ) -> str:
    """Horizontal bars, one per item, longest value full width."""
    if not items:
        return '<p class="note">Nothing to draw.</p>'
    label_w, row = 220, 22
    top = max(max(b.value for b in items), 1e-9)
    w = width - label_w - 80
    height = row * len(items) + 8
    out = [f'<svg class="bars" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img">']
    for i, b in enumerate(items):
        yy = 4 + i * row
        length = max(w * b.value / top, 1.0)
        out.append(f'<text x="{label_w - 8}" y="{yy + 15}" text-anchor="end">'
                   f"{esc(b.label)}</text>"
                   f'<rect x="{label_w}" y="{yy + 3}" width="{length:.1f}" height="{row - 6}" '
                   f'fill="{esc(b.colour)}"{_mark(b.tip)}</rect>'
                   f'<text x="{label_w + length + 6:.1f}" y="{yy + 15}">'
                   f"{esc(value_text(b.value))}</text>")
    out.append("</svg>")
    return '<div class="chart">' + "".join(out) + "</div>"


def gantt(rows: Sequence[str], spans: Sequence[GanttBar], *, start: float, end: float,
          x_text: Callable[[float], str], width: int = 1100) -> str:
    """Rows (hosts) down the side, time across, a rectangle per span; idle gaps hatched."""
    label_w, row, up, down = 90, 16, 6, 26
    w = width - label_w - 48
    height = up + row * len(rows) + down
    span = max(end - start, 1e-9)

    def x(t: float) -> float:
        return label_w + w * (min(max(t, start), end) - start) / span

    out = [f'<svg class="gantt" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img"><defs><pattern id="idle" '
           'width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
           '<rect width="6" height="6" fill="#fbeaea"/><line x1="0" y1="0" x2="0" y2="6" '
           'stroke="#e3a5a5" stroke-width="2"/></pattern></defs>']
    for i, name in enumerate(rows):
        yy = up + i * row
        out.append(f'<rect x="{label_w}" y="{yy + 1}" width="{w}" height="{row - 2}" '
                   f'fill="#f1f3f6"/><text x="{label_w - 6}" y="{yy + 12}" '
                   f'text-anchor="end">{esc(name)}</text>')
    for s in spans:
        yy = up + s.row * row
        x0, x1 = x(s.start), x(s.end)
        fill = "url(#idle)" if s.idle else esc(s.colour)
        out.append(f'<rect x="{x0:.2f}" y="{yy + 2}" width="{max(x1 - x0, 0.6):.2f}" '
                   f'height="{row - 4}" fill="{fill}"{_mark(s.tip)}</rect>')
    base = up + row * len(rows)
    for t in _ticks(start, end):
        out.append(f'<text x="{x(t):.1f}" y="{base + 16}" text-anchor="middle">'
                   f"{esc(x_text(t))}</text>")
    out.append("</svg>")
    return '<div class="chart">' + "".join(out) + "</div>"
