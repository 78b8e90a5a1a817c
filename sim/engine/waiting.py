"""The engine's waiting jobs: kept in queue order, with the counts its skipping rules read and
the waitlist EASY's backfilling reads; where a preempted job waits again (:class:`Requeue`); and
the smallest size a malleable job may start at (:class:`MalleableStart`)."""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from dataclasses import replace
from enum import Enum
from typing import Final

from metaq_py.policy.model import Job, JobId, Kind
from metaq_py.policy.order import queue_key
from metaq_py.policy.waitlist import Waitlist
from sim.engine.words import word_of

LONG: Final = 1024
"""Waiting jobs from which the engine keeps a waitlist (see :class:`Waiting`)."""
SHORT: Final = 256
"""Waiting jobs under which it drops it again."""


class Requeue(str, Enum):
    """Where a preempted job waits again. Either way its turnaround counts from its original
    submit (the ledger keeps it); only its place in the queue differs."""

    ORIGINAL = "original"
    """With its original submit time: it keeps its place in the queue (the default)."""
    AT_PREEMPTION = "at-preemption"
    """As if submitted at the preemption: behind every job of its rank submitted before."""

    def __str__(self) -> str:
        return self.value

    @classmethod
    def of(cls, word: str) -> Requeue:
        """The choice named ``word``; ValueError with one sentence for any other word."""
        return word_of(cls, "requeue", word)


class MalleableStart(str, Enum):
    """The smallest size at which a waiting malleable job may start."""

    LARGEST = "largest"
    """Its minimum: it starts at the largest size in ``[min_size, size]`` that the policy
    allows (the default)."""
    FULL = "full"
    """Its full size, as a rigid job would; running, it keeps its minimum for shrinking."""

    def __str__(self) -> str:
        return self.value

    @classmethod
    def of(cls, word: str) -> MalleableStart:
        """The choice named ``word``; ValueError with one sentence for any other word."""
        return word_of(cls, "malleable_start", word)


class Waiting:
    """The waiting jobs, sorted by the one queue order (:func:`~metaq_py.policy.order.queue_key`),
    so every decision is told ``ordered=True``.

    Besides the list (``jobs``) it keeps the jobs by id (a Start names its job by id), how many
    are on-demand jobs (``ondemand``, handed to the snapshot), and the ``min_size`` of every
    waiting job, counted per size (:meth:`fits_none`: whether any waiting job could start on
    some number of free nodes, without a pass over the queue).

    Given the ``oracle`` setting of the decisions, it also keeps a :attr:`waitlist`
    (:mod:`metaq_py.policy.waitlist`) for the snapshot while the queue is long: built once
    ``long`` jobs wait, dropped when fewer than ``short`` do (``None`` meanwhile). Below that a
    decision's walk costs less than keeping the index up to date at every change (Theta
    2022's queue peaks at 341 jobs, and its run took 10% longer with a waitlist throughout).
    While it exists it holds the same jobs in the same order: each goes in right behind the
    job it follows in the list.

    ``requeue`` is where a preempted job waits again (:class:`Requeue`), and
    ``malleable_start`` the smallest size a waiting malleable job may start at
    (:class:`MalleableStart`): under ``full`` it waits as :meth:`as_waiting` shows it, and
    :meth:`placed` gives it back its real minimum when it starts.
    """

    def __init__(self, oracle: bool | None = None, *, long: int = LONG,
                 short: int = SHORT, requeue: str = "original",
                 malleable_start: str = "largest") -> None:
        self._late = Requeue.of(requeue) is Requeue.AT_PREEMPTION
        self._full = MalleableStart.of(malleable_start) is MalleableStart.FULL
        self._minimum: dict[JobId, int] = {}  # real min_size of the jobs seen at full size
        self.jobs: list[Job] = []
        self.waitlist: Waitlist | None = None
        self._oracle = oracle
        self._long, self._short = long, short
        self.by_id: dict[JobId, Job] = {}
        self.ondemand = 0
        # how many waiting jobs have each min_size, and the distinct ones in ascending order
        # (smallest[0] is the least any waiting job needs)
        self._sizes: dict[int, int] = {}
        self._smallest: list[int] = []

    def __len__(self) -> int:
        return len(self.jobs)

    def submit(self, job: Job) -> bool:
        """A new job waits; True when it went to the tail of the queue (behind every other)."""
        self._known(job)
        jobs = self.jobs
        if not jobs or queue_key(job) >= queue_key(jobs[-1]):
            jobs.append(job)
            if self.waitlist is not None:
                self.waitlist.append(job)
            else:
                self._list_if_long()
            return True
        self._insert(job)
        return False

    def requeue(self, job: Job, *, at: float | None = None) -> None:
        """A preempted job (``at``: the preemption's time) or a killed one waits again, in its
        place by queue order; under ``requeue="at-preemption"`` a preempted job's place is
        that of a job submitted ``at`` (a killed one keeps its own)."""
        if at is not None and self._late:
            job = replace(job, submit=at)
        job = self.as_waiting(job)
        self._known(job)
        self._insert(job)

    def as_waiting(self, job: Job) -> Job:
        """``job`` as the policy sees it wait: under ``malleable_start="full"`` a malleable job
        with its minimum raised to its full size (the real one kept for :meth:`placed`)."""
        if self._full and job.kind is Kind.MALLEABLE and job.min_size < job.size:
            self._minimum[job.id] = job.min_size
            return replace(job, min_size=job.size)
        return job

    def placed(self, job: Job) -> Job:
        """Waiting ``job`` as it starts: with its real minimum (see :meth:`as_waiting`)."""
        real = self._minimum.pop(job.id, None) if self._minimum else None
        return job if real is None else replace(job, min_size=real)

    def _insert(self, job: Job) -> None:
        """Put ``job`` behind every waiting job whose key is at most its own."""
        jobs = self.jobs
        i = bisect_right(jobs, queue_key(job), key=queue_key)
        jobs.insert(i, job)
        if self.waitlist is not None:
            self.waitlist.insert_after(jobs[i - 1] if i else None, job)
        else:
            self._list_if_long()

    def _list_if_long(self) -> None:
        """Build the waitlist once the queue is long (the class docstring)."""
        oracle = self._oracle
        if oracle is not None and len(self.jobs) >= self._long:
            waitlist = Waitlist(oracle=oracle)
            for job in self.jobs:
                waitlist.append(job)
            self.waitlist = waitlist

    def take(self, job_id: JobId) -> Job:
        """The waiting job ``job_id``, which a decision starts (KeyError: no such job). It
        stays in :attr:`jobs` until :meth:`remove` takes the decision's starts out at once."""
        job = self.by_id.pop(job_id)
        if job.kind is Kind.ONDEMAND:
            self.ondemand -= 1
        return job

    def remove(self, started: list[Job]) -> None:
        """Take the jobs of one decision's starts out of :attr:`jobs`: a bisect each, rather
        than a pass over a queue that is often hundreds of jobs long."""
        jobs = self.jobs
        for job in started:
            if jobs[0] is job:  # the head, where a decision starts jobs first: no search
                del jobs[0]
            else:
                i = bisect_left(jobs, queue_key(job), key=queue_key)
                while jobs[i] is not job:  # past the jobs with an equal key
                    i += 1
                del jobs[i]
            if self.waitlist is not None:
                self.waitlist.remove(job)
            self._count_out(job.min_size)
        if self.waitlist is not None and len(jobs) < self._short:
            self.waitlist = None

    def fits_none(self, free: int) -> bool:
        """Whether no waiting job could start on ``free`` nodes."""
        return not self._smallest or free < self._smallest[0]

    def _known(self, job: Job) -> None:
        self.by_id[job.id] = job
        if job.kind is Kind.ONDEMAND:
            self.ondemand += 1
        n = self._sizes.get(job.min_size)
        if n:
            self._sizes[job.min_size] = n + 1
        else:
            self._sizes[job.min_size] = 1
            insort(self._smallest, job.min_size)

    def _count_out(self, size: int) -> None:
        n = self._sizes[size]
        if n > 1:
            self._sizes[size] = n - 1
        else:
            del self._sizes[size]
            del self._smallest[bisect_left(self._smallest, size)]
