"""The runner's upkeep: heartbeats, taking back lost claims, and notices.

At each heartbeat (``heartbeat`` of ``metaq.yaml``) the runner renews the lease of every task
it holds, stops the tasks whose claims were taken back or that someone cancelled, tries again
to settle the tasks it could not move, takes back the lost claims of other jobs (see
:mod:`metaq_py.runner.reclaim`) and asks the batch system again when the allocation ends.
Notices of on-demand work to come are read at every pass; while there are none, a pass
that finds the ``notices/`` folder unchanged since (the same inode, modification and change
times) skips the listing, and lists it anyway once every :data:`NOTICES_TRUSTED` seconds (a
coarse clock may leave a folder's times alike after a change, and a notice copied in by hand
is complete only after its file was made). A busy runner makes hundreds of passes a second.
"""

from __future__ import annotations

import contextlib
import os

from metaq_py.batch import BatchError
from metaq_py.cluster import Cluster, ClusterError
from metaq_py.queue.layout import NOTICES
from metaq_py.queue.notices import load_notices
from metaq_py.runner.context import Context
from metaq_py.runner.reclaim import Sightings, lost_claims
from metaq_py.runner.tasks.exits import Settler
from metaq_py.runner.tasks.live_task import Why
from metaq_py.runner.tasks.roster import Roster

__all__ = ["NOTICES_TRUSTED", "NOTICE_WAIT", "Upkeep"]

NOTICES_TRUSTED = 1.0
"""Seconds for which an unchanged ``notices/`` folder that held no notice is not listed again."""

NOTICE_WAIT = 3600.0
"""Seconds ahead of a notice's arrival from which a runner with nothing left to run (and no
``--linger``) stays for it: an hour."""


class Upkeep:
    """Heartbeats, reclaims and notices. ``next_heartbeat`` is when the next heartbeat is due;
    ``notice_ids`` are the notices already handed to the Cluster."""

    def __init__(self, ctx: Context, cluster: Cluster, roster: Roster, settler: Settler) -> None:
        self.ctx = ctx
        self.cluster = cluster
        self.roster = roster
        self.settler = settler
        self.next_heartbeat = ctx.clock.now() + ctx.queue.config.heartbeat
        self.notice_ids: set[str] = set()
        self.unreclaimed: set[str] = set()
        """The lost claims that could not be taken back, said once each."""
        self.sightings = Sightings()
        """The leases of other jobs as this runner has seen them (see
        :class:`~metaq_py.runner.reclaim.Sightings`)."""
        self._no_notices: tuple[tuple[int, int, int], float] | None = None
        """The ``notices/`` folder's times when it was last listed and held no notice, and
        until when a pass may trust them (see the module text)."""

    def heartbeat(self, now: float, *, stopping: str | None) -> None:
        """Renew every lease and act on what that finds (see the module text)."""
        ctx = self.ctx
        self.next_heartbeat = now + ctx.queue.config.heartbeat
        self.settler.retry(stopping=stopping)
        for live in list(self.roster.live.values()):
            if live.why is Why.LOST:
                continue
            lost = ctx.queue.renew(live.claim)
            if lost is not None:
                ctx.say(f"{ctx.named(live.id)} is no longer ours ({lost}); stopping it")
                live.stop(Why.LOST, now=now, grace=0)
                live.kill_if_due(now)
                if live.process is None:
                    self.roster.forget(live, now=now)
        self.check_cancels(now)
        self.reclaim_lost(now)
        with contextlib.suppress(BatchError):
            end = ctx.batch.end_time()
            if end is not None and end != ctx.end:
                ctx.end = end

    def check_cancels(self, now: float) -> None:
        """Stop the running tasks someone ran ``metaq cancel`` on (one ``lstat`` each): called
        at every pass, so a cancel is acted on at the next wake-up."""
        for live in list(self.roster.live.values()):
            if live.why is None and self.ctx.queue.cancel_requested(live.claim):
                self.ctx.say(f"{self.ctx.named(live.id)} was cancelled; stopping it")
                live.stop(Why.CANCEL, now=now)

    def notice_due(self, now: float) -> bool:
        """Whether a runner with nothing else to do should stay for a notice: one whose work
        arrives within :data:`NOTICE_WAIT` and before the allocation ends. A runner without
        ``--linger`` never idles its nodes for a notice due later (or never)."""
        for notice in self.cluster.notices.values():
            arrival = getattr(notice, "arrival", None)
            if arrival is None:
                return True
            if arrival - now <= NOTICE_WAIT and arrival < self.ctx.end:
                return True
        return False

    def reclaim_lost(self, now: float) -> None:
        """Take back the claims of other jobs that are lost (their jobs are gone)."""
        ctx = self.ctx
        for lost in lost_claims(ctx.queue, ctx.batch, machine=ctx.machine, now=now,
                                own_jobid=ctx.jobid, sightings=self.sightings):
            try:
                moved = ctx.queue.reclaim(lost.claim, reason=lost.reason)
            except OSError as e:  # a full disk, a name that cannot take its logbook
                key = str(lost.claim.path)
                if key not in self.unreclaimed:
                    self.unreclaimed.add(key)
                    ctx.say(f"cannot take back {ctx.named(lost.claim.id)} from job "
                            f"{lost.claim.jobid} ({e.strerror or e}); tried again at each "
                            f"heartbeat")
                continue
            if moved is not None:
                ctx.say(f"took back {ctx.named(lost.claim.id)} from job {lost.claim.jobid}: "
                        f"{lost.reason}")
                ctx.events.write("reclaim", task=lost.claim.id, jobid=lost.claim.jobid,
                                 reason=lost.reason, to=moved.state)

    def sync_notices(self, now: float) -> None:
        """Hand the Cluster the notices that are new, and withdraw those that are gone."""
        try:
            st = os.stat(self.ctx.queue.root / NOTICES)
            times: tuple[int, int, int] | None = (st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
        except OSError:
            times = None
        seen = self._no_notices
        if seen is not None and seen[0] == times and now < seen[1] \
                and not self.cluster.notices:
            return  # none then, and the folder has not changed since
        present = set()
        for notice in load_notices(self.ctx.queue.root, now=now, report=self.ctx.say):
            present.add(notice.id)
            if notice.id in self.notice_ids:
                continue
            self.notice_ids.add(notice.id)
            try:
                self.cluster.add_notice(notice)
            except ClusterError as e:
                self.ctx.say(f"ignoring notice {notice.id}: {e}")
        for gone in [n for n in self.cluster.notices if n not in present]:
            self.cluster.remove_notice(gone)
            self.ctx.events.write("release", notice=gone, reason="withdrawn")
        self._no_notices = None if present or times is None \
            else (times, now + NOTICES_TRUSTED)
