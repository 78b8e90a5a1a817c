"""A Gantt chart of one allocation (``metaq gantt JOBID``): hosts down the side, time across,
one coloured bar per task on each host it held, drawn from a
:class:`~metaq_py.report.timeline.Timeline`.

What a reader sees at a glance: bars coloured by kind (rigid, malleable, on-demand) and
labelled with the task when there is room; idle time as the pale row background between bars;
hosts held for a notice hatched; a red cross where a task was preempted, a triangle where one
was shrunk or expanded; a red dashed line at the end of the allocation and a grey dotted one
where the runner stopped (or, while it runs, at its last event). Failed runs have a red edge.
A task holding a share of a node (some of its cores) takes that part of the host's row, in
its cores' place, so shares running side by side on a node are drawn side by side.

By default the chart shows the span of the tasks, so an hour of work in a day's allocation is
not a sliver; a note at the top right says when the allocation ends past it. ``full=True``
(``metaq gantt --full``) shows the whole allocation.
"""

from __future__ import annotations

import os
from pathlib import Path

# A bare Figure (no pyplot) renders with Agg, needs no display and leaves no global state.
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from metaq_py.durations import format_duration
from metaq_py.report.timeline import Timeline

__all__ = ["IDLE", "KIND_COLOURS", "draw_gantt", "gantt_figure", "view"]

KIND_COLOURS = {"rigid": "#4c72b0", "malleable": "#55a868", "ondemand": "#dd8452"}
OTHER = "#8c8c8c"
IDLE = "#f2f2f2"
HOLD = "#f6e27f"
_ROW = 0.8  # bar height as a share of one host's row


def view(tl: Timeline, *, full: bool = False) -> tuple[float, float]:
    """The times the chart shows, from and to: the span of the tasks (and holds) with a
    margin of 2% each side, cut to the allocation; ``full``, or a timeline without any task,
    shows from the runner's start to the later of its stop and the allocation's end."""
    whole = (tl.start, max(tl.stop, tl.end or tl.stop))
    spans = [(b.start, b.end) for b in tl.bars] + [(h.start, h.end) for h in tl.holds]
    if full or not spans:
        return whole
    lo, hi = min(s for s, _ in spans), max(e for _, e in spans)
    pad = 0.02 * max(hi - lo, 1.0)
    return max(whole[0], lo - pad), min(whole[1], hi + pad)


def gantt_figure(tl: Timeline, *, full: bool = False) -> Figure:
    """The chart of ``tl`` as a matplotlib figure (x in the unit shown on its axis, counted
    from the runner's start), zoomed to the tasks' span unless ``full`` (see :func:`view`).
    When the allocation ends past the view, a note at the top right says how much later."""
    lo, hi = view(tl, full=full)
    scale, unit = (3600.0, "hours") if hi - lo > 3 * 3600 else (60.0, "minutes")

    def x(t: float) -> float:
        return (t - tl.start) / scale

    n = max(len(tl.hosts), 1)
    fig = Figure(figsize=(11, 1.6 + min(0.32 * n, 14)), dpi=100)
    ax = fig.add_subplot()
    row = {h: n - 1 - i for i, h in enumerate(tl.hosts)}  # first host on top
    left, right = x(lo), x(hi)
    width = max(right - left, 1e-9)
    for y in row.values():
        ax.broken_barh([(0, x(tl.stop))], (y - _ROW / 2, _ROW), facecolors=IDLE, zorder=0)
    for hold in tl.holds:
        if hold.host in row:
            ax.broken_barh([(x(hold.start), x(hold.end) - x(hold.start))],
                           (row[hold.host] - _ROW / 2, _ROW), facecolors=HOLD, hatch="//",
                           edgecolors="#b59b00", linewidth=0.5, zorder=1)
    labelled: set[tuple[str, float]] = set()
    for b in tl.bars:
        if b.host not in row:
            continue
        colour = KIND_COLOURS.get(b.kind or "", OTHER)
        ending = OUTCOME_STYLES.get(b.outcome or "")
        edge, hatch = ending if ending else ("white", None)
        parts = tl.parts(b)
        for low, height in parts:
            ax.broken_barh([(x(b.start), x(b.end) - x(b.start))],
                           (row[b.host] - _ROW / 2 + low * _ROW, height * _ROW),
                           facecolors=colour, edgecolors=edge, hatch=hatch,
                           linewidth=1.6 if ending else 0.8, zorder=2)
        low, height = max(parts, key=lambda p: p[1])
        if (x(b.end) - x(b.start)) > width * 0.07 and height >= 0.5 and \
                (b.task, b.start) not in labelled:
            labelled.add((b.task, b.start))
            ax.text(max(x(b.start), left) + width * 0.012,
                    row[b.host] - _ROW / 2 + (low + height / 2) * _ROW, _short(b.task),
                    va="center", ha="left", fontsize=7, color="white", clip_on=True, zorder=3)
    for m in tl.marks:
        if m.host in row:
            style = {"preempt": ("x", "#c0392b"), "shrink": ("v", "#6a3d9a"),
                     "expand": ("^", "#6a3d9a")}.get(m.what, ("o", "black"))
            ax.plot([x(m.time)], [row[m.host]], marker=style[0], color=style[1], markersize=8,
                    markeredgewidth=2, linestyle="none", zorder=4)
    if tl.end is not None:
        ax.axvline(x(tl.end), color="#c0392b", linestyle="--", linewidth=1.5, zorder=5)
        if tl.end > hi:
            later = format_duration(round(tl.end - hi))
            ax.text(0.995, 1.005, f"allocation ends {later} later \u2192", transform=ax.transAxes,
                    ha="right", va="bottom", fontsize=8, color="#c0392b")
    ax.axvline(x(tl.stop), color="#555555", linestyle=":", linewidth=1.2, zorder=5)
    ax.set_yticks(list(row.values()), list(row))
    ax.set_ylim(-0.6, n - 0.4)
    if full or not (tl.bars or tl.holds):
        ax.set_xlim(0, right * 1.02 if right > 0 else 1)  # room for the end line at the edge
    else:
        ax.set_xlim(left, right)
    ax.set_xlabel(f"{unit} since the runner started")
    ax.set_ylabel("host")
    title = f"job {tl.jobid}"
    if tl.machine:
        title += f" on {tl.machine}"
    title += f": {len(tl.hosts)} nodes"
    if tl.mechanism:
        title += f", {tl.mechanism}"
    idle_share = tl.idle_seconds() / ((tl.stop - tl.start) * n) if tl.stop > tl.start else 0.0
    ax.set_title(f"{title} (idle {idle_share:.0%} of node time)")
    ax.grid(axis="x", color="#dddddd", linewidth=0.6, zorder=-1)
    ax.legend(handles=_legend(tl), loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8,
              frameon=False)
    fig.tight_layout()
    return fig


def draw_gantt(tl: Timeline, out: str | os.PathLike[str], *, full: bool = False) -> Path:
    """Write the chart of ``tl`` (``full``: the whole allocation) as a PNG to ``out`` and
    return the path."""
    gantt_figure(tl, full=full).savefig(out, format="png")
    return Path(out)


OUTCOME_STYLES = {"failed": ("#c0392b", None), "retry": ("#c0392b", None),
                  "cancelled": ("#222222", "xx")}
"""How a bar shows a run that did not finish well: its edge colour and hatching (failed,
retried after a failure, cancelled)."""

_OUTCOME_LABELS = {"failed": "failed (red edge)", "cancelled": "cancelled (hatched)"}


def _legend(tl: Timeline) -> list:
    kinds = sorted({b.kind for b in tl.bars if b.kind in KIND_COLOURS})
    items: list = [Patch(facecolor=KIND_COLOURS[k], label=k) for k in kinds]
    outcomes = {"failed" if b.outcome == "retry" else b.outcome for b in tl.bars}
    for outcome, label in _OUTCOME_LABELS.items():
        if outcome in outcomes:
            edge, hatch = OUTCOME_STYLES[outcome]
            items.append(Patch(facecolor="white", edgecolor=edge, hatch=hatch,
                               linewidth=1.6, label=label))
    items.append(Patch(facecolor=IDLE, edgecolor="#cccccc", label="idle"))
    if tl.holds:
        items.append(Patch(facecolor=HOLD, hatch="//", edgecolor="#b59b00",
                           label="held for a notice"))
    whats = {m.what for m in tl.marks}
    if "preempt" in whats:
        items.append(Line2D([], [], marker="x", color="#c0392b", linestyle="none",
                            markeredgewidth=2, label="preempted"))
    if whats & {"shrink", "expand"}:
        items.append(Line2D([], [], marker="v", color="#6a3d9a", linestyle="none",
                            label="shrunk / expanded"))
    if tl.end is not None:
        items.append(Line2D([], [], color="#c0392b", linestyle="--", label="allocation end"))
    items.append(Line2D([], [], color="#555555", linestyle=":",
                        label="runner stopped" if tl.stopped else "last event"))
    return items


def _short(task: str) -> str:
    """A task's label: its path without the task folder, cut to fit a bar."""
    name = task.split("/", 1)[1] if "/" in task else task
    return name if len(name) <= 24 else "…" + name[-23:]
