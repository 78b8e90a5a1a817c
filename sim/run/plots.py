"""Pictures of one run, readable without the numbers: utilisation and queue length over time,
and how long jobs waited.

Figures are drawn with matplotlib's object API on the Agg canvas (no pyplot, no display, no
global state), so plotting is safe in worker processes and on headless machines. Time axes
are in days since the first submit; the window the figures cover is written on each.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from metaq_py.policy.model import Kind
from sim.run.metrics import Summary
from sim.run.result import Series, SimulationResult

DAY = 86400.0
HOUR = 3600.0
_WAIT_TICKS = ((1 / 60, "1 min"), (10 / 60, "10 min"), (1.0, "1 h"), (6.0, "6 h"),
               (24.0, "1 day"), (168.0, "1 week"), (720.0, "30 days"))
"""Wait-axis ticks: (hours, label)."""
_KIND_COLOURS = {Kind.RIGID: "tab:blue", Kind.MALLEABLE: "tab:green", Kind.ONDEMAND: "tab:red"}


def binned_mean(series_time: np.ndarray, values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """The time-weighted mean of a step function over each bin ``[edges[i], edges[i+1])``.

    ``values[i]`` holds from ``series_time[i]`` to ``series_time[i + 1]`` (the last value until
    the last edge). The integral of a step function is piecewise linear, so interpolating the
    running integral at the edges is exact.
    """
    t = np.append(series_time, max(edges[-1], series_time[-1]))
    area = np.concatenate(([0.0], np.cumsum(values * np.diff(t))))
    at_edges = np.interp(edges, t, area)
    return np.diff(at_edges) / np.diff(edges)


def _bins(series: Series) -> tuple[np.ndarray, float]:
    """Bin edges (about 200 bins of a round width) and that width in seconds."""
    t0, t1 = float(series.time[0]), float(series.time[-1])
    span = max(t1 - t0, 1.0)
    width = next((w for w in (HOUR, 6 * HOUR, DAY, 7 * DAY) if span / w <= 400), 30 * DAY)
    if span / width < 20:
        width = span / 50
    return np.arange(t0, t1 + width, width), width


def _width_label(width: float) -> str:
    for w, name in ((HOUR, "hourly"), (6 * HOUR, "6-hour"), (DAY, "daily"), (7 * DAY, "weekly"),
                    (30 * DAY, "30-day")):
        if width == w:
            return name
    return f"{width / 60:.0f}-minute"


def _window_note(summary: Summary) -> str:
    u = summary.utilisation
    return f"window: {(u.end - u.start) / DAY:.1f} days from first submit to last end"


def _new_figure() -> tuple[Figure, object]:
    fig = Figure(figsize=(10, 4.8), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def utilisation_figure(result: SimulationResult, *, trace: str, summary: Summary) -> Figure:
    """Busy nodes (and, with notices, nodes held idle for them) as a share of the machine."""
    s = result.series
    fig, ax = _new_figure()
    edges, width = _bins(s)
    t0 = float(s.time[0])
    days = (edges[:-1] - t0) / DAY
    busy = binned_mean(s.time, s.busy.astype(float), edges) / result.nodes * 100
    ax.fill_between(days, busy, step="post", color="tab:blue", alpha=0.35, linewidth=0)
    ax.step(days, busy, where="post", color="tab:blue",
            label=f"running jobs ({_width_label(width)} mean)")
    if s.reserved.any():
        held = binned_mean(s.time, s.reserved.astype(float), edges) / result.nodes * 100
        ax.fill_between(days, busy, busy + held, step="post", color="tab:orange", alpha=0.6,
                        linewidth=0, label="idle, reserved for advance notices")
    u = summary.utilisation.value
    if u is not None:
        ax.axhline(u * 100, color="black", linestyle="--", linewidth=1,
                   label=f"useful work over the window: {u:.1%}")
    ax.set_ylim(0, 105)
    ax.set_xlim(days[0], days[-1] + width / DAY)
    ax.set_xlabel("time since first submit (days)")
    ax.set_ylabel(f"nodes busy (% of {result.nodes:,})")
    ax.set_title(f"Node utilisation: {_policy_label(result)} on {trace}\n{_window_note(summary)}",
                 fontsize=11)
    ax.legend(loc="lower right", fontsize=9)
    ax.grid(alpha=0.3)
    return fig


def queue_figure(result: SimulationResult, *, trace: str, summary: Summary) -> Figure:
    """Jobs waiting in the queue over time."""
    s = result.series
    fig, ax = _new_figure()
    edges, width = _bins(s)
    t0 = float(s.time[0])
    ax.step((s.time - t0) / DAY, s.queued, where="post", color="tab:purple", alpha=0.3,
            linewidth=0.6, label="at each event")
    mean = binned_mean(s.time, s.queued.astype(float), edges)
    ax.step((edges[:-1] - t0) / DAY, mean, where="post", color="tab:purple", linewidth=1.6,
            label=f"{_width_label(width)} mean")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("time since first submit (days)")
    ax.set_ylabel("jobs waiting")
    ax.set_title(f"Queue length: {_policy_label(result)} on {trace}\n{_window_note(summary)}",
                 fontsize=11)
    ax.legend(loc="upper right", fontsize=9)
    ax.grid(alpha=0.3)
    return fig


def wait_figure(result: SimulationResult, *, trace: str, summary: Summary) -> Figure:
    """The share of jobs that started within a given wait (per kind for hybrid runs)."""
    fig, ax = _new_figure()
    groups: list[tuple[str, str, np.ndarray]] = []
    kinds = (Kind.RIGID, Kind.MALLEABLE, Kind.ONDEMAND) if result.hybrid else (None,)
    for kind in kinds:
        waits = np.array([o.wait for o in result.outcomes
                          if o.wait is not None and (kind is None or o.kind is kind)])
        if len(waits):
            name = "all jobs" if kind is None else str(kind)
            colour = "tab:blue" if kind is None else _KIND_COLOURS[kind]
            groups.append((name, colour, np.sort(waits) / HOUR))
    floor = 1 / 60  # one minute: waits below it are drawn at the left edge of the log axis
    top = max((g[2][-1] for g in groups), default=1.0)
    for name, colour, waits in groups:
        share = np.arange(1, len(waits) + 1) / len(waits) * 100
        ax.step(np.maximum(waits, floor), share, where="post", color=colour,
                label=f"{name}: n={len(waits):,}, mean {waits.mean():.2f} h, "
                      f"median {np.median(waits):.2f} h, "
                      f"{np.mean(waits <= floor):.0%} within a minute")
    ax.set_xscale("log")
    ax.set_xlim(floor, max(top * 1.2, 1.0))
    ticks = [t for t in _WAIT_TICKS if t[0] <= max(top * 1.2, 1.0)]
    ax.set_xticks([t for t, _ in ticks], [name for _, name in ticks])
    ax.minorticks_off()
    ax.set_ylim(0, 100)
    ax.set_xlabel("wait from submit to first start (log scale; waits under 1 min drawn at 1 min)")
    ax.set_ylabel("jobs started within that wait (%)")
    ax.set_title(f"Distribution of waits: {_policy_label(result)} on {trace}\n"
                 f"{_window_note(summary)}", fontsize=11)
    ax.legend(loc="lower right", fontsize=9)
    ax.grid(alpha=0.3)
    return fig


def write_plots(result: SimulationResult, out: Path, *, trace: str,
                summary: Summary | None = None) -> list[Path]:
    """Write ``utilisation.png``, ``queue.png`` and ``waits.png`` into ``out``."""
    summary = summary if summary is not None else result.summary()
    if not len(result.series):
        return []
    written = []
    for name, draw in (("utilisation.png", utilisation_figure), ("queue.png", queue_figure),
                       ("waits.png", wait_figure)):
        path = out / name
        draw(result, trace=trace, summary=summary).savefig(path)
        written.append(path)
    return written


def _policy_label(result: SimulationResult) -> str:
    if result.cqsim_oracle:
        return f"{result.policy} (CQSim oracle)"
    return f"{result.policy} (oracle)" if result.oracle else result.policy
