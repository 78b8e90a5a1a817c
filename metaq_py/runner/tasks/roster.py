"""The tasks this runner holds, and the hosts they hold physically.

A task is on the roster from its claim to its end: in :attr:`Roster.live` (by task id) the
whole time, and in :attr:`Roster.to_launch` too while it waits for its launch. A preempted
task, a task being shrunk and a task stopped for a restart keep their hosts *physically*
(:attr:`Roster.draining`) until their processes are gone or the shrink is confirmed, even
though the Cluster has already handed the nodes on: a launch on such a host waits for them.
So an on-demand task never shares a node with its victim.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from metaq_py.cluster import Cluster, ClusterError
from metaq_py.runner.context import Context
from metaq_py.runner.tasks.live_task import LiveTask, Why
from metaq_py.runner.tasks.placing import NodeBlocks

__all__ = ["Roster"]


class Roster:
    """This runner's claimed tasks (launched or waiting to launch) and the hosts in use.

    ``unwatch`` stops watching a task's run folder (see
    :meth:`~metaq_py.runner.wakeups.Wakeups.unwatch_rundir`)."""

    def __init__(self, ctx: Context, cluster: Cluster, *,
                 unwatch: Callable[[str], None]) -> None:
        self.ctx = ctx
        self.cluster = cluster
        self._unwatch = unwatch
        self.live: dict[str, LiveTask] = {}
        self.to_launch: list[LiveTask] = []
        self.draining: dict[int, set[str]] = {}
        """Node id -> the tasks that still hold it physically (several shares of one node may
        be stopping at once: the node is free only when the last of them has let go)."""
        self.blocks = NodeBlocks(lambda: ctx.batch.blocks(ctx.alloc.nodes))
        """The allocation's blocks of neighbouring nodes (asked when first needed)."""

    def add(self, live: LiveTask) -> None:
        """``live`` is claimed and placed: it waits for its launch."""
        self.live[live.id] = live
        self.to_launch.append(live)

    def forget(self, live: LiveTask, *, now: float) -> None:
        """``live`` is no longer this runner's: off the roster, its run folder no longer
        watched, its hosts let go, and its nodes given back in the Cluster (unless a
        preemption took them already)."""
        if self.live.get(live.id) is live:
            del self.live[live.id]
        if live in self.to_launch:
            self.to_launch.remove(live)
        self._unwatch(live.id)
        self.let_go(live)
        if live.why is not Why.PREEMPT:
            with contextlib.suppress(ClusterError):  # never started in it, or gone already
                self.cluster.finish(live.id, now=now)

    def requeue_unlaunched(self, live: LiveTask, reason: str) -> None:
        """Forget a task claimed but never launched and put it back (no attempt counted)."""
        self.forget(live, now=self.ctx.clock.now())
        with contextlib.suppress(OSError):
            self.ctx.queue.requeue(live.claim, reason=reason, started=False)

    # --- hosts --------------------------------------------------------------------------------

    def keep_hosts(self, live: LiveTask, node_ids: tuple[int, ...]) -> None:
        """Keep ``node_ids`` out of use until ``live`` has let go of them."""
        for n in node_ids:
            self.draining.setdefault(n, set()).add(live.id)

    def let_go(self, live: LiveTask, node_ids: tuple[int, ...] | None = None) -> None:
        """``live`` no longer holds ``node_ids`` (``None``: any of them)."""
        for n in list(self.draining) if node_ids is None else node_ids:
            holders = self.draining.get(n)
            if holders is not None and live.id in holders:
                holders.discard(live.id)
                if not holders:
                    del self.draining[n]

    def ready(self) -> LiveTask | None:
        """The first task waiting to launch whose hosts are all physically free."""
        draining = self.draining
        return next((t for t in self.to_launch
                     if not any(n in draining for n in t.node_ids)), None)

    # --- checkpoints --------------------------------------------------------------------------

    def check_checkpoints(self, now: float) -> None:
        """Tell the Cluster of every checkpoint made since the last look."""
        for live in self.live.values():
            self.check_checkpoint(live, now)

    def check_checkpoint(self, live: LiveTask, now: float) -> None:
        """Tell the Cluster of a checkpoint ``live`` made since the last look, if any."""
        at = live.new_checkpoint()
        if at is None or live.id not in self.cluster.running:
            return
        r = self.cluster.running[live.id]
        self.cluster.checkpoint(live.id, at=min(max(at, r.start), now))
        self.ctx.events.write("checkpoint", task=live.id)
