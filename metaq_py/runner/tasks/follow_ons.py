"""Follow-ons: the next short task, handed to the launch agent before its hosts are free.

A task that ends every few milliseconds makes its slot wait for a round trip: the agent says
the task is over, the runner's loop settles it, decides, claims the next task, prepares it and
hands it back, and only then does the agent start it. HyperQueue's workers prefetch tasks for
the same reason. Here, while tasks run short, the runner claims and prepares the task that
would start on a running task's hosts when it ends, and hands it to the agent as that task's
*follow-on*: the agent starts it the moment it has reaped the task before it
(:mod:`metaq_py.launch.agent`). The loop settles the ended task and takes the follow-on's
start later, off the slot's path.

**When.** Only where the decision the runner would make at the end is known now:

- the launch pause is 0 (a follow-on starts at once, where a pause would space it), the launch
  agent serves, and the runner is not stopping;
- no on-demand work waits, and no notice is live: then no decision stops a running task for
  another (preemptions and shrinks are for on-demand work), so a running task's hosts go to
  the first waiting task that fits them;
- the follow-on is the first waiting task in the queue's order (nothing waits ahead of it, so
  EASY reserves nothing it could delay), rigid, of one shape, and the same size as the running
  task: as many whole nodes, or, as a share, as many cores and GPUs, which it then takes (the
  Cluster places it on them: :meth:`Cluster.start <metaq_py.cluster.Cluster.start>` with
  ``at``); and it fits in what is left of the allocation;
- the running task is rigid, started by the agent, not being stopped, and has run less than
  :data:`SHORT_RUN`; and the last :data:`RECENT` tasks that ended here each ran less than that
  too. Long tasks never get follow-ons, so no task is held claimed for long. A follow-on may
  have a follow-on of its own, two deep at most.

**Withdrawn**, and put back in the queue as never started (its logbook says ``returned``, so
its next start is neither a later attempt nor a resumption), when the task before it is
stopped (a cancel, a lost claim, the runner stopping: :meth:`LiveTask.stop
<metaq_py.runner.tasks.live_task.LiveTask.stop>` withdraws first), when it has waited
:data:`HOLD` seconds, and before any decision made while on-demand work waits or a notice is
live (that decision waits for the answers). The agent answers each withdrawal in order with
the exits, so a follow-on is either started or withdrawn, never both: one that started before
its withdrawal arrived runs, and is stopped if the runner is stopping.

**Promoted** when the task before it ends: the loop gives it that task's nodes in the Cluster
and puts it on the roster as *starting*, exactly as a start handed to the agent, before any
other decision can see the nodes free. Its run is counted from that time.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from metaq_py.cluster import Cluster, ClusterError
from metaq_py.launch.agent_link import AgentLink, AgentTask
from metaq_py.policy import Job, Kind
from metaq_py.policy.shares import Placement
from metaq_py.queue.index import Task
from metaq_py.runner.context import Context
from metaq_py.runner.offers import Offers, gpu_ids_for
from metaq_py.runner.tasks.live_task import LiveTask, Why
from metaq_py.runner.tasks.roster import Roster

__all__ = ["HOLD", "RECENT", "SHORT_RUN", "FollowOn", "FollowOns"]

SHORT_RUN = 1.0
"""Seconds: follow-ons are made only while tasks run shorter than this (see the module text)."""

RECENT = 4
"""How many of the last tasks to end must have run short before follow-ons are made."""

HOLD = 1.0
"""Seconds a follow-on may wait for the task before it to end, then it goes back."""


@dataclass(slots=True, eq=False)
class FollowOn:
    """``live``, handed to the agent to start when ``after`` ends, on its hosts (and, for a
    share, its cores and GPUs); ``token`` is its start's (to withdraw it by), ``promoted``
    when ``after`` ended (``None``: not yet)."""

    live: LiveTask
    after: LiveTask
    link: AgentLink
    token: int
    placement: Placement | None = None
    """A share's node, cores and GPUs: those of the share before it."""
    withdrawn: bool = False
    promoted: float | None = None

    def withdraw(self) -> None:
        """Ask the agent not to start it (it answers in order with the exits)."""
        if not self.withdrawn and self.promoted is None:
            self.withdrawn = True
            self.link.withdraw(self.token)


Claimer = Callable[[Task, Job], "LiveTask | None"]
"""Claims a waiting task for a start (:meth:`Decider.claim <metaq_py.runner.decide.Decider>`);
``None`` when another runner took it first."""

HandOver = Callable[[LiveTask, LiveTask, int, float], "FollowOn | None"]
"""Prepares a follow-on and hands it to the agent
(:meth:`Launcher.follow <metaq_py.runner.tasks.launching.Launcher.follow>`)."""


class FollowOns:
    """This runner's follow-ons (see the module text): made after each pass, promoted at
    each end, withdrawn before a decision that may stop a task."""

    def __init__(self, ctx: Context, cluster: Cluster, roster: Roster, offers: Offers, *,
                 claim: Claimer, hand_over: HandOver, enabled: bool) -> None:
        self.ctx = ctx
        self.cluster = cluster
        self.roster = roster
        self.offers = offers
        self.claim = claim
        self.hand_over = hand_over
        self.enabled = enabled
        """Whether follow-ons are made at all (the launch pause is 0 and the agent serves)."""
        self.held: dict[str, FollowOn] = {}
        """Follow-ons by the task they wait for, until it ends or they are withdrawn."""
        self.answers: dict[str, FollowOn] = {}
        """Follow-ons by their own task, until the agent's answer for them is taken."""
        self.recent: deque[float] = deque(maxlen=RECENT)
        """How long the last tasks to end here ran (seconds)."""
        self.made = 0
        """Follow-ons handed to the agent."""
        self.given_back = 0
        """Follow-ons that did not start (withdrawn, or held too long) and went back."""

    # --- making ------------------------------------------------------------------------------

    def calm(self) -> bool:
        """Whether no decision now may stop a running task for another: no on-demand task
        waits and no notice is live."""
        return not self.offers.ondemand and not self.cluster.notices

    def withdraw_all(self) -> None:
        for follow in self.held.values():
            follow.withdraw()

    def make(self, now: float, next_pass: int) -> None:
        """Give each running task that may have one a follow-on, and each follow-on one of
        its own (see the module text). ``next_pass`` is the runner's next pass, which decides
        for any on-demand task first seen here."""
        if not self.enabled or len(self.recent) < RECENT or max(self.recent) >= SHORT_RUN:
            return
        before = [(r, token) for r in self.roster.live.values()
                  if (token := self._token(r, now)) is not None]
        # The oldest first (it ends first, most likely), then the follow-ons held for them:
        # two deep at most, so that no more than two tasks per slot are claimed ahead.
        before.sort(key=lambda rt: rt[0].started)
        on_roster = self.roster.live
        before += [(f.live, f.token) for f in self.held.values()
                   if not f.withdrawn and f.live.follow_on is None
                   and on_roster.get(f.after.id) is f.after]
        if not before:
            return
        waiting = self.offers.waiting(next_pass)
        if not self.calm():
            return
        end = self.ctx.end - self.ctx.options.margin - self.ctx.options.grace
        for (after, token), job in zip(before, waiting, strict=False):
            hold = min(HOLD, end - now - job.walltime)
            placed = self._placement(after)
            if not _fits(job, after, placed) or hold <= 0:
                return  # only the first waiting task may follow, then the next after it
            task, job = self.offers.offered(job.id)
            live = self.claim(task, job)
            if live is None:
                return  # another runner took it: decide again at the next pass
            live.node_ids, live.hosts = after.node_ids, after.hosts
            if placed is None:
                live.gpu_ids = gpu_ids_for(live.claim.spec.gpus, len(after.node_ids),
                                           self.ctx.alloc.gpu_ids)
            else:
                live.cores, live.gpu_ids = after.cores, after.gpu_ids
            follow = self.hand_over(live, after, token, hold)
            if follow is None:
                return  # it could not be handed over: back in the queue, or failed
            follow.placement = placed
            after.follow_on = self.held[after.id] = self.answers[live.id] = follow
            self.made += 1

    def _placement(self, r: LiveTask) -> Placement | None:
        """Where the share ``r`` runs, or will (``None``: ``r`` takes whole nodes)."""
        if r.cores is None:
            return None
        follow = self.answers.get(r.id)
        if follow is not None and follow.live is r and follow.promoted is None:
            return follow.placement
        return self.cluster.placements.get(r.id)

    def _token(self, r: LiveTask, now: float) -> int | None:
        """The token of the agent's start of ``r``, a task on the roster, if it may take a
        follow-on now."""
        if r.follow_on is not None or r.why is not None or r.resizing is not None \
                or r.job.kind is not Kind.RIGID \
                or any(n in self.roster.draining for n in r.node_ids):
            return None
        follow = self.answers.get(r.id)
        if follow is not None and follow.live is r:  # a follow-on promoted, not answered
            return follow.token
        p = r.process
        if isinstance(p, AgentTask) and p.served and r.running and now - r.started < SHORT_RUN:
            return p.token
        return None

    # --- the end of the task before ----------------------------------------------------------

    def ended(self, live: LiveTask, *, now: float, stopping: str | None) -> None:
        """``live`` has ended (its nodes are free in the Cluster): note how long it ran, and
        promote its follow-on, if it has one."""
        if live.why is None:
            self.recent.append(live.since - live.started)
        follow = self.held.pop(live.id, None)
        live.follow_on = None
        if follow is None:
            return
        follow.promoted = now
        nxt = follow.live
        try:
            self.cluster.start(nxt.job, live.node_ids, now=now, at=follow.placement)
        except ClusterError:
            # Its nodes went to other work meanwhile (no decision should allow it): it is
            # stopped the moment it exists and goes back, keeping the nodes until it is gone.
            nxt.stop(Why.PREEMPT, now=now, grace=0)
            self.roster.hold_hosts(nxt, nxt.node_ids)
        nxt.starting = True
        self.roster.live[nxt.id] = nxt
        if stopping is not None:
            nxt.stop(Why.INTERRUPT, now=now, grace=0)

    # --- the agent's answer ------------------------------------------------------------------

    def answered(self, live: LiveTask) -> FollowOn | None:
        """The follow-on whose answer this is, if ``live`` is one (it is one no longer)."""
        follow = self.answers.get(live.id)
        if follow is None or follow.live is not live:
            return None
        del self.answers[live.id]
        if follow.promoted is None:
            self._unhold(follow)
        return follow

    def give_back(self, follow: FollowOn, why: str) -> None:
        """Put a follow-on that did not start back in the queue (no attempt counted)."""
        self._unhold(follow)
        self.given_back += 1
        self.roster.requeue_unlaunched(follow.live, why)

    def abandon(self) -> None:
        """On the way out, after the agent has ended: every follow-on not answered goes
        back; one promoted may have started before the agent ended, and goes back as
        interrupted."""
        for follow in list(self.answers.values()):
            if follow.promoted is None:
                self.give_back(follow, "not started: the runner stopped")
                continue
            self.roster.forget(follow.live, now=self.ctx.clock.now())
            with contextlib.suppress(OSError):
                self.ctx.queue.requeue(follow.live.claim, count_attempt=False,
                                       reason="interrupted: the runner stopped")
        self.answers.clear()

    def _unhold(self, follow: FollowOn) -> None:
        if self.held.get(follow.after.id) is follow:
            del self.held[follow.after.id]
            follow.after.follow_on = None


def _fits(job: Job, after: LiveTask, placed: Placement | None) -> bool:
    """Whether ``job`` starts on exactly the hosts (or, as a share, the cores and GPUs:
    ``placed``) that ``after`` frees, as a decision would."""
    if job.kind is not Kind.RIGID or job.shapes or job.notice is not None:
        return False
    if placed is None:
        return not job.cores and job.size == job.min_size == len(after.node_ids)
    return job.cores == len(placed.cores) and job.gpus == len(placed.gpus)
