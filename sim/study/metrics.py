"""The figures a study records for each run, and how they are read off a run's summary.

The paper's metrics (:data:`PAPER_METRICS`) come first: average turnaround of all, rigid and
malleable jobs, utilisation, the on-demand instant-start rate, and the preemption ratios of
rigid and malleable jobs.

Utilisation comes in four figures, each with its window (:mod:`sim.run.metrics`):

- ``utilisation``: useful node-hours over the **steady-state window** (first submit plus a
  warm-up, to the last submit). The findings about utilisation are judged on it: on a whole
  trace every policy does the same work, so only a window that ends before the queue drains
  can show one policy doing more of it sooner;
- ``utilisation_paper``: the paper's definition as we read it, useful node-hours over the
  node-hours elapsed from the first submit to the last end (CQSim measures the same span);
- ``busy_utilisation``: busy node-hours (lost work included) over the steady-state window;
- ``useful_node_hours`` and ``busy_node_hours``: over the whole run;
- ``offered_load``: the work submitted in the steady-state window over the machine's capacity
  in it; below 1 every policy does the work as it comes, and utilisation cannot tell them
  apart (the study's verdicts then cannot judge a utilisation claim);
- ``window_runtimes``: how long the steady-state window lasts, in mean runtimes of the jobs
  submitted in it. A trace too small for its load (few jobs, arrivals compressed) has a
  window a few jobs long, in which no queue settles: utilisation claims are not judged there.

:data:`EXTRA_METRICS` are what a researcher checks next (waits, bounded slowdown, work
lost, failures). Turnarounds and waits are in hours, ratios are fractions in [0, 1], work in
node-hours. A figure a run cannot have (no malleable jobs, no failures configured) is
``None``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np

from metaq_py.policy.model import JobId, Kind
from sim.run.metrics import (
    KIND_CODE,
    STEADY_WARMUP,
    Columns,
    Summary,
    busy_node_hours,
    busy_utilisation,
    steady_window,
    useful_node_hours,
    utilisation,
)
from sim.run.result import Outcomes, SimulationResult

HOUR = 3600.0


@dataclass(frozen=True, slots=True)
class Metric:
    """One figure of a run: ``key`` in tables, ``label`` in figures, ``unit`` of its values
    (``h``, ``ratio`` shown as percent, ``node-h``, ``count``), and which way is better."""

    key: str
    label: str
    unit: Literal["h", "ratio", "node-h", "count", "x"]
    better: Literal["lower", "higher"]

    def show(self, value: float | None, *, digits: int = 1) -> str:
        """``value`` for a report: ratios as percent, the rest with its unit."""
        if value is None or value != value:
            return "n/a"
        if self.unit == "ratio":
            return f"{100 * value:.{digits}f}%"
        if self.unit == "count":
            return f"{value:.{digits}f}"
        unit = "" if self.unit == "x" else f" {self.unit}"
        return f"{value:.{digits + 1}f}{unit}" if abs(value) < 10 else f"{value:.{digits}f}{unit}"


PAPER_METRICS: tuple[Metric, ...] = (
    Metric("turnaround_all", "Avg turnaround, all jobs (h)", "h", "lower"),
    Metric("turnaround_rigid", "Avg turnaround, rigid jobs (h)", "h", "lower"),
    Metric("turnaround_malleable", "Avg turnaround, malleable jobs (h)", "h", "lower"),
    Metric("utilisation", "Utilisation, steady state", "ratio", "higher"),
    Metric("instant_start", "On-demand instant-start rate", "ratio", "higher"),
    Metric("preempt_rigid", "Preemption ratio, rigid jobs", "ratio", "lower"),
    Metric("preempt_malleable", "Preemption ratio, malleable jobs", "ratio", "lower"),
)
EXTRA_METRICS: tuple[Metric, ...] = (
    Metric("turnaround_ondemand", "Avg turnaround, on-demand jobs (h)", "h", "lower"),
    Metric("wait_all", "Avg wait, all jobs (h)", "h", "lower"),
    Metric("bsld_all", "Avg bounded slowdown (10 s)", "x", "lower"),
    Metric("shrink_malleable", "Share of malleable jobs shrunk", "ratio", "lower"),
    Metric("lost_node_hours", "Node-hours lost to preemption", "node-h", "lower"),
    Metric("utilisation_paper", "Utilisation, paper's reading (to the last end)", "ratio",
           "higher"),
    Metric("busy_utilisation", "Busy utilisation, steady state (lost work included)", "ratio",
           "higher"),
    Metric("useful_node_hours", "Useful node-hours (whole run)", "node-h", "higher"),
    Metric("busy_node_hours", "Busy node-hours (whole run)", "node-h", "lower"),
    Metric("ondemand_work_share", "On-demand share of the work", "ratio", "lower"),
    Metric("offered_load", "Offered load, steady state", "ratio", "higher"),
    Metric("window_runtimes", "Steady-state window, in mean runtimes", "x", "higher"),
    Metric("unfinished", "Jobs never finished", "count", "lower"),
    Metric("failures", "Node failures", "count", "lower"),
    Metric("failure_kills", "Jobs killed by failures", "count", "lower"),
    Metric("failure_lost_node_hours", "Node-hours lost to failures", "node-h", "lower"),
    Metric("preempt_or_kill_rigid", "Rigid jobs preempted or killed by a failure", "ratio",
           "lower"),
    Metric("preempt_or_kill_malleable", "Malleable jobs preempted or killed by a failure",
           "ratio", "lower"),
    Metric("preempt_or_shrink_malleable", "Malleable jobs preempted or shrunk", "ratio",
           "lower"),
)
METRICS: tuple[Metric, ...] = PAPER_METRICS + EXTRA_METRICS
BY_KEY: Mapping[str, Metric] = {m.key: m for m in METRICS}


def _hours(x: float | None) -> float | None:
    return None if x is None else x / HOUR


def result_metrics(result: SimulationResult, failures: Mapping[str, float] | None = None, *,
                   warmup: float = STEADY_WARMUP,
                   killed: Collection[JobId] = ()) -> dict[str, float | None]:
    """Every metric of :data:`METRICS` for one simulated run, the steady-state window starting
    ``warmup`` seconds after the first submit (see :func:`sim.run.metrics.steady_window`);
    ``killed`` are the jobs node failures killed."""
    outcomes = result.outcomes
    data = getattr(outcomes, "columns", outcomes)
    window = steady_window(data, warmup=warmup)
    metrics = run_metrics(result.summary(), failures)
    metrics.update({
        "utilisation": utilisation(data, nodes=result.nodes, window=window).value,
        "busy_utilisation": busy_utilisation(result.series.time, result.series.busy,
                                             nodes=result.nodes, window=window),
        "useful_node_hours": useful_node_hours(data),
        "busy_node_hours": busy_node_hours(data),
        "ondemand_work_share": _ondemand_share(data),
        "offered_load": offered_load(data, nodes=result.nodes, window=window),
        "window_runtimes": window_runtimes(data, window=window),
        **_wider_preemption(outcomes, killed),
    })
    return metrics


def _wider_preemption(outcomes: object, killed: Collection[JobId]) -> dict[str, float | None]:
    """The preemption ratios under the study's other readings (``docs/model.md``): a job
    killed by a node failure counts as preempted, or a malleable job shrunk does."""
    if isinstance(outcomes, Outcomes):
        c, ids = outcomes.columns, outcomes.ids
    else:
        rows = list(outcomes)  # type: ignore[call-overload]
        c, ids = Columns.of(rows), [o.id for o in rows]
    hit = np.fromiter((i in killed for i in ids), dtype=bool, count=len(ids))
    preempted = c.preemptions > 0

    def share(kind: Kind, counted: np.ndarray) -> float | None:
        of_kind = c.kind == KIND_CODE[kind]
        return float(counted[of_kind].mean()) if of_kind.any() else None

    return {"preempt_or_kill_rigid": share(Kind.RIGID, preempted | hit),
            "preempt_or_kill_malleable": share(Kind.MALLEABLE, preempted | hit),
            "preempt_or_shrink_malleable": share(Kind.MALLEABLE, preempted | (c.shrinks > 0))}


def offered_load(outcomes: object, *, nodes: int, window: tuple[float, float]) -> float | None:
    """The useful node-hours of the jobs submitted in ``window`` over the machine's node-hours
    in it: at 1 or more the machine cannot keep up, and utilisation can differ between
    policies (below, every policy does the work as it comes)."""
    c = outcomes if isinstance(outcomes, Columns) else Columns.of(outcomes)  # type: ignore[arg-type]
    start, end = window
    if end <= start:
        return None
    inside = (c.submit >= start) & (c.submit <= end)
    return float(c.useful[inside].sum()) / (nodes * (end - start))


def window_runtimes(outcomes: object, *, window: tuple[float, float]) -> float | None:
    """The length of ``window`` over the mean runtime of the jobs submitted in it (``None``
    when none is)."""
    c = outcomes if isinstance(outcomes, Columns) else Columns.of(outcomes)  # type: ignore[arg-type]
    start, end = window
    inside = (c.submit >= start) & (c.submit <= end)
    mean = float(c.runtime[inside].mean()) if inside.any() else 0.0
    if end <= start or not mean > 0:
        return None
    return (end - start) / mean


def _ondemand_share(outcomes: object) -> float | None:
    """The on-demand jobs' share of the useful node-hours."""
    c = outcomes if isinstance(outcomes, Columns) else Columns.of(outcomes)  # type: ignore[arg-type]
    total = float(c.useful.sum())
    if total <= 0:
        return None
    return float(c.useful[c.kind == KIND_CODE[Kind.ONDEMAND]].sum()) / total


def run_metrics(summary: Summary,
                failures: Mapping[str, float] | None = None) -> dict[str, float | None]:
    """The metrics a run's summary holds; ``failures`` holds the failure source's counts
    (``failures``, ``failure_kills``, ``failure_lost_node_hours``) when it had one. Its
    ``utilisation`` is the summary's (the whole run), which :func:`result_metrics` replaces
    by the steady-state figure."""
    turnaround = summary.turnaround
    kinds = turnaround.kinds
    failures = failures or {}
    return {
        "turnaround_all": _hours(turnaround.all.mean),
        "turnaround_rigid": _hours(kinds["rigid"].mean),
        "turnaround_malleable": _hours(kinds["malleable"].mean),
        "utilisation": summary.utilisation.value,
        "utilisation_paper": summary.utilisation.value,
        "instant_start": summary.instant_start_rate,
        "preempt_rigid": summary.preemption_ratio.get("rigid"),
        "preempt_malleable": summary.preemption_ratio.get("malleable"),
        "turnaround_ondemand": _hours(kinds["ondemand"].mean),
        "wait_all": _hours(summary.wait.all.mean),
        "bsld_all": summary.bounded_slowdown.all.mean,
        "shrink_malleable": summary.shrink_ratio,
        "lost_node_hours": summary.lost_node_hours,
        "unfinished": float(summary.jobs - summary.finished),
        "failures": failures.get("failures"),
        "failure_kills": failures.get("failure_kills"),
        "failure_lost_node_hours": failures.get("failure_lost_node_hours"),
    }
