"""Finding and taking back claims whose batch job is gone.

A claim is *lost* when the batch system says its job no longer exists, or when its lease has
not been renewed for ``stale_after`` (the job may be on another machine, or the batch system
cannot answer). Claims of the asking job itself are never lost: it knows its own tasks.

Every runner does this at start-up and at each heartbeat; ``metaq reset --dead`` does it by
hand and ``metaq running`` shows what it would find.
"""

from __future__ import annotations

from dataclasses import dataclass

from metaq_py.batch import BatchError, BatchSystem
from metaq_py.durations import format_duration
from metaq_py.queue.lease import Claim
from metaq_py.queue.store import Queue

__all__ = ["LeaseView", "Lost", "lost_claims", "view_leases"]


@dataclass(frozen=True, slots=True)
class LeaseView:
    """One claim as ``metaq running`` shows it: ``alive`` is what the batch system said of its
    job (``None``: it could not tell, for a job of another machine or a failed query) and
    ``age`` the seconds since its last heartbeat. ``lost`` says why it would be reclaimed."""

    claim: Claim
    alive: bool | None
    age: float
    lost: str | None


@dataclass(frozen=True, slots=True)
class Lost:
    """A claim to take back, and the reason recorded with it."""

    claim: Claim
    reason: str


def view_leases(queue: Queue, batch: BatchSystem | None, *, machine: str | None, now: float,
                own_jobid: str | None = None) -> list[LeaseView]:
    """Every claim in ``queue`` with what is known of its job. ``batch`` answers for jobs of
    ``machine``; without it only heartbeats count."""
    answers: dict[str, bool | None] = {}
    out = []
    for claim in queue.leases():
        age = max(0.0, now - claim.heartbeat)
        if claim.machine == machine and claim.jobid == own_jobid:
            out.append(LeaseView(claim, True, age, None))
            continue
        alive: bool | None = None
        if batch is not None and claim.machine == machine:
            if claim.jobid not in answers:
                try:
                    answers[claim.jobid] = batch.is_alive(claim.jobid)
                except BatchError:
                    answers[claim.jobid] = None
            alive = answers[claim.jobid]
        lost = None
        if alive is False:
            lost = f"its batch job {claim.jobid} on {claim.machine} is gone"
        elif age > queue.stale_after(claim):
            lost = (f"its lease was not renewed for {format_duration(age)} "
                    f"(stale after {format_duration(queue.stale_after(claim))})")
        out.append(LeaseView(claim, alive, age, lost))
    return out


def lost_claims(queue: Queue, batch: BatchSystem | None, *, machine: str | None, now: float,
                own_jobid: str | None = None) -> list[Lost]:
    """The claims in ``queue`` to take back now, each with its reason."""
    return [Lost(v.claim, v.lost)
            for v in view_leases(queue, batch, machine=machine, now=now, own_jobid=own_jobid)
            if v.lost is not None]
