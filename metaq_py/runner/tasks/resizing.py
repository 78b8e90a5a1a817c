"""Resizing running tasks: in place, with the task's confirmation, or by a restart.

A malleable task that declares ``#METAQ RESIZE in-place`` is asked to resize where it runs
(the protocol is in :mod:`metaq_py.runner.tasks.live_task`); any other, or one already being
stopped, is stopped gracefully and started again on its new hosts. Without a confirmation
within its grace period an in-place resize falls back to a restart.
"""

from __future__ import annotations

import signal

from metaq_py.durations import format_duration
from metaq_py.policy import Expand, Shrink
from metaq_py.runner.context import Context
from metaq_py.runner.tasks.live_task import LiveTask, Why
from metaq_py.runner.tasks.roster import Roster

__all__ = ["Resizer"]


class Resizer:
    """Carries out the Cluster's shrinks and expansions on the roster's tasks."""

    def __init__(self, ctx: Context, roster: Roster) -> None:
        self.ctx = ctx
        self.roster = roster

    def resize(self, action: Shrink | Expand, new_ids: tuple[int, ...], now: float) -> None:
        """Move the task ``action`` names to ``new_ids``, which the Cluster gave it."""
        live = self.roster.live[action.job]
        verb = "shrink" if isinstance(action, Shrink) else "expand"
        for_task = getattr(action, "for_job", None)
        spec = live.claim.spec
        hosts = self.ctx.hosts(new_ids)
        if not live.running:
            # Not launched yet, or its process is gone already: it starts on its new hosts.
            live.node_ids, live.hosts = new_ids, hosts
            mode = "restart"
        elif spec.resize is not None and spec.resize.mode == "in-place" and live.why is None:
            self.roster.keep_hosts(live, tuple(n for n in live.node_ids if n not in new_ids))
            sig = signal.Signals[f"SIG{spec.resize.signal or 'USR2'}"]
            live.ask_resize(verb, new_ids, hosts, sig=sig, now=now, for_task=for_task)
            mode = "in-place"
        else:
            self.restart(live, new_ids, now)
            mode = "restart"
        self.ctx.events.write(verb, task=live.id, hosts=list(hosts), for_task=for_task,
                              mode=mode)

    def restart(self, live: LiveTask, new_ids: tuple[int, ...], now: float) -> None:
        """Stop ``live`` gracefully and start it again on ``new_ids`` once it is gone."""
        self.roster.keep_hosts(live, live.node_ids)
        live.node_ids, live.hosts = new_ids, self.ctx.hosts(new_ids)
        live.stop(Why.RESTART, now=now)

    def check(self, now: float) -> None:
        """Settle the in-place resizes under way: a confirmed one frees the nodes given up;
        one past its deadline falls back to a restart."""
        for live in list(self.roster.live.values()):
            rs = live.resizing
            if rs is None:
                continue
            if live.resize_confirmed():
                self.roster.let_go(live, rs.released)
                live.resizing = None
            elif now >= rs.deadline:
                self.ctx.say(f"{self.ctx.named(live.id)} did not confirm its {rs.verb} within "
                             f"{format_duration(live.grace)}; restarting it on "
                             f"{','.join(live.hosts)}")
                live.resizing = None
                self.roster.keep_hosts(live, rs.released)
                self.restart(live, live.node_ids, now)
                self.ctx.events.write(rs.verb, task=live.id, hosts=list(live.hosts),
                                      for_task=rs.for_task, mode="fallback-restart")
