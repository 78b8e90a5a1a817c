"""Hand-made workloads in which every job takes the whole machine: rigid batch jobs, then one
on-demand job, so that each decision has one answer to work out by hand."""

from __future__ import annotations

from collections.abc import Sequence

from metaq_py.policy.model import Kind
from sim.workload.model import HybridWorkload
from tests.sim_worlds import Row, tiny_hybrid


def batch_then_ondemand(nodes: int, batch: Sequence[tuple[float, float, float]],
                        ondemand: tuple[float, float]) -> HybridWorkload:
    """On ``nodes`` nodes, rigid jobs ``(submit, walltime, runtime)`` without checkpoints,
    then an on-demand job ``(submit, runtime)`` whose walltime is its runtime."""
    submit, runtime = ondemand
    return tiny_hybrid([*(Row(submit=s, size=nodes, walltime=w, runtime=r) for s, w, r in batch),
                        Row(submit=submit, size=nodes, walltime=runtime, runtime=runtime,
                            kind=Kind.ONDEMAND)], nodes=nodes)
