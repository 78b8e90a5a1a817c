"""How a malleable job's time depends on its size: linearly (the default) or by Amdahl's law
with a 5% serial fraction (``amdahl-0.05``), on hand-made workloads whose answers are known."""

from __future__ import annotations

from dataclasses import replace

import pytest

from metaq_py.policy.model import Kind
from sim.engine.core import simulate
from sim.workload.model import HybridWorkload, WorkloadModel
from tests.sim_worlds import Row, tiny_hybrid

MALLEABLE = Kind.MALLEABLE
F = 0.05
G2 = (F + (1 - F) / 2) / (F + (1 - F) / 4)
"""Amdahl: how many times longer a 4-node job takes on 2 nodes (0.525 / 0.2875, about 1.83;
linear speedup says 2)."""


def under(speedup: str, rows: list[Row], nodes: int) -> HybridWorkload:
    return replace(tiny_hybrid(rows, nodes=nodes),
                   model=WorkloadModel(malleable_speedup=speedup))  # type: ignore[arg-type]


def started_small(speedup: str) -> HybridWorkload:
    """4 nodes. M1 (2 nodes, 100 s) runs from 0; M2 (4 nodes, 100 s at 4, minimum 1) comes at
    10 and starts on the 2 free nodes."""
    return under(speedup, [Row(submit=0, size=2, walltime=100, runtime=100, kind=MALLEABLE,
                               min_size=1),
                           Row(submit=10, size=4, walltime=100, runtime=100, kind=MALLEABLE,
                               min_size=1)], nodes=4)


def test_a_job_started_small_takes_less_than_twice_as_long_under_amdahl() -> None:
    _, linear = simulate(started_small("linear"), policy="easy").outcomes
    _, amdahl = simulate(started_small("amdahl-0.05"), policy="easy").outcomes
    assert (linear.start, linear.end) == (10, 210)
    assert amdahl.start == 10 and amdahl.end == pytest.approx(10 + 100 * G2)


def shrunk_for_ondemand(speedup: str) -> HybridWorkload:
    """4 nodes. M (4 nodes, 100 s, minimum 1) runs from 0; the on-demand O (2 nodes, 10 s)
    arrives at 50, and SPAA shrinks M to 2 nodes until O ends at 60."""
    return under(speedup, [Row(submit=0, size=4, walltime=100, runtime=100, kind=MALLEABLE,
                               min_size=1),
                           Row(submit=50, size=2, walltime=10, runtime=10,
                               kind=Kind.ONDEMAND)], nodes=4)


def test_a_shrink_costs_less_under_amdahl() -> None:
    # 50 s were left at 4 nodes; 10 s on 2 nodes do 10 / g of them, g the slowdown at 2 nodes:
    # linear (g = 2) it ends at 60 + 45 = 105, under Amdahl at 60 + 50 - 10 / G2
    m, o = simulate(shrunk_for_ondemand("linear"), policy="N&SPAA").outcomes
    assert (o.start, o.end, m.shrinks) == (50, 60, 1) and m.end == pytest.approx(105)
    m, o = simulate(shrunk_for_ondemand("amdahl-0.05"), policy="N&SPAA").outcomes
    assert (o.start, o.end, m.shrinks) == (50, 60, 1)
    assert m.end == pytest.approx(110 - 10 / G2)


def test_the_speedup_word_sets_the_serial_fraction() -> None:
    assert WorkloadModel().serial == 0.0
    assert WorkloadModel(malleable_speedup="amdahl-0.05").serial == F
