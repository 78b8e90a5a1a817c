"""Tiny hand-made traces and hybrid workloads for the simulator's tests.

:func:`tiny_trace` builds a cleaned-looking :class:`~sim.trace.loader.Trace` straight from rows, and
:func:`tiny_hybrid` a :class:`~sim.workload.model.HybridWorkload` whose kinds, setups, checkpoints
and notices are given explicitly instead of drawn, so a test can work its schedule out by hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from metaq_py.policy.model import Kind
from sim.trace.cleaning import CleaningReport
from sim.trace.columns import JobTable
from sim.trace.loader import Trace
from sim.workload.model import KINDS, HybridWorkload, WorkloadModel

NAN = float("nan")


def tiny_trace(rows: Sequence[tuple[float, int, float, float]], *, nodes: int,
               ids: Sequence[int] | None = None) -> Trace:
    """A trace of ``(submit, size, walltime, runtime)`` rows, in the order given."""
    n = len(rows)
    table = JobTable.from_columns(
        id=list(ids) if ids is not None else list(range(1, n + 1)),
        submit=[r[0] for r in rows], nodes=[r[1] for r in rows],
        requested_nodes=[r[1] for r in rows], walltime=[r[2] for r in rows],
        runtime=[r[3] for r in rows])
    return Trace(source="tiny", format="swf", nodes=nodes, jobs=table,
                 report=CleaningReport(records=n, kept=n, machine_nodes=nodes))


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One job of a hand-made hybrid workload (times in seconds)."""

    submit: float
    size: int
    walltime: float
    runtime: float
    kind: Kind = Kind.RIGID
    min_size: int = 0
    setup: float = 0.0
    checkpoint_interval: float = NAN
    checkpoint_cost: float = 0.0
    notice_time: float = NAN
    estimated_arrival: float = NAN


def tiny_hybrid(rows: Sequence[Row], *, nodes: int) -> HybridWorkload:
    """A hybrid workload with every property of every job given by ``rows``."""
    n = len(rows)
    trace = tiny_trace([(r.submit, r.size, r.walltime, r.runtime) for r in rows], nodes=nodes)
    kind = np.array([KINDS.index(r.kind) for r in rows], dtype=np.int8)
    notice = np.array([r.notice_time for r in rows])
    # category codes: 0 none, 1 accurate; -1 for jobs that are not on demand
    category = np.array([-1 if r.kind is not Kind.ONDEMAND else (0 if np.isnan(t) else 1)
                         for r, t in zip(rows, notice, strict=True)], dtype=np.int8)
    return HybridWorkload(
        trace=trace, model=WorkloadModel(), group=np.arange(n),
        group_labels=tuple(f"g{i}" for i in range(n)), group_kind=kind.copy(), kind=kind,
        retyped=np.zeros(n, dtype=bool),
        min_size=np.array([r.min_size or r.size for r in rows], dtype=np.int64),
        setup=np.array([r.setup for r in rows]),
        checkpoint_interval=np.array([r.checkpoint_interval for r in rows]),
        checkpoint_cost=np.array([r.checkpoint_cost for r in rows]),
        category=category, notice_time=notice,
        estimated_arrival=np.array([r.estimated_arrival for r in rows]))
