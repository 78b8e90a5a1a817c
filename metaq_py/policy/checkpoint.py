"""The checkpoint and preemption-overhead model.

Checkpoint interval: Daly's higher-order optimum (J. T. Daly, "A higher order estimate of the
optimum checkpoint interval for restart dumps", FGCS 22(3), 2006)::

    tau = sqrt(2 d M) * (1 + sqrt(d / 2M) / 3 + (d / 2M) / 9) - d     for d < 2M
    tau = M                                                           for d >= 2M

with ``d`` the time one checkpoint takes and ``M`` the mean time between interrupts seen by the
job. The cost grows with the job: 600 s below 1,024 nodes and 1,200 s from 1,024 nodes up. A job
whose runtime is shorter than ``tau`` never checkpoints.

Schedule: a rigid job spends its ``setup`` first, then computes ``tau`` seconds and writes a
checkpoint for ``d`` seconds, over and over. Checkpoint ``k`` (k >= 1) completes at
``base + k * (tau + d)`` where ``base`` is ``start + setup``. A recorded checkpoint (the live
runner hears about real ones) restarts the schedule from its own completion time.

Overhead of a preemption, in seconds of the job's own time lost (Fan et al., IPDPS 2022):

- rigid: the work since the last checkpoint plus a new setup, or everything since the start when
  no checkpoint completed yet;
- malleable: only the setup; the two-minute warning lets it save its state;
- on-demand: never preempted.

A preempted job comes back (:func:`resumed`) with its original submit time and with the time it
still needs: for rigid jobs everything after the last checkpoint plus a setup, for malleable jobs
what was left at its current size, rescaled to its full size (by its slowdown there,
:meth:`~metaq_py.policy.model.Job.slowdown`), plus a setup.
"""

from __future__ import annotations

import math
from dataclasses import replace

from metaq_py.policy.model import Job, Kind, Running

SMALL_COST = 600.0
"""Checkpoint cost, in seconds, for jobs below :data:`LARGE_JOB` nodes."""
LARGE_COST = 1200.0
"""Checkpoint cost, in seconds, for jobs of :data:`LARGE_JOB` nodes or more."""
LARGE_JOB = 1024
"""The size from which a checkpoint costs :data:`LARGE_COST`."""

_EPS = 1e-6  # seconds; absorbs float rounding when a decision runs exactly at a checkpoint


def daly_interval(cost: float, mtbf: float) -> float:
    """Daly's higher-order optimum compute time between checkpoints, in seconds."""
    if cost <= 0 or mtbf <= 0:
        raise ValueError(f"checkpoint cost and MTBF must be positive, got {cost} and {mtbf}")
    if cost >= 2 * mtbf:
        return mtbf
    r = cost / (2 * mtbf)
    return math.sqrt(2 * cost * mtbf) * (1 + math.sqrt(r) / 3 + r / 9) - cost


def checkpoint_cost(size: int) -> float:
    """The time one checkpoint takes for a job of ``size`` nodes."""
    return SMALL_COST if size < LARGE_JOB else LARGE_COST


def checkpoint_plan(size: int, runtime: float, *, mtbf: float) -> tuple[float | None, float]:
    """``(interval, cost)`` for a rigid job; the interval is ``None`` when it never checkpoints
    (Daly's interval exceeds its runtime)."""
    cost = checkpoint_cost(size)
    tau = daly_interval(cost, mtbf)
    return (None if tau > runtime else tau, cost)


def _base_and_period(r: Running) -> tuple[float, float] | None:
    job = r.job
    if job.kind is not Kind.RIGID or job.checkpoint_interval is None:
        return None
    period = job.checkpoint_interval + job.checkpoint_cost
    base = r.last_checkpoint if r.last_checkpoint is not None else r.start + job.setup
    return base, period


def last_checkpoint(r: Running, at: float) -> float | None:
    """When the last checkpoint at or before ``at`` completed (``None``: none yet)."""
    bp = _base_and_period(r)
    if bp is None:
        return r.last_checkpoint if r.last_checkpoint is not None and r.last_checkpoint <= at \
            else None
    base, period = bp
    if at < base + period - _EPS:
        return r.last_checkpoint
    k = math.floor((at - base) / period + _EPS)
    done = base + k * period
    return done if done < r.end else r.last_checkpoint


def next_checkpoint(r: Running, after: float) -> float | None:
    """When the first checkpoint strictly after ``after`` completes (``None``: no more)."""
    bp = _base_and_period(r)
    if bp is None:
        return None
    base, period = bp
    k = max(1, math.floor((after - base) / period + _EPS) + 1)
    t = base + k * period
    return t if t < r.end else None


def lost_seconds(r: Running, at: float) -> float:
    """The job's own time a preemption at ``at`` costs it (see the module docstring)."""
    job = r.job
    if job.kind is Kind.MALLEABLE:
        return job.setup
    done = last_checkpoint(r, at)
    if done is None:
        return max(0.0, at - r.start)
    return (at - done) + job.setup


def lost_node_seconds(r: Running, at: float) -> float:
    """Node-seconds a preemption at ``at`` wastes: :func:`lost_seconds` times nodes held."""
    job = r.job
    # fast paths for the common cases: arrival decisions price every running job
    if job.kind is Kind.MALLEABLE:
        return job.setup * len(r.nodes)
    if job.checkpoint_interval is None and r.last_checkpoint is None:
        return max(0.0, at - r.start) * len(r.nodes)
    return lost_seconds(r, at) * len(r.nodes)


def resumed(r: Running, now: float) -> Job:
    """The waiting job a preemption at ``now`` puts back in the queue."""
    job = r.job
    if job.kind is Kind.MALLEABLE:
        scale = len(r.nodes) / job.size if not job.serial else 1 / job.slowdown(len(r.nodes))
        # with a fixed setup (R2) what is left of the setup is not work: it starts again
        setup_left = max(0.0, r.start + job.setup - now) if job.fixed_setup else 0.0
        wall = max(0.0, r.end - now - setup_left) * scale + job.setup
        run = None if r.true_end is None else \
            max(0.0, r.true_end - now - setup_left) * scale + job.setup
        return replace(job, walltime=wall, runtime=run)
    done = last_checkpoint(r, now)
    if done is None:
        return job
    kept = done - r.start - job.setup
    run = None if job.runtime is None else max(job.setup, job.runtime - kept)
    return replace(job, walltime=max(job.setup, job.walltime - kept), runtime=run)
