"""The policies a machine's real scheduler is compared with: what it may have been.

- ``EASY on estimates``: EASY backfilling planning with the requested walltimes, as a
  production scheduler does;
- ``EASY on runtimes``: the same with every job's true runtime known (the oracle);
- ``conservative``: conservative backfilling on the requested walltimes;
- ``FCFS``: first come, first served without backfilling: the queue's head starts when it
  fits, and nothing passes it.

The first three are the policy core's own schedulers (:func:`metaq_py.policy.make_scheduler`).
FCFS is not one of them (no site runs it, and the on-demand mechanisms never sit on it), so
it is built here on the core's own decision frame: :class:`Fcfs` is a
:class:`~metaq_py.policy.mechanisms.Scheduler` whose decision is one filling pass over the
queue in order (:func:`~metaq_py.policy.order.in_order_view`) that stops at the first job
that does not fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from metaq_py.policy import make_scheduler
from metaq_py.policy.mechanisms import Backfill, Scheduler
from metaq_py.policy.model import NOTHING, Decision, Job
from metaq_py.policy.order import in_order_view
from metaq_py.policy.snapshot import Snapshot
from metaq_py.policy.work import Work

__all__ = ["CANDIDATES", "Fcfs", "candidates", "fcfs_fill"]

CANDIDATES = ("EASY on estimates", "EASY on runtimes", "conservative", "FCFS")
"""The candidates, in the order tables list them."""


def fcfs_fill(work: Work, queue: Sequence[Job]) -> None:
    """Start jobs from the head of ``queue`` while they fit in the free nodes; stop at the
    first that does not (no job ever passes an earlier one)."""
    pool = work.free
    started = work.started
    for job in queue:
        if job.id in started:
            continue
        if job.size > pool.count:
            return
        work.start(job, pool.take(job.size))


@dataclass(frozen=True, slots=True)
class Fcfs(Scheduler):
    """First come, first served, without backfilling."""

    def _baseline(self, snap: Snapshot) -> Decision:
        if not snap.waiting or not snap.free:
            return NOTHING
        work = Work(snap, oracle=self.oracle)
        fcfs_fill(work, in_order_view(snap.waiting, ordered=snap.ordered))
        return work.decision()


def candidates() -> dict[str, Scheduler]:
    """Each candidate policy by its name in :data:`CANDIDATES`."""
    return {
        "EASY on estimates": make_scheduler("easy"),
        "EASY on runtimes": make_scheduler("easy", oracle=True),
        "conservative": make_scheduler("conservative"),
        "FCFS": Fcfs("fcfs", Backfill.EASY),
    }
