"""Figures of a study, in the style of Fan et al.'s Fig. 6.

:func:`metric_panels`: one panel per metric; in each, the workloads W1..W5 are groups along
the x axis and the policies are bars side by side within a group, each with an error bar of
the 95% confidence interval over seeds (the min-max range when there is a single seed is not
drawn: one seed has no spread). One figure per variant.

:func:`variant_panels`: for sweeps, one panel per metric with the policies along the x axis
and one bar per variant, on the seed-wise average over workloads; this is how Fig. 7 (the
checkpoint sweep) reads.

Matplotlib runs headless (Agg) and every figure is closed after saving, so a long study does
not accumulate figures in memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from sim.study.aggregate import ALL, Cell, ResultsTable
from sim.study.metrics import BY_KEY, PAPER_METRICS

_COLUMNS = 4


def _scale(metric: str) -> float:
    return 100.0 if BY_KEY[metric].unit == "ratio" else 1.0


def _label(metric: str) -> str:
    m = BY_KEY[metric]
    return f"{m.label} (%)" if m.unit == "ratio" else m.label


def _grid(count: int, title: str) -> tuple[plt.Figure, list[plt.Axes]]:
    rows = math.ceil(count / _COLUMNS)
    fig, axes = plt.subplots(rows, _COLUMNS, figsize=(4.6 * _COLUMNS, 3.4 * rows),
                             squeeze=False)
    flat = list(axes.ravel())
    for ax in flat[count:]:
        ax.set_visible(False)
    fig.suptitle(title)
    return fig, flat[:count]


def _bars(ax: plt.Axes, groups: Sequence[str], series: Sequence[str],
          values: np.ndarray, errors: np.ndarray) -> list[object]:
    """``values[s, g]`` as bars: groups along x, series side by side."""
    width = 0.8 / max(1, len(series))
    x = np.arange(len(groups))
    cmap = plt.get_cmap("tab10")
    handles = []
    for s in range(len(series)):
        offset = (s - (len(series) - 1) / 2) * width
        err = np.where(np.isnan(errors[s]), 0.0, errors[s])
        h = ax.bar(x + offset, np.nan_to_num(values[s]), width, yerr=err, capsize=2,
                   color=cmap(s % 10), error_kw={"elinewidth": 0.8})
        handles.append(h)
    ax.set_xticks(x, groups)
    ax.grid(axis="y", alpha=0.3)
    return handles


def metric_panels(table: ResultsTable, path: Path, *, variant: str | None = None,
                  metrics: Sequence[str] = tuple(m.key for m in PAPER_METRICS),
                  title: str = "") -> Path:
    """Fig. 6: per metric, W1..W5 grouped, policies side by side, 95% CI error bars."""
    variant = variant or table.reference
    metrics = [m for m in metrics if m in table.metrics]
    fig, axes = _grid(len(metrics), title or f"Mechanisms by workload ({variant})")
    handles: list[object] = []
    for ax, metric in zip(axes, metrics, strict=True):
        values, errors = _matrix(
            table.policies, table.workloads, _scale(metric),
            lambda p, w, m=metric: table.cell(p, m, workload=w, variant=variant))
        handles = _bars(ax, table.workloads, table.policies, values, errors)
        ax.set_title(_label(metric), fontsize=10)
    fig.legend(handles, table.policies, loc="lower center", ncol=len(table.policies),
               frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 0.95))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _matrix(rows: Sequence[str], cols: Sequence[str], scale: float,
            cell: Callable[[str, str], Cell | None]) -> tuple[np.ndarray, np.ndarray]:
    """Means and 95% half-widths of ``cell(row, col)``, scaled; NaN where a cell is missing."""
    values = np.full((len(rows), len(cols)), np.nan)
    errors = np.full_like(values, np.nan)
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            found = cell(r, c)
            if found is not None:
                values[i, j], errors[i, j] = found.mean * scale, found.ci95 * scale
    return values, errors


def variant_panels(table: ResultsTable, path: Path, *,
                   metrics: Sequence[str] = tuple(m.key for m in PAPER_METRICS),
                   title: str = "") -> Path:
    """Per metric, policies along x and one bar per variant (averaged over workloads)."""
    metrics = [m for m in metrics if m in table.metrics]
    workload = ALL if len(table.workloads) > 1 else table.workloads[0]
    fig, axes = _grid(len(metrics), title or "Variants compared (average over workloads)")
    handles: list[object] = []
    for ax, metric in zip(axes, metrics, strict=True):
        values, errors = _matrix(
            table.variants, table.policies, _scale(metric),
            lambda v, p, m=metric: table.cell(p, m, workload=workload, variant=v))
        handles = _bars(ax, table.policies, table.variants, values, errors)
        ax.tick_params(axis="x", labelrotation=45, labelsize=8)
        ax.set_title(_label(metric), fontsize=10)
    fig.legend(handles, table.variants, loc="lower center", ncol=min(4, len(table.variants)),
               frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 0.95))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
