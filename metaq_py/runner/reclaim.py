"""Finding and taking back claims whose batch job is gone.

A claim is *lost* when the batch system says its job no longer exists, or when its lease has
not been renewed for ``stale_after`` (the job may be on another machine, or the batch system
cannot answer), or when its runner recorded that it ended and could not be moved
(:data:`~metaq_py.queue.lease.ENDED_SUFFIX`). A claim whose job the batch system says is
alive is never lost, whatever its lease, and claims of the asking job itself never are: it
knows its own tasks.

Liveness never compares two machines' clocks. A runner measures "not renewed" on its own
clock: :class:`Sightings` remembers when it first saw each lease as it is, and a lease counts
as unrenewed for as long as the runner has seen it unchanged. The one-shot commands
(``metaq running``, ``metaq reset --dead``) have only one look, and estimate the age from
the lease's time.

Every runner does this at start-up and at each heartbeat; ``metaq reset --dead`` does it by
hand and ``metaq running`` shows what it would find.
"""

from __future__ import annotations

from dataclasses import dataclass

from metaq_py.batch import BatchError, BatchSystem
from metaq_py.durations import format_duration
from metaq_py.queue.lease import Claim, ended_code
from metaq_py.queue.store import Queue

__all__ = ["LeaseView", "Lost", "Sightings", "lost_claims", "view_leases"]


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


class Sightings:
    """A runner's own record of the leases it has seen: for each claim, its lease's time as
    last seen and when (on the runner's clock) it was first seen so. ``watched`` are the
    claims of other jobs that may be lost: unchanged so far, and of no job the batch system
    says is alive."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[float, float]] = {}
        self.renewed: set[str] = set()
        """Claims whose lease this runner has seen change: alive by their own record."""
        self.watched: dict[str, float] = {}
        """The claims that may be lost, and when each will be if it stays unrenewed (on the
        runner's clock)."""

    def unchanged_for(self, claim: Claim, now: float) -> float:
        """Seconds (on the runner's clock ``now``) ``claim``'s lease has been seen as it is."""
        key = str(claim.path)
        seen = self._seen.get(key)
        if seen is None or seen[0] != claim.heartbeat:
            if seen is not None:
                self.renewed.add(key)
            self._seen[key] = seen = (claim.heartbeat, now)
        return max(0.0, now - seen[1])

    def forget_others(self, keys: set[str]) -> None:
        """Forget the claims that are no longer there."""
        for key in [k for k in self._seen if k not in keys]:
            del self._seen[key]
        self.renewed &= keys
        for key in [k for k in self.watched if k not in keys]:
            del self.watched[key]


def view_leases(queue: Queue, batch: BatchSystem | None, *, machine: str | None, now: float,
                own_jobid: str | None = None,
                sightings: Sightings | None = None) -> list[LeaseView]:
    """Every claim in ``queue`` with what is known of its job. ``batch`` answers for jobs of
    ``machine``; without it only heartbeats count. With ``sightings`` (a runner's), a lease's
    age is how long this runner has seen it unchanged, on its own clock ``now``."""
    answers: dict[str, bool | None] = {}
    out = []
    claims = queue.leases()
    if sightings is not None:
        sightings.forget_others({str(c.path) for c in claims})
    for claim in claims:
        age = max(0.0, now - claim.heartbeat) if sightings is None \
            else sightings.unchanged_for(claim, now)
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
        if alive is True:
            pass  # never taken back while its job runs, whatever its lease says
        elif alive is False:
            lost = f"its batch job {claim.jobid} on {claim.machine} is gone"
        elif claim.host is None and ended_code(claim.path) is not None:
            lost = f"its job {claim.jobid} recorded its end and could not move it"
        elif age > queue.stale_after(claim):
            lost = (f"its lease was not renewed for {format_duration(age)} "
                    f"(stale after {format_duration(queue.stale_after(claim))})")
        if sightings is not None:
            key = str(claim.path)
            if alive is not True and lost is None and key not in sightings.renewed:
                sightings.watched[key] = now - age + queue.stale_after(claim)
            else:
                sightings.watched.pop(key, None)
        out.append(LeaseView(claim, alive, age, lost))
    return out


def lost_claims(queue: Queue, batch: BatchSystem | None, *, machine: str | None, now: float,
                own_jobid: str | None = None,
                sightings: Sightings | None = None) -> list[Lost]:
    """The claims in ``queue`` to take back now, each with its reason."""
    return [Lost(v.claim, v.lost)
            for v in view_leases(queue, batch, machine=machine, now=now, own_jobid=own_jobid,
                                 sightings=sightings)
            if v.lost is not None]
