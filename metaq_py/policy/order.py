"""The queue order: which waiting job comes first.

There is one order in metaq-py, used by the live runner, the simulator and every scheduler:
folder rank first (``priority/`` before ``todo/``), then ``PRIORITY`` (higher first), then the
original submit time (earlier first). A preempted job keeps its original submit time, so it
resumes ahead of work submitted after it. Ties keep the order the driver passed, so a decision
never depends on anything but its input.

A queue may ask for larger tasks first among those of equal rank and priority
(``order: largest-first`` in ``metaq.yaml``, :func:`metaq_py.queue.index.order_key`). The runner
then hands the decision its waiting jobs in that order with ``ordered=True``, and the policy keeps
whatever order it is given; :func:`queue_key` is the default order, the one the simulator
replays traces in.

The on-demand mechanisms put on-demand jobs that could not start at once at the head of the
queue, ahead of all batch work (:func:`ondemand_first`); the baseline schedulers do not.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from metaq_py.policy.model import Job, Kind


def queue_key(job: Job) -> tuple[int, int, float]:
    """The sort key of a waiting job: ``(rank, -priority, submit)``."""
    return (job.rank, -job.priority, job.submit)


def in_order(jobs: Iterable[Job], *, ordered: bool = False) -> list[Job]:
    """The jobs in queue order; ``ordered`` says they already are (no sort needed)."""
    return list(jobs) if ordered else sorted(jobs, key=queue_key)


def in_order_view(jobs: Sequence[Job], *, ordered: bool = False) -> Sequence[Job]:
    """:func:`in_order` without the copy when ``jobs`` is ordered: a read-only view for a
    decision, which never mutates its snapshot."""
    return jobs if ordered else sorted(jobs, key=queue_key)


def ondemand_first(jobs: Sequence[Job]) -> list[Job]:
    """Stable partition: on-demand jobs first, each part keeping its queue order."""
    return list(split_ondemand(jobs)[1])


def any_ondemand(jobs: Iterable[Job]) -> bool:
    """Whether any of ``jobs`` is on-demand."""
    ondemand = Kind.ONDEMAND
    for job in jobs:  # noqa: SIM110 - a plain loop is cheaper in CPython 3.11 than any()
        if job.kind is ondemand:
            return True
    return False


def split_ondemand(jobs: Sequence[Job]) -> tuple[list[Job], Sequence[Job]]:
    """``(on-demand jobs, the queue with them first)``, both in queue order.

    One pass over ``jobs`` when there is no on-demand job, the usual case, and then the
    queue is ``jobs`` itself, not a copy.
    """
    ondemand = Kind.ONDEMAND  # a local: this runs over the whole queue at every decision
    head = [job for job in jobs if job.kind is ondemand]
    if not head:
        return head, jobs
    return head, head + [job for job in jobs if job.kind is not ondemand]
