"""Jobs of several shapes: which shape a decision starts.

A rigid task may accept several shapes (``#METAQ SHAPE``, after mpi_jm's task sizes): say
4 nodes for 2 hours, or 8 nodes for 1 hour, or a share of one node. Before a backfilling pass
(:mod:`metaq_py.policy.backfill`), :func:`in_shapes` puts in the queue's place of each such
job the shape of it that starts soonest, and the pass then treats that shape as the job: it
starts it, makes it the head, reserves for it or backfills it like any other job. The
:class:`~metaq_py.policy.model.Start` names the shape, so the driver runs the task in it.

When a shape starts is judged on the machine as the decision finds it, as EASY judges its
head's shadow time:

- whole nodes: now, when enough nodes are free; else the first time the running jobs'
  expected ends (:meth:`~metaq_py.policy.work.Work.releases`) have freed enough;
- a share of one node: now, when a shared node has room for its cores and GPUs or a node is
  free; else the first time a node is freed;
- never, when the shape is larger than the machine, or would not end by the allocation's end
  if it started then.

Ties go to the shape the task names first (its header's own, then its ``SHAPE`` lines in
order), so a task's first choice is kept whenever it costs nothing. The choice does not look
at the jobs ahead in the queue: a job ahead may take the nodes first, and the chosen shape then
waits as the head, exactly as a job of that one shape would. A job none of whose shapes can
ever start is left as it is, and the pass skips it as it skips any job too large for the
machine. docs/model.md, "Shapes", says why this rule.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from metaq_py.policy.model import Job
from metaq_py.policy.work import Work

__all__ = ["any_shaped", "in_shapes", "soonest_start"]


def any_shaped(work: Work, queue: Sequence[Job]) -> bool:
    """Whether some job of ``queue`` has other shapes (the snapshot says, or else we look)."""
    said = work.snap.shaped
    if said is not None:
        return said
    return any(job.shapes for job in queue)


def in_shapes(work: Work, queue: Sequence[Job]) -> Sequence[Job]:
    """``queue`` with each job of several shapes in the shape that starts soonest (see the
    module's docstring); ``queue`` itself when no job changes."""
    if not any_shaped(work, queue):
        return queue
    releases: list[tuple[float, int]] | None = None
    out: list[Job] | None = None
    for i, job in enumerate(queue):
        if not job.shapes or job.id in work.started:
            continue
        if releases is None:
            releases = list(work.releases())
        # the job itself is its first shape that fits, and the others follow in order, so a
        # strict comparison leaves a tie to the shape named first
        best, when = job, soonest_start(work, job, releases)
        for other in job.shapes:
            t = soonest_start(work, other, releases)
            if t < when:
                best, when = other, t
        if best is not job:
            if out is None:
                out = list(queue)
            out[i] = best
    return queue if out is None else out


def soonest_start(work: Work, job: Job, releases: Sequence[tuple[float, int]]) -> float:
    """When ``job`` (one shape) could start on the machine as ``work`` finds it, with the
    running jobs freeing nodes at ``releases`` (``(time, nodes)`` in time order); ``inf``:
    never."""
    if job.min_size > work.snap.total:
        return math.inf
    now = work.now
    room = work.shares
    if job.cores:
        if room is None or not room.shape.fits(job.cores, job.gpus, job.mem):
            return math.inf
        if work.free.count or room.join(job.cores, job.gpus, now + job.time_at(1, work.oracle),
                                        shadow=math.inf, mem=job.mem) is not None:
            return now
        need = 1
    else:
        need = job.min_size
    avail, when = work.free.count, now
    if avail < need:
        when = math.inf
        for t, k in releases:
            avail += k
            if avail >= need:
                when = t
                break
    if when + job.time_at(max(need, min(job.size, avail)), work.oracle) > work.end:
        return math.inf
    return when
