"""A tiny driver for policy tests: a Cluster, a scheduler, a waiting list and a clock.

It plays the part the simulator and the live runner play for real, with no event queue: tests
move the clock, tell it what happened, and call :meth:`World.decide`, which applies the
decision, requeues preempted jobs and checks every cluster invariant after each action.
"""

from __future__ import annotations

from collections.abc import Iterable

from metaq_py.cluster import Cluster
from metaq_py.policy import (
    Decision,
    Job,
    Notice,
    Preempt,
    Running,
    Scheduler,
    Snapshot,
    Start,
    make_scheduler,
)
from metaq_py.policy.checkpoint import lost_seconds, resumed
from metaq_py.policy.model import Kind


def job(jid: object, size: int, walltime: float = 100.0, *, kind: Kind = Kind.RIGID,
        submit: float = 0.0, **kw: object) -> Job:
    """A Job with test-friendly defaults."""
    return Job(jid, kind, size, walltime, submit, **kw)  # type: ignore[arg-type]


class World:
    """A cluster driven by one scheduler, with a hand-moved clock."""

    def __init__(self, total: int, scheduler: Scheduler | str = "easy", *,
                 end: float = float("inf"), **options: object) -> None:
        self.cluster = Cluster(total)
        self.scheduler = scheduler if isinstance(scheduler, Scheduler) else \
            make_scheduler(scheduler, **options)  # type: ignore[arg-type]
        self.waiting: dict[object, Job] = {}
        self.now = 0.0
        self.end = end
        self.lost: dict[object, float] = {}
        """Seconds of its own time each preempted job lost, summed."""
        self.decisions: list[Decision] = []

    def submit(self, *jobs: Job) -> None:
        for j in jobs:
            self.waiting[j.id] = j

    def run(self, j: Job, nodes: Iterable[int], *, start: float = 0.0,
            checkpoint: float | None = None) -> Running:
        """Put ``j`` on ``nodes`` directly, as if started at ``start``."""
        r = self.cluster.start(j, tuple(nodes), now=start)
        if checkpoint is not None:
            r = self.cluster.checkpoint(j.id, at=checkpoint)
        return r

    def notice(self, nid: str, nodes: int, arrival: float, *, issued: float | None = None,
               walltime: float = 100.0) -> None:
        self.cluster.add_notice(Notice(nid, nodes, arrival, walltime,
                                       self.now if issued is None else issued))

    def finish(self, jid: object) -> None:
        self.cluster.finish(jid, now=self.now)

    def snapshot(self) -> Snapshot:
        return self.cluster.snapshot(now=self.now, waiting=list(self.waiting.values()),
                                     end=self.end)

    def decide(self, at: float | None = None) -> Decision:
        if at is not None:
            self.now = at
        d = self.scheduler.decide(self.snapshot())
        self.decisions.append(d)
        for a in d.actions:
            res = self.cluster.apply(a, now=self.now,
                                     job=self.waiting.get(a.job) if isinstance(a, Start) else None)
            if isinstance(a, Start):
                del self.waiting[a.job]
            elif isinstance(a, Preempt):
                assert res is not None
                self.lost[a.job] = self.lost.get(a.job, 0.0) + lost_seconds(res, self.now)
                self.waiting[a.job] = resumed(res, self.now)
            self.cluster.check()
        return d

    def holder(self, jid: object) -> Running | None:
        return self.cluster.running.get(jid)
