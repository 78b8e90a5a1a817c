"""The results table of a study: every metric's mean and spread over seeds, per variant,
policy and workload.

A :class:`Cell` summarises one metric over the seeds of one (variant, policy, workload):
count, mean, sample standard deviation, min, max and the half-width of the 95% confidence
interval of the mean (Student's t, since ten seeds are too few for the normal quantile).

Besides W1..W5, the table has a row per (variant, policy) for the workload :data:`ALL`: each
seed's values are first averaged over the workloads, then summarised over seeds. The paper's
headline figures are of that kind, and its spread is the spread of the study's headline, not
an average of spreads.

The table is written as CSV (one row per variant, policy and workload; for each metric the
columns ``<metric>_mean``, ``_std``, ``_min``, ``_max``, ``_ci95``, ``_n``) and as JSON (the
same rows, nested). Rows come in a fixed order (variants, then policies as the study lists
them, then workloads), so equal runs give byte-identical files.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from sim.study.execution import FinishedRun
from sim.study.metrics import METRICS

ALL = "all"
"""The pseudo-workload of seed-wise averages over every workload of the study."""

_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
"""Student's t 97.5% quantile for 1..30 degrees of freedom (beyond: 1.96)."""

STATS = ("mean", "std", "min", "max", "ci95", "n")

Sample = tuple[str, int]
"""One run of a cell: ``(workload, seed)``."""


def t975(dof: int) -> float:
    """The two-sided 95% Student t quantile for ``dof`` degrees of freedom."""
    if dof < 1:
        return math.nan
    return _T975[dof - 1] if dof <= len(_T975) else 1.96


@dataclass(frozen=True, slots=True)
class Cell:
    """One metric over seeds. ``std`` and ``ci95`` are NaN with one value; everything is NaN
    with none (``n`` = 0)."""

    n: int
    mean: float
    std: float
    min: float
    max: float
    ci95: float
    samples: Mapping[Sample, float] = field(default_factory=dict, compare=False)
    """The runs' values by ``(workload, seed)``, for comparisons paired run by run (not
    written to CSV or JSON: a table read back has none)."""

    @classmethod
    def of(cls, values: Iterable[float | None],
           samples: Mapping[Sample, float | None] | None = None) -> Cell:
        data = np.array([v for v in values if v is not None and v == v], dtype=np.float64)
        n = len(data)
        kept = {} if samples is None else {k: float(v) for k, v in samples.items()
                                           if v is not None and v == v}
        if n == 0:
            return cls(0, math.nan, math.nan, math.nan, math.nan, math.nan, kept)
        std = float(data.std(ddof=1)) if n > 1 else math.nan
        ci = t975(n - 1) * std / math.sqrt(n) if n > 1 else math.nan
        return cls(n, float(data.mean()), std, float(data.min()), float(data.max()), ci, kept)

    @property
    def low(self) -> float:
        """The lower end of the 95% interval (the mean itself with one seed)."""
        return self.mean - (0.0 if math.isnan(self.ci95) else self.ci95)

    @property
    def high(self) -> float:
        return self.mean + (0.0 if math.isnan(self.ci95) else self.ci95)


Row = tuple[str, str, str]
"""``(variant, policy, workload)``."""


@dataclass(frozen=True, slots=True, eq=False)
class ResultsTable:
    """``cells[(variant, policy, workload)][metric]``; ``variants``, ``policies`` and
    ``workloads`` in display order (``workloads`` without :data:`ALL`)."""

    variants: tuple[str, ...]
    policies: tuple[str, ...]
    workloads: tuple[str, ...]
    metrics: tuple[str, ...]
    cells: Mapping[Row, Mapping[str, Cell]]

    @property
    def reference(self) -> str:
        """The variant the paper's findings are judged on: the first."""
        return self.variants[0]

    def cell(self, policy: str, metric: str, *, workload: str = ALL,
             variant: str | None = None) -> Cell | None:
        row = self.cells.get((variant or self.reference, policy, workload))
        return None if row is None else row.get(metric)

    def mean(self, policy: str, metric: str, *, workload: str = ALL,
             variant: str | None = None) -> float:
        """The mean of a cell; NaN when the table lacks it."""
        c = self.cell(policy, metric, workload=workload, variant=variant)
        return math.nan if c is None else c.mean

    def rows(self) -> list[Row]:
        workloads = (*self.workloads, ALL) if len(self.workloads) > 1 else self.workloads
        return [(v, p, w) for v in self.variants for p in self.policies for w in workloads
                if (v, p, w) in self.cells]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ResultsTable):
            return NotImplemented
        return self.to_json() == other.to_json()

    __hash__ = None  # type: ignore[assignment]

    # --- writing ---------------------------------------------------------------------------

    def to_dict(self) -> dict[str, object]:
        return {
            "variants": list(self.variants), "policies": list(self.policies),
            "workloads": list(self.workloads), "metrics": list(self.metrics),
            "rows": [{"variant": v, "policy": p, "workload": w,
                      "metrics": {m: _cell_dict(self.cells[(v, p, w)][m])
                                  for m in self.metrics}}
                     for v, p, w in self.rows()],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, allow_nan=False) + "\n"

    def to_csv(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["variant", "policy", "workload",
                         *(f"{m}_{s}" for m in self.metrics for s in STATS)])
        for v, p, w in self.rows():
            row = self.cells[(v, p, w)]
            values: list[object] = []
            for m in self.metrics:
                c = row[m]
                values += [_fmt(c.mean), _fmt(c.std), _fmt(c.min), _fmt(c.max), _fmt(c.ci95),
                           c.n]
            writer.writerow([v, p, w, *values])
        return out.getvalue()

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> ResultsTable:
        cells: dict[Row, dict[str, Cell]] = {}
        for row in data["rows"]:  # type: ignore[attr-defined]
            cells[(row["variant"], row["policy"], row["workload"])] = {
                m: Cell(**{k: (math.nan if x is None else x) for k, x in c.items()})
                for m, c in row["metrics"].items()}
        return cls(tuple(data["variants"]), tuple(data["policies"]),  # type: ignore[arg-type]
                   tuple(data["workloads"]), tuple(data["metrics"]),  # type: ignore[arg-type]
                   cells)

    @classmethod
    def from_means(cls, means: Mapping[tuple[str, str], Mapping[str, float]], *,
                   variant: str = "default") -> ResultsTable:
        """A table of single values (``n`` = 1) from ``{(policy, workload): {metric:
        value}}``; :data:`ALL` rows are the averages over workloads. For hand-made tables."""
        policies = tuple(dict.fromkeys(p for p, _ in means))
        workloads = tuple(dict.fromkeys(w for _, w in means))
        metrics = tuple(dict.fromkeys(m for row in means.values() for m in row))
        cells: dict[Row, dict[str, Cell]] = {}
        for (p, w), row in means.items():
            cells[(variant, p, w)] = {m: Cell.of([row.get(m)], {(w, 0): row.get(m)})
                                      for m in metrics}
        for p in policies:
            cells[(variant, p, ALL)] = {
                m: Cell.of([_avg([means[(p, w)].get(m) for w in workloads if (p, w) in means])],
                           {(w, 0): means[(p, w)].get(m) for w in workloads if (p, w) in means})
                for m in metrics}
        return cls((variant,), policies, workloads, metrics, cells)


def _avg(values: Sequence[float | None]) -> float | None:
    data = [v for v in values if v is not None and v == v]
    return sum(data) / len(data) if data else None


def _cell_dict(c: Cell) -> dict[str, float | int | None]:
    return {"n": c.n, **{k: (None if math.isnan(x) else x) for k, x in
                         (("mean", c.mean), ("std", c.std), ("min", c.min), ("max", c.max),
                          ("ci95", c.ci95))}}


def _fmt(x: float) -> str:
    return "" if math.isnan(x) else repr(float(x))


def aggregate(records: Sequence[FinishedRun], *, policies: Sequence[str] | None = None,
              metrics: Sequence[str] | None = None) -> ResultsTable:
    """The results table of ``records``. ``policies`` fixes their order (default: as first
    seen); variants and workloads keep the order of first appearance, workloads sorted."""
    if not records:
        raise ValueError("no runs to tabulate")
    keys = tuple(metrics or (m.key for m in METRICS))
    variants = tuple(dict.fromkeys(r.spec.variant for r in records))
    seen = tuple(dict.fromkeys(r.spec.policy for r in records))
    order = tuple(p for p in (policies or seen) if p in seen)
    workloads = tuple(sorted(dict.fromkeys(r.spec.workload for r in records)))
    groups: dict[Row, dict[int, Mapping[str, float | None]]] = {}
    for r in records:
        row = (r.spec.variant, r.spec.policy, r.spec.workload)
        seeds = groups.setdefault(row, {})
        if r.spec.seed in seeds:
            raise ValueError(f"two runs of {row} with seed {r.spec.seed}")
        seeds[r.spec.seed] = r.metrics
    cells: dict[Row, dict[str, Cell]] = {}
    for row, seeds in groups.items():
        w = row[2]
        cells[row] = {m: Cell.of((seeds[s].get(m) for s in sorted(seeds)),
                                 {(w, s): seeds[s].get(m) for s in sorted(seeds)})
                      for m in keys}
    if len(workloads) > 1:
        for v in variants:
            for p in order:
                per_seed: dict[int, list[Mapping[str, float | None]]] = {}
                runs: dict[Sample, Mapping[str, float | None]] = {}
                for w in workloads:
                    for s, values in groups.get((v, p, w), {}).items():
                        per_seed.setdefault(s, []).append(values)
                        runs[(w, s)] = values
                cells[(v, p, ALL)] = {
                    m: Cell.of((_avg([x.get(m) for x in per_seed[s]]) for s in sorted(per_seed)),
                               {k: x.get(m) for k, x in runs.items()})
                    for m in keys}
    return ResultsTable(variants, order, workloads, keys, cells)
