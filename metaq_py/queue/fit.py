"""What a waiting task asks of an allocation: whether it can ever run there, and the job the
policy sees of it.

A task the allocation can never run (too many nodes or GPUs, another machine) is *skipped* by
the runner (:mod:`metaq_py.runner.offers`), never rejected, because another batch job of the
same queue may be able to run it; ``metaq explain`` gives the same sentence.

GPUs: a task asks for ``GPUS`` in total. A whole-node task on ``k`` nodes may use
``k * gpus_per_node`` GPUs, and it gets ``ceil(GPUS / k)`` device ids on each of its nodes. A
malleable task's smallest size is raised until its GPUs fit. A share of a node (``CPUS``) is a
one-node job with ``cores`` and ``gpus``; the Cluster picks its core and GPU ids. METAQ's
GPU-only task (``NODES 0`` with ``GPUS``) is such a share too, with the cores that go with its
GPUs on a node here (:func:`share_cores`).
"""

from __future__ import annotations

import math

from metaq_py.policy.model import Job
from metaq_py.policy.shares import NodeShape
from metaq_py.queue.index import Task
from metaq_py.task_spec import TaskSpec
from metaq_py.words import counted

__all__ = ["fit_problem", "gpu_ids_for", "job_of", "share_cores"]


def fit_problem(task: Task, *, nnodes: int, gpus_per_node: int, machine: str,
                shape: NodeShape | None = None, mem_per_node: int | None = None) -> str | None:
    """Why this allocation can never run ``task`` (one sentence), or ``None`` if it could in
    one of its shapes (``SHAPE``). ``shape`` is what a node offers shares (``None``: not known,
    so no share fits); ``mem_per_node`` the bytes of a node (``None``: not known, so any
    ``MEM`` may fit)."""
    spec = task.spec
    if spec.machine is not None and spec.machine != machine:
        return f"it must run on machine {spec.machine}, and this is {machine}"
    if spec.mem is not None and mem_per_node is not None and spec.mem > mem_per_node:
        return (f"its MEM on line {spec.line_of('MEM')} asks for {spec.mem >> 20} MiB per "
                f"node, and a node here has {mem_per_node >> 20} MiB")
    problem = _shape_problem(spec, nnodes=nnodes, gpus_per_node=gpus_per_node, shape=shape)
    if problem is None or not spec.shapes:
        return problem
    for i in range(1, len(spec.shapes) + 1):
        if _shape_problem(spec.in_shape(i), nnodes=nnodes, gpus_per_node=gpus_per_node,
                          shape=shape) is None:
            return None
    return f"none of its {len(spec.shapes) + 1} shapes fits here; the first: {problem}"


def _shape_problem(spec: TaskSpec, *, nnodes: int, gpus_per_node: int,
                   shape: NodeShape | None) -> str | None:
    """Why this allocation can never run ``spec`` in its header's own shape, or ``None``."""
    if spec.cpus or spec.gpu_share:
        cores = share_cores(spec, shape)
        if shape is None or not shape.fits(cores, spec.gpus):
            have = "an unknown number of" if shape is None else \
                f"{shape.cores} cores ({shape.cpu_only} for tasks without GPUs) and {shape.gpus}"
            return (f"it asks for {cores} cores and {spec.gpus} GPUs of one node, and a "
                    f"node here has {have} GPUs")
        return None
    smallest = _smallest(spec, gpus_per_node)
    if smallest is None:
        return (f"it needs {spec.gpus} GPUs, more than its {counted(spec.nodes, 'node')} "
                f"{'has' if spec.nodes == 1 else 'have'} here ({gpus_per_node} per node)")
    if smallest > nnodes:
        return f"it needs {smallest} nodes, and this allocation has {nnodes}"
    return None


def job_of(task: Task, *, gpus_per_node: int, shape: NodeShape | None = None,
           nnodes: int | None = None) -> Job:
    """The policy's view of a waiting task that :func:`fit_problem` accepted (with the same
    ``shape`` and ``nnodes``). A task of several shapes (``SHAPE``) is a job with the shapes
    that fit here; the first of them is the job itself."""
    spec = task.spec
    fitting = [(i, spec.in_shape(i)) for i in range(len(spec.shapes) + 1)]
    if nnodes is not None and spec.shapes:
        fitting = [(i, s) for i, s in fitting if _shape_problem(
            s, nnodes=nnodes, gpus_per_node=gpus_per_node, shape=shape) is None]
    (first, first_spec), rest = fitting[0], fitting[1:]
    others = tuple(_job_in(s, task, i, gpus_per_node=gpus_per_node, shape=shape)
                   for i, s in rest)
    return _job_in(first_spec, task, first, gpus_per_node=gpus_per_node, shape=shape,
                   others=others)


def _job_in(spec: TaskSpec, task: Task, index: int, *, gpus_per_node: int,
            shape: NodeShape | None, others: tuple[Job, ...] = ()) -> Job:
    """The policy job of ``task`` run as ``spec`` (its shape ``index``)."""
    cp = spec.checkpoint
    walltime = task.walltime if index == 0 or spec.min_wc_time is None else spec.min_wc_time
    if spec.cpus or spec.gpu_share:  # a share of one node (fit_problem checked it fits one)
        return Job(
            id=task.id, kind=spec.type, size=1, walltime=walltime, submit=task.submit,
            priority=spec.priority, rank=task.rank, setup=spec.setup,
            checkpoint_interval=cp.interval if cp else None,
            checkpoint_cost=cp.cost if cp else 0.0, cores=share_cores(spec, shape),
            gpus=spec.gpus, shape=index, shapes=others, mem=spec.mem or 0)
    smallest = _smallest(spec, gpus_per_node) or spec.nodes
    return Job(
        id=task.id, kind=spec.type, size=spec.nodes, min_size=smallest,
        walltime=walltime, submit=task.submit, priority=spec.priority, rank=task.rank,
        setup=spec.setup, checkpoint_interval=cp.interval if cp else None,
        checkpoint_cost=cp.cost if cp else 0.0, notice=spec.notice, shape=index,
        shapes=others,
    )


def share_cores(spec: TaskSpec, shape: NodeShape | None) -> int:
    """The cores a share of one node takes: its ``CPUS``; for METAQ's GPU-only task
    (``NODES 0``), the cores that go with its GPUs on a node of ``shape``: the node's cores per
    GPU (``cores_per_gpu``, else its cores split evenly among its GPUs), at least 1 per GPU.
    METAQ counted GPUs alone; a share here needs cores to run on."""
    if spec.cpus or shape is None or shape.gpus == 0:
        return max(spec.cpus, 1)
    per_gpu = shape.cores_per_gpu or shape.cores // shape.gpus
    return min(shape.cores, max(1, per_gpu) * spec.gpus)


def gpu_ids_for(gpus: int, nodes: int, gpu_ids: tuple[str, ...]) -> tuple[str, ...] | None:
    """The device ids a task needing ``gpus`` in total uses on each of its ``nodes`` nodes.

    ``None`` on an allocation without GPUs (``CUDA_VISIBLE_DEVICES`` is left alone); an empty
    tuple hides every GPU from a task that asked for none."""
    if not gpu_ids:
        return None
    return gpu_ids[: math.ceil(gpus / nodes)] if gpus else ()


def _smallest(spec: TaskSpec, gpus_per_node: int) -> int | None:
    """The fewest nodes ``spec`` may run on here, GPUs included; ``None``: not even its most."""
    least = spec.min_nodes
    if spec.gpus:
        if gpus_per_node == 0:
            return None
        least = max(least, math.ceil(spec.gpus / gpus_per_node))
    return least if least <= spec.nodes else None
