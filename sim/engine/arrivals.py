"""What the engine submits: a trace or a hybrid workload as lazy streams of jobs and notices.

A plain :class:`~sim.trace.loader.Trace` becomes rigid jobs with no setup and no checkpoints, which
is what the baseline schedulers assume of every job. A
:class:`~sim.workload.model.HybridWorkload` becomes rigid, malleable and on-demand jobs, plus the
advance notices of its on-demand jobs.

Both streams are generators in time order (jobs by submit, notices by issue time), built row by
row, so a million-job trace never exists as a million :class:`Job` objects at once and the
engine's event heap only ever holds the next arrival of each stream.

A job whose runtime exceeds its requested walltime is killed at the walltime by the batch
system; its runtime is capped here (trace cleaning normally did so already), so that the
``oracle`` estimates and the end the engine schedules agree.

With dependencies (SWF fields 17 and 18, ``docs/model.md``), a :class:`Precedence` stands
between the stream and the agenda: it holds back each job whose preceding job has not ended,
and releases it at ``max(own submit, preceding end + think time)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Final

import numpy as np

from metaq_py.policy.model import Job, JobId, Kind, Notice
from sim.trace.loader import Trace
from sim.workload.model import CATEGORIES, KINDS, HybridWorkload, notice_id

_MALLEABLE: Final = KINDS.index(Kind.MALLEABLE)
"""The kind code of malleable jobs in a workload's ``kind`` column."""


@dataclass(frozen=True, slots=True, eq=False)
class Feed:
    """The arrivals of one source.

    ``count`` is the number of jobs ``jobs()`` yields; ``categories`` gives the notice category
    (``none``, ``accurate``, ``early``, ``late``) of each on-demand job; ``hybrid`` says whether
    the jobs have kinds beyond rigid; ``charged`` the checkpoint time a job's runtime holds
    that is not useful work (:attr:`~sim.workload.model.HybridWorkload.charged`), where not 0.
    """

    source: Trace | HybridWorkload
    nodes: int
    count: int
    hybrid: bool
    categories: Mapping[JobId, str]
    charged: Mapping[JobId, float]

    def jobs(self) -> Iterator[Job]:
        """Every job, in submit order."""
        if isinstance(self.source, HybridWorkload):
            return _hybrid_jobs(self.source)
        return _trace_jobs(self.source)

    def notices(self) -> Iterator[Notice]:
        """Every advance notice, in issue order (none for a plain trace)."""
        if isinstance(self.source, HybridWorkload):
            return _hybrid_notices(self.source)
        return iter(())


def feed(source: Trace | HybridWorkload) -> Feed:
    """The arrivals of a plain trace or a hybrid workload."""
    if isinstance(source, HybridWorkload):
        rows = np.flatnonzero(source.category >= 0)
        ids = source.trace.jobs.id[rows].tolist()
        names = [str(c) for c in CATEGORIES]
        categories = dict(zip(ids, (names[c] for c in source.category[rows].tolist()),
                              strict=True))
        charged: dict[JobId, float] = {}
        if source.charged is not None:
            hit = np.flatnonzero(source.charged)
            charged = dict(zip(source.trace.jobs.id[hit].tolist(),
                               source.charged[hit].tolist(), strict=True))
        return Feed(source=source, nodes=source.trace.nodes, count=len(source), hybrid=True,
                    categories=categories, charged=charged)
    if isinstance(source, Trace):
        return Feed(source=source, nodes=source.nodes, count=len(source), hybrid=False,
                    categories={}, charged={})
    raise TypeError(f"cannot simulate a {type(source).__name__}; pass a Trace or a "
                    f"HybridWorkload")


def _trace_jobs(trace: Trace) -> Iterator[Job]:
    t = trace.jobs
    rigid = Kind.RIGID
    for jid, submit, size, walltime, runtime in zip(
            t.id.tolist(), t.submit.tolist(), t.nodes.tolist(), t.walltime.tolist(),
            t.runtime.tolist(), strict=True):
        yield Job(jid, rigid, size, walltime, submit, runtime=min(runtime, walltime))


def _hybrid_jobs(workload: HybridWorkload) -> Iterator[Job]:
    # what HybridJob.to_job() gives for each row, built straight from the columns: the engine
    # pays for one object per job instead of two
    t = workload.trace.jobs
    model = workload.model
    serial = model.serial  # a malleable job's (0: linear speedup)
    fixed = model.resize_fixed
    fixed_setup = model.setup_speedup == "none"
    for (jid, kind, submit, size, min_size, walltime, runtime, setup, interval, cost,
         notice) in zip(
            t.id.tolist(), workload.kind.tolist(), t.submit.tolist(), t.nodes.tolist(),
            workload.min_size.tolist(), t.walltime.tolist(), t.runtime.tolist(),
            workload.setup.tolist(), workload.checkpoint_interval.tolist(),
            workload.checkpoint_cost.tolist(), workload.notice_time.tolist(), strict=True):
        yield Job(jid, KINDS[kind], size, walltime, submit, min_size,
                  runtime if runtime <= walltime else walltime, 0, 0, setup,
                  None if interval != interval else interval, cost,
                  None if notice != notice else notice_id(jid),
                  serial=serial if kind == _MALLEABLE else 0.0,
                  resize_cost=model.resize_seconds(KINDS[kind], setup), resize_fixed=fixed,
                  fixed_setup=fixed_setup and kind == _MALLEABLE)


def _hybrid_notices(workload: HybridWorkload) -> Iterator[Notice]:
    # what HybridJob.notice() gives for each on-demand job with a notice, from the columns
    times = workload.notice_time
    rows = np.flatnonzero(~np.isnan(times) & ~np.isnan(workload.estimated_arrival))
    rows = rows[np.argsort(times[rows], kind="stable")]
    t = workload.trace.jobs
    for jid, size, arrival, walltime, issued in zip(
            t.id[rows].tolist(), t.nodes[rows].tolist(),
            workload.estimated_arrival[rows].tolist(), t.walltime[rows].tolist(),
            times[rows].tolist(), strict=True):
        yield Notice(notice_id(jid), size, arrival, walltime, issued)


Release = Callable[[Job, float], None]
"""How a :class:`Precedence` hands a held-back job to the engine: the job and when it arrives."""


class Precedence:
    """The dependencies of one run: which job waits for which, and the jobs held back.

    Built from the trace's ``preceding_job`` and ``think_time`` columns. A preceding job that is
    not an earlier row of the trace is ignored (cleaning cuts and counts those, see
    :mod:`sim.trace.cleaning`), so every chain leads back to a job with none and nothing can
    wait forever. An unknown (-1) or negative think time counts as 0.
    """

    def __init__(self, source: Trace | HybridWorkload, release: Release) -> None:
        t = source.trace.jobs if isinstance(source, HybridWorkload) else source.jobs
        row_of = {jid: row for row, jid in enumerate(t.id.tolist())}
        self.after: dict[JobId, tuple[JobId, float]] = {}
        for row, (jid, before, think) in enumerate(zip(
                t.id.tolist(), t.preceding_job.tolist(), t.think_time.tolist(), strict=True)):
            if before != -1 and row_of.get(before, row) < row:
                self.after[jid] = (before, think if think > 0 else 0.0)  # NaN > 0 is False
        self.predecessors = {before for before, _ in self.after.values()}
        self.ended: dict[JobId, float] = {}  # the final end of each predecessor that ended
        self.held: dict[JobId, list[Job]] = {}  # predecessor -> the jobs waiting for it
        self.release = release

    def __len__(self) -> int:
        """The number of jobs that wait for a preceding job."""
        return len(self.after)

    def gate(self, stream: Iterator[Job]) -> Iterator[Job]:
        """The stream without the jobs that wait: each of those is held until its preceding
        job ends, or released at once if that end is known already."""
        after, ended, held, release = self.after, self.ended, self.held, self.release
        for job in stream:
            waits = after.get(job.id)
            if waits is None:
                yield job
                continue
            end = ended.get(waits[0])
            if end is None:
                held.setdefault(waits[0], []).append(job)
            else:
                release(job, max(job.submit, end + waits[1]))

    def ended_at(self, job_id: JobId, now: float) -> None:
        """``job_id`` ended for good at ``now``: release the jobs held for it."""
        if job_id not in self.predecessors:
            return
        self.ended[job_id] = now
        after, release = self.after, self.release
        for job in self.held.pop(job_id, ()):
            release(job, max(job.submit, now + after[job.id][1]))
