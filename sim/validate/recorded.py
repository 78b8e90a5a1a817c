"""Simulated waits set beside the recorded ones, and which policy comes closest.

The jobs compared are those whose recorded wait is known (cleaning leaves a start that
precedes its submit unknown, and says how many) and that started in the simulation. For each
group of them (all jobs, each size class, each month of submission) the mean, median and
90th percentile of the recorded and of the simulated waits are set side by side, with the
error of each simulated figure in percent of the recorded one.

- **Size classes** are powers of two of the job's size: ``128-255`` holds the jobs of 128 to
  255 nodes (or processors), ``1`` the jobs of one. A class of fewer than :data:`MIN_JOBS`
  jobs is left out: its figures would be noise.
- **Months** are the calendar months (UTC) of the jobs' submit times; a trace whose times
  count from 0 (an SWF file with ``UnixStartTime``) is put on the calendar by that start.
- **Closeness**: the policy whose overall mean, median and p90 waits are nearest the recorded
  ones, by the mean of the three absolute errors in percent. Three figures of the whole
  distribution weigh its middle and its tail alike; the error of each job's own wait is no
  fair judge, since a job's wait depends on which other jobs happen to start first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np

from sim.run.result import SimulationResult
from sim.trace.loader import Trace

__all__ = ["MIN_JOBS", "Comparison", "Figures", "Row", "compare_recorded"]

MIN_JOBS = 10
"""The fewest jobs a size class or month needs to be shown."""


@dataclass(frozen=True, slots=True)
class Figures:
    """Mean, median and 90th percentile of some waits, in seconds."""

    mean: float
    median: float
    p90: float

    @classmethod
    def of(cls, waits: np.ndarray) -> Figures:
        return cls(float(waits.mean()), float(np.median(waits)),
                   float(np.percentile(waits, 90)))

    def errors(self, recorded: Figures) -> tuple[float | None, float | None, float | None]:
        """Each figure's error in percent of the recorded one (``None`` where that is 0)."""
        return (_error(self.mean, recorded.mean), _error(self.median, recorded.median),
                _error(self.p90, recorded.p90))


@dataclass(frozen=True, slots=True)
class Row:
    """One group of jobs (``group`` is ``all``, a size class or a month, of ``kind``
    ``all``, ``size`` or ``month``): ``jobs`` compared, the recorded figures, and the
    simulated ones of each policy."""

    kind: str
    group: str
    jobs: int
    recorded: Figures
    simulated: Mapping[str, Figures]


@dataclass(frozen=True, slots=True)
class Comparison:
    """The rows (the overall one first, then size classes, then months), the jobs compared
    and those left out with the reason, and each policy's closeness (lower is closer)."""

    rows: tuple[Row, ...]
    compared: int
    skipped: Mapping[str, int]
    closeness: Mapping[str, float]
    unit: str = "nodes"

    @property
    def overall(self) -> Row:
        return self.rows[0]

    @property
    def closest(self) -> str:
        """The policy whose waits come closest to the recorded ones."""
        return min(self.closeness, key=lambda name: self.closeness[name])

    def of(self, kind: str) -> list[Row]:
        return [r for r in self.rows if r.kind == kind]

    def skipped_sentence(self) -> str | None:
        """One sentence on the jobs left out of the comparison, or ``None``."""
        parts = [f"{n:,} {why}" for why, n in self.skipped.items() if n]
        if not parts:
            return None
        return f"left {sum(self.skipped.values()):,} jobs out of the comparison: " \
               f"{'; '.join(parts)}"


def compare_recorded(trace: Trace, results: Mapping[str, SimulationResult]) -> Comparison:
    """Compare the recorded waits of ``trace`` with each run of ``results`` (by policy)."""
    if not results:
        raise ValueError("no simulation to compare with the recorded waits")
    jobs = trace.jobs
    recorded = jobs.wait
    known = ~np.isnan(recorded)
    simulated = {name: _simulated_waits(result, jobs.id) for name, result in results.items()}
    started = np.logical_and.reduce([~np.isnan(w) for w in simulated.values()])
    use = known & started
    if not use.any():
        raise ValueError(f"no job of {trace.source} has a recorded wait to compare with (its "
                         "format records no start time, or none is known)")
    skipped = {"with no recorded wait": int((~known).sum()),
               "that did not start in every simulation": int((known & ~started).sum())}
    sizes = jobs.nodes[use]
    months = _months(jobs.submit[use], trace)
    rec = recorded[use]
    sims = {name: w[use] for name, w in simulated.items()}
    rows = [_row("all", "all", np.ones(len(rec), dtype=bool), rec, sims)]
    classes = np.floor(np.log2(np.maximum(sizes, 1))).astype(np.int64)
    for c in sorted(set(classes.tolist())):
        mask = classes == c
        if mask.sum() >= MIN_JOBS:
            label = "1" if c == 0 else f"{2 ** c}-{2 ** (c + 1) - 1}"
            rows.append(_row("size", label, mask, rec, sims))
    for month in sorted(set(months)):
        mask = np.array([m == month for m in months])
        if mask.sum() >= MIN_JOBS:
            rows.append(_row("month", month, mask, rec, sims))
    overall = rows[0]
    closeness = {name: _closeness(overall.simulated[name], overall.recorded) for name in sims}
    return Comparison(rows=tuple(rows), compared=int(use.sum()), skipped=skipped,
                      closeness=closeness, unit=trace.unit)


def _simulated_waits(result: SimulationResult, ids: np.ndarray) -> np.ndarray:
    """The simulated wait of each job of ``ids`` (NaN: it never started)."""
    by_id = {o.id: o.wait for o in result.outcomes}
    return np.array([np.nan if by_id.get(int(i)) is None else by_id[int(i)] for i in ids],
                    dtype=np.float64)


def _months(submits: np.ndarray, trace: Trace) -> list[str]:
    offset = 0
    header = trace.header
    if header is not None and header.unix_start_time and len(submits) \
            and float(submits.max()) < header.unix_start_time:
        offset = header.unix_start_time
    return [datetime.fromtimestamp(float(s) + offset, timezone.utc).strftime("%Y-%m")
            for s in submits]


def _row(kind: str, group: str, mask: np.ndarray, rec: np.ndarray,
         sims: Mapping[str, np.ndarray]) -> Row:
    return Row(kind, group, int(mask.sum()), Figures.of(rec[mask]),
               {name: Figures.of(w[mask]) for name, w in sims.items()})


def _error(simulated: float, recorded: float) -> float | None:
    return None if recorded == 0 else 100.0 * (simulated - recorded) / recorded


def _closeness(simulated: Figures, recorded: Figures) -> float:
    errors: Sequence[float | None] = simulated.errors(recorded)
    known = [abs(e) for e in errors if e is not None]
    return sum(known) / len(known) if known else math.inf
