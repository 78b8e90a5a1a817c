"""What the policy is told about a waiting task, and what a task may use of this allocation.

The runner hands the policy core :class:`~metaq_py.policy.model.Job` values; this module makes
them from the queue's :class:`~metaq_py.queue.index.Task` values. It also decides which tasks this
allocation can never run (too many nodes or GPUs, another machine): those are *skipped*, never
rejected, because another batch job of the same queue may be able to run them.

GPUs: a task asks for ``GPUS`` in total. Nodes are never shared, so a task on ``k`` nodes may use
``k * gpus_per_node`` GPUs, and it gets ``ceil(GPUS / k)`` device ids on each of its nodes. A
malleable task's smallest size is raised until its GPUs fit.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from metaq_py.policy.model import Job
from metaq_py.queue.attempts import read_record
from metaq_py.queue.index import Task
from metaq_py.queue.lease import Claim

__all__ = ["History", "fit_problem", "gpu_ids_for", "job_of", "past_runs"]


def fit_problem(task: Task, *, nnodes: int, gpus_per_node: int, machine: str) -> str | None:
    """Why this allocation can never run ``task`` (one sentence), or ``None`` if it could."""
    spec = task.spec
    if spec.machine is not None and spec.machine != machine:
        return f"it must run on machine {spec.machine}, and this is {machine}"
    smallest = _smallest(task, gpus_per_node)
    if smallest is None:
        return (f"it needs {spec.gpus} GPUs, more than its {spec.nodes} node(s) have here "
                f"({gpus_per_node} per node)")
    if smallest > nnodes:
        return f"it needs {smallest} nodes, and this allocation has {nnodes}"
    return None


def job_of(task: Task, *, gpus_per_node: int) -> Job:
    """The policy's view of a waiting task that :func:`fit_problem` accepted."""
    spec = task.spec
    smallest = _smallest(task, gpus_per_node) or spec.nodes
    cp = spec.checkpoint
    return Job(
        id=task.id, kind=spec.type, size=spec.nodes, min_size=smallest,
        walltime=task.walltime, submit=task.submit, priority=spec.priority, rank=task.rank,
        setup=spec.setup, checkpoint_interval=cp.interval if cp else None,
        checkpoint_cost=cp.cost if cp else 0.0, notice=spec.notice,
    )


def gpu_ids_for(gpus: int, nodes: int, gpu_ids: tuple[str, ...]) -> tuple[str, ...] | None:
    """The device ids a task needing ``gpus`` in total uses on each of its ``nodes`` nodes.

    ``None`` on an allocation without GPUs (``CUDA_VISIBLE_DEVICES`` is left alone); an empty
    tuple hides every GPU from a task that asked for none."""
    if not gpu_ids:
        return None
    return gpu_ids[: math.ceil(gpus / nodes)] if gpus else ()


def _smallest(task: Task, gpus_per_node: int) -> int | None:
    """The fewest nodes ``task`` may run on here, GPUs included; ``None``: not even its most."""
    spec = task.spec
    least = spec.min_nodes
    if spec.gpus:
        if gpus_per_node == 0:
            return None
        least = max(least, math.ceil(spec.gpus / gpus_per_node))
    return least if least <= spec.nodes else None


@dataclass(frozen=True, slots=True)
class History:
    """What earlier runs of a claimed task say about this one: ``runs`` is how many times it
    was started before (in any batch job); ``resume`` is true when the last of them was
    interrupted (preempted, stopped at the end of an allocation, lost with its job) rather
    than failed, so the task should continue from its checkpoint."""

    runs: int
    resume: bool


def past_runs(claim: Claim) -> History:
    """The :class:`History` of ``claim``, from the record that travels with the task."""
    if not claim.recorded:
        return History(0, False)
    try:
        inode = os.lstat(claim.path).st_ino
    except OSError:
        return History(0, False)
    rec = read_record(claim.path, inode)
    if rec is None:
        return History(0, False)
    # The queue writes one history entry per run that did not finish: "requeued" for an
    # interruption or a lost job, "failed" for a non-zero exit sent back for a retry.
    ends = [h.get("event") for h in rec.history if h.get("event") in ("requeued", "failed")]
    return History(len(ends), bool(ends) and ends[-1] == "requeued")
