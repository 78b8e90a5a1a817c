"""The results table: statistics over seeds, the all-workloads rows, CSV and JSON."""

from __future__ import annotations

import csv
import io
import json
import math

import pytest

from sim.run.spec import RunSpec, TraceSource
from sim.study.aggregate import ALL, Cell, ResultsTable, aggregate, t975
from sim.study.execution import FinishedRun

SRC = TraceSource(jobs=10)


def record(policy: str, workload: str, seed: int, **metrics: float | None) -> FinishedRun:
    return FinishedRun(spec=RunSpec(policy=policy, workload=workload, seed=seed, trace=SRC),
                     metrics=metrics, wall_seconds=0.1, trace="t")


def test_cell_statistics() -> None:
    c = Cell.of([1.0, 2.0, 3.0, None, float("nan")])
    assert c.n == 3 and c.mean == 2.0 and c.min == 1.0 and c.max == 3.0
    assert c.std == pytest.approx(1.0)
    assert c.ci95 == pytest.approx(4.303 / math.sqrt(3))
    one = Cell.of([5.0])
    assert one.n == 1 and math.isnan(one.std) and math.isnan(one.ci95) and one.low == 5.0
    assert Cell.of([]).n == 0
    assert t975(1) == 12.706 and t975(100) == 1.96


def test_all_rows_average_each_seed_over_workloads_first() -> None:
    records = [record("easy", "W1", 0, utilisation=0.5), record("easy", "W2", 0, utilisation=0.7),
               record("easy", "W1", 1, utilisation=0.6), record("easy", "W2", 1, utilisation=1.0)]
    t = aggregate(records, metrics=["utilisation"])
    assert t.workloads == ("W1", "W2")
    overall = t.cell("easy", "utilisation")
    assert overall is not None
    assert overall.n == 2 and overall.min == pytest.approx(0.6) and overall.max == 0.8
    assert t.cell("easy", "utilisation", workload="W2").mean == pytest.approx(0.85)


def test_policy_order_is_as_given_and_duplicates_are_refused() -> None:
    records = [record("CUA&SPAA", "W1", 0, utilisation=0.5), record("easy", "W1", 0,
                                                                     utilisation=0.4)]
    assert aggregate(records, policies=["easy", "CUA&SPAA"]).policies == ("easy", "CUA&SPAA")
    with pytest.raises(ValueError, match="two runs"):
        aggregate([*records, record("easy", "W1", 0, utilisation=0.1)])


def test_csv_and_json_round_trip() -> None:
    records = [record(p, w, s, utilisation=0.1 * s + 0.3, instant_start=None)
               for p in ("easy", "N&PAA") for w in ("W1", "W5") for s in (0, 1, 2)]
    t = aggregate(records, metrics=["utilisation", "instant_start"])
    again = ResultsTable.from_dict(json.loads(t.to_json()))
    assert again == t
    rows = list(csv.DictReader(io.StringIO(t.to_csv())))
    assert len(rows) == 2 * 3  # two workloads and ALL per policy
    assert {r["workload"] for r in rows} == {"W1", "W5", ALL}
    first = rows[0]
    assert float(first["utilisation_mean"]) == pytest.approx(0.4)
    assert first["utilisation_n"] == "3"
    assert first["instant_start_mean"] == "" and first["instant_start_n"] == "0"
