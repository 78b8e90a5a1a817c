"""Deciding, and applying a decision to the Cluster and then to processes.

Each action of a :class:`~metaq_py.policy.model.Decision` goes to the Cluster first, through
:meth:`Cluster.apply <metaq_py.cluster.Cluster.apply>` (the one place the model's state
changes), and then to the tasks it names: a start claims its task in the queue and puts it on
the roster to launch; a preemption stops its victim; a shrink or expansion resizes a running
task (see :mod:`metaq_py.runner.tasks.resizing`); reservations only change the Cluster. A task that
another runner claimed first makes the rest of the decision moot: the scheduler decides again
on a fresh view of the queue.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from metaq_py.cluster import Cluster, ClusterError
from metaq_py.outcomes import SKIPPED as SKIPPED_WORD
from metaq_py.policy import (
    Expand,
    Job,
    Kind,
    Preempt,
    Release,
    Reserve,
    Scheduler,
    Shrink,
    Start,
)
from metaq_py.queue.fit import gpu_ids_for
from metaq_py.queue.index import Task
from metaq_py.queue.lease import Claim
from metaq_py.runner.context import Context
from metaq_py.runner.offers import Offers, past_runs
from metaq_py.runner.tasks.live_task import LiveTask, Why
from metaq_py.runner.tasks.placing import in_one_block, named_nodes, usable_for
from metaq_py.runner.tasks.resizing import Resizer
from metaq_py.runner.tasks.roster import Roster

if TYPE_CHECKING:
    from metaq_py.runner.tasks.outputs import Outputs

__all__ = ["Decider"]

class CannotClaim(Exception):
    """A claim that could not write the queue (its lease or its rename failed: a full disk,
    a quota, a read-only file system): the task stays where it was, to be claimed later."""


_MAX_REDECIDE = 8
"""Decisions made again in one pass after a lost claim, at most."""


class _Skipped:
    """The kind of :data:`SKIPPED`."""


SKIPPED = _Skipped()
"""What :meth:`Decider.claim` gives for a task it skipped, its outputs all there."""


class Decider:
    """Asks the scheduler what to do and does it. ``wake`` is the time the last decision asked
    to be woken at (``None``: no such time); ``max_tasks`` caps the tasks held at once, on
    demand ones excepted."""

    def __init__(self, ctx: Context, cluster: Cluster, roster: Roster, offers: Offers,
                 resizer: Resizer, scheduler: Scheduler, *, max_tasks: int) -> None:
        self.ctx = ctx
        self.cluster = cluster
        self.roster = roster
        self.offers = offers
        self.resizer = resizer
        self.scheduler = scheduler
        self.max_tasks = max_tasks
        self.wake: float | None = None
        self.claims_after = float("-inf")
        """No claim is tried before this time: the last one could not write the queue."""
        self.claims_paused = False
        """Whether that was said (once, until a claim goes through again)."""
        self.outputs: Outputs | None = None
        """The look at a claimed task's outputs (``CREATES``), its folders' listings kept;
        made for the first task that names outputs (a campaign without loads none of it)."""
        self.skips = 0
        """Tasks this runner skipped, their outputs all there."""

    def decide(self, now: float, pass_no: int) -> None:
        """Decide at ``now`` and apply the decision; again, on a fresh view, after a lost
        claim (a few times at most: then at the next pass)."""
        self.wake = None
        ctx = self.ctx
        if now < self.claims_after:
            self.wake = self.claims_after  # the queue could not be written a moment ago
            return
        end = ctx.end - ctx.options.margin - ctx.options.grace
        for _ in range(_MAX_REDECIDE):
            waiting = self.offers.waiting(pass_no)
            if self.offers.node_memory:
                self.cluster.know_memory(self.offers.node_memory)  # asked at the first MEM
            snap = self.cluster.snapshot(now=now, waiting=waiting, ordered=True, end=end,
                                         shaped=self.offers.shaped)
            decision = self.scheduler.decide(snap)
            self.wake = decision.wake if decision.wake is not None and decision.wake > now \
                else None
            if self._apply(decision.actions, now):
                return

    def _apply(self, actions: Iterable[object], now: float) -> bool:
        """Apply one decision; ``False`` when a claim was lost and the rest was abandoned.

        ``claimed`` holds the on-demand tasks claimed ahead of their start (before anything
        is stopped for them); whatever is left there at the end goes back to the queue."""
        claimed: dict[str, LiveTask] = {}
        actions = tuple(actions)
        named = named_nodes(actions)
        victims: dict[str | None, list[str]] = {}
        roster = self.roster
        slots = self.max_tasks - len(roster.live) - len(roster.to_launch)
        for action in actions:
            try:
                job: Job | None = None
                if isinstance(action, Start):
                    task, job = self.offers.offered(action.job)
                    job = job.in_shape(action.shape)
                    action = self._in_one_block(action, job, named)
                    if job.kind is not Kind.ONDEMAND:
                        if slots <= 0:
                            continue  # the cap: decide again when a task ends
                        slots -= 1
                    ahead = claimed.get(action.job) or self.claim(task, job)
                    if ahead is None:
                        return self._give_back(claimed)
                    if isinstance(ahead, _Skipped):
                        slots += job.kind is not Kind.ONDEMAND
                        self.wake = now  # its nodes are free: decide again at once
                        continue
                    claimed[action.job] = ahead
                    notice = job.notice if job.notice in self.cluster.notices else None
                else:
                    for_job = getattr(action, "for_job", None)
                    if for_job is not None and for_job not in claimed \
                            and self.offers.is_offered(for_job):
                        # Claim the on-demand task before stopping anything for it.
                        ahead = self.claim(*self.offers.offered(for_job))
                        if ahead is None:
                            return self._give_back(claimed)
                        if isinstance(ahead, _Skipped):
                            continue
                        claimed[for_job] = ahead
                r = self.cluster.apply(action, now=now, job=job)
            except CannotClaim as e:
                # A full disk, a quota, a read-only queue: no claim now, never a crash.
                self._give_back(claimed)
                self.claims_after = now + self.ctx.queue.config.poll_interval
                self.wake = self.claims_after
                if not self.claims_paused:
                    self.ctx.say(f"cannot claim now: {e}; claims wait until the queue can "
                                 f"be written again")
                self.claims_paused = True
                return True
            except ClusterError as e:
                # A policy bug or a stale view: never act on it, decide again next pass.
                self.ctx.say(f"the {self.scheduler.name} scheduler's {action!r} was refused: "
                             f"{e}")
                break
            events = self.ctx.events
            if isinstance(action, Start):
                assert r is not None and job is not None
                self._started(claimed.pop(action.job), r.nodes, victims.get(action.job, ()))
                if notice is not None and job.kind is Kind.ONDEMAND:
                    events.write("release", notice=notice, reason="redeemed")
            elif isinstance(action, Preempt):
                from metaq_py.policy.checkpoint import lost_node_seconds  # on-demand only
                assert r is not None
                victim = roster.live[action.job]
                events.write("preempt", task=action.job, for_task=action.for_job,
                             lost_node_seconds=lost_node_seconds(r, now))
                victims.setdefault(action.for_job, []).append(action.job)
                roster.keep_hosts(victim, victim.node_ids)
                victim.stop(Why.PREEMPT, now=now, for_task=action.for_job)
            elif isinstance(action, Shrink | Expand):
                assert r is not None
                self.resizer.resize(action, tuple(r.nodes), now)
                if isinstance(action, Shrink):
                    victims.setdefault(action.for_job, []).append(action.job)
            elif isinstance(action, Reserve):
                events.write("reserve", notice=action.notice, hosts=self.ctx.hosts(action.nodes))
            elif isinstance(action, Release):
                events.write("release", notice=action.notice, reason="expired")
        self._give_back(claimed)
        return True

    def _in_one_block(self, start: Start, job: Job, named: Counter[int]) -> Start:
        """``start`` moved inside one block of neighbouring nodes where it spans several and
        one block has room (see :mod:`metaq_py.runner.tasks.placing`); ``named`` is kept up to
        date. Only batch tasks on free nodes move: a share has one node, and an on-demand
        task or a borrower takes the nodes held for it."""
        if len(start.nodes) <= 1 or job.cores or job.kind is Kind.ONDEMAND \
                or start.borrowed is not None:
            return start
        usable = usable_for(start.nodes, named, self.cluster.free, self.roster.draining)
        moved = in_one_block(start.nodes, self.roster.blocks.blocks, usable)
        if moved is None:
            return start
        named.subtract(start.nodes)
        named.update(moved)
        return Start(start.job, moved, start.borrowed, start.shape)

    def _give_back(self, claimed: dict[str, LiveTask]) -> bool:
        """Requeue tasks claimed ahead for a start that did not come (no attempt counted);
        ``False``, for the caller to return when a lost claim ends the decision."""
        for live in claimed.values():
            self.roster.requeue_unlaunched(live, "its on-demand start was abandoned")
        claimed.clear()
        return False

    def claim(self, task: Task, job: Job) -> LiveTask | _Skipped | None:
        """Claim ``task`` in the queue; ``None`` when another runner took it first,
        :data:`SKIPPED` when its outputs were all there (it is in ``finished/`` now)."""
        ctx = self.ctx
        try:
            claim = ctx.queue.claim(task, machine=ctx.machine, jobid=ctx.jobid, host=ctx.host,
                                    pid=os.getpid())
        except OSError as e:
            raise CannotClaim(f"{task.id} ({e.strerror or e})") from None
        if self.claims_paused:
            self.claims_paused = False
            ctx.say("claims go on: the queue can be written again")
        if claim is None:
            self.offers.claim_lost(task.id)
            return None
        over = self.offers.throttles.over(claim.id)
        if over is not None:  # another runner started one of its array in the same instant
            with contextlib.suppress(OSError):
                ctx.queue.requeue(claim, reason=over, started=False)
            self.offers.claim_lost(task.id)
            return None
        if claim.spec.creates and not claim.spec.force and self._skipped(claim):
            self.offers.claim_lost(task.id)
            return SKIPPED
        if claim.spec.shapes and job.shape <= len(claim.spec.shapes):
            # the claim runs in the shape the policy chose (see metaq_py.policy.shapes)
            claim = replace(claim, spec=claim.spec.in_shape(job.shape))
        history = past_runs(claim)
        spec = claim.spec
        sig = signal.Signals[f"SIG{spec.signal.name}"] if spec.signal else signal.SIGTERM
        grace = spec.signal.before if spec.signal else ctx.options.grace
        ondemand = job.kind is Kind.ONDEMAND
        instant = self.offers.arrived_now(task.id) if ondemand else None
        limit = spec.time_limit if spec.time_limit is not None \
            else ctx.queue.config.defaults.time_limit
        return LiveTask(claim=claim, job=job, node_ids=(), hosts=(), gpu_ids=None,
                        attempt=history.runs + 1, resume=history.resume, grace=grace,
                        stop_signal=sig, instant=instant, notice=job.notice,
                        time_limit=limit)

    def _skipped(self, claim: Claim) -> bool:
        """Whether ``claim`` was skipped, every output it ``CREATES`` existing (moved to
        ``finished/``, its ``end`` event saying ``skipped``); a look that cannot be made is
        said, and the task runs."""
        if self.outputs is None:
            from metaq_py.runner.tasks.outputs import Outputs
            self.outputs = Outputs(self.ctx.queue.root)
        look = self.outputs.look(claim.spec, claim.program.env if claim.program else None)
        if look.problem is not None:
            self.ctx.say(f"{claim.id}, {look.problem}; it runs, its outputs unknown")
        if not look.done:
            return False
        self.skips += 1
        moved = self.ctx.queue.skip(claim, reason="every output it CREATES exists")
        if moved is not None:
            self.ctx.events.write(
                "end", task=claim.id, attempt=0, hosts=[], outcome=SKIPPED_WORD,
                exit_code=None, signal=None, seconds=0.0, node_seconds=0.0, gpu_seconds=0.0,
                core_seconds=0.0, project=claim.spec.project, user=claim.user,
                kind=str(claim.spec.type))
        return True

    def _started(self, live: LiveTask, node_ids: tuple[int, ...],
                 lenders: Iterable[str]) -> None:
        live.node_ids = tuple(node_ids)
        live.hosts = self.ctx.hosts(live.node_ids)
        placed = self.cluster.placements.get(live.id)
        if placed is not None:  # a share: the ids the Cluster gave it on its node
            ids = self.ctx.alloc.gpu_ids
            live.gpu_ids = tuple(ids[i] for i in placed.gpus) if ids else None
            live.cores = placed.cores
        else:
            live.gpu_ids = gpu_ids_for(live.claim.spec.gpus, len(node_ids),
                                       self.ctx.alloc.gpu_ids)
        live.lenders = tuple(lenders)
        self.roster.add(live)
