"""What the policy is told about the waiting tasks: the offer window.

The runner hands the policy core :class:`~metaq_py.policy.model.Job` values, made from the
queue's :class:`~metaq_py.queue.index.Task` values by :mod:`metaq_py.queue.fit`, which also
says which tasks this allocation can never run (too many nodes or GPUs, another machine):
those are *skipped*, never rejected, because another batch job of the same queue may be able
to run them.

:class:`Offers` is the *offer window*: at each decision, the waiting tasks the scheduler is
shown, as policy jobs, with a cache so that a decision costs the window and not the queue.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import islice
from operator import is_
from pathlib import Path
from typing import TYPE_CHECKING

from metaq_py.hybrid import Kind
from metaq_py.policy.model import Job
from metaq_py.policy.shares import NodeShape
from metaq_py.queue.disk.folders import ARRAY_FILE
from metaq_py.queue.fit import fit_problem, job_of
from metaq_py.queue.index import Task
from metaq_py.queue.lease import Claim
from metaq_py.queue.logbook import read_logbook

if TYPE_CHECKING:
    from metaq_py.queue.campaign.deps import Dependencies, Readiness
    from metaq_py.runner.context import Context

__all__ = ["WINDOW", "History", "Offers", "Throttles", "past_runs"]

WINDOW = 1000
"""At most this many waiting tasks (or 16 per node, if more) are handed to the scheduler, in
queue order, plus every waiting on-demand task. Like SLURM's ``bf_max_job_test``, it bounds the
cost of a decision on a queue of 100,000 tasks; a task further back waits until it moves up."""


@dataclass(frozen=True, slots=True)
class History:
    """What earlier runs of a claimed task say about this one: ``runs`` is how many times it
    was started before (in any batch job); ``resume`` is true when the last of them was
    interrupted (preempted, stopped at the end of an allocation, lost with its job) rather
    than failed, so the task should continue from its checkpoint."""

    runs: int
    resume: bool


def past_runs(claim: Claim) -> History:
    """The :class:`History` of ``claim``, from the logbook that travels with the task."""
    if not claim.has_logbook:
        return History(0, False)
    try:
        inode = os.lstat(claim.path).st_ino
    except OSError:
        return History(0, False)
    rec = read_logbook(claim.path, inode)
    if rec is None:
        return History(0, False)
    # The queue writes one history entry per run that did not finish: "requeued" for an
    # interruption or a lost job, "failed" for a non-zero exit sent back for a retry.
    ends = [h.get("event") for h in rec.history if h.get("event") in ("requeued", "failed")]
    return History(len(ends), bool(ends) and ends[-1] == "requeued")


class Offers:
    """The waiting tasks this allocation could run, as policy jobs (:meth:`waiting`).

    ``cache`` maps a task id to the task object it was worked out from and its policy job
    (``None``: this allocation can never run it, see :func:`fit_problem`); an entry holds only
    for that very object, since a rescan of the queue makes new ones. ``last_window`` is the
    last window offered, kept for the next decision; ``blocked`` the tasks waiting for a
    dependency; ``ondemand`` every waiting on-demand
    task, looked at even beyond the window. ``arrived`` says in which pass each on-demand
    task was first offered (its ``arrival`` event), ``skipped`` why each task that can never
    run here is left alone, and ``count`` how many jobs the last look offered."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.cache: dict[str, tuple[Task, Job | None]] = {}
        self.last_window: tuple[Sequence[Task], tuple[Job, ...]] | None = None
        self.ondemand: dict[str, Task] = {}
        self.seen_serial: int | None = None
        self.arrived: dict[str, int] = {}
        self.skipped: dict[str, str] = {}
        self.count = 0
        self.delayed: dict[str, Task] = {}
        """Each waiting task that the last look did not offer because it waits for its retry
        delay (:attr:`Task.not_before <metaq_py.queue.index.Task.not_before>`)."""
        self._now = 0.0
        self._mem_asked = False
        self._mem: int | None = None
        self.blocked: dict[str, tuple[Task, Readiness]] = {}
        """Each waiting task that the last look did not offer because it waits for a
        dependency, with the verdict saying which and where it is."""
        self._deps: Dependencies | None = None
        """Whether a waiting task's dependencies (``AFTER``) are met: a task still waiting
        for one is not offered, and one whose dependency failed goes to ``failed/``. Made
        when the first task with an ``AFTER`` is looked at."""
        self.shaped: bool | None = False
        """What a decision's snapshot says of shapes (:attr:`Snapshot.shaped
        <metaq_py.policy.snapshot.Snapshot>`): ``False`` while no task of several shapes has
        been offered here, so that the policy need not look for one at every decision;
        ``None`` (let it look) from the first."""
        self._pass = 0
        self.throttles = Throttles(ctx.queue.root, ctx.queue.leases)
        """The arrays that run at most so many indices at once (``ARRAY 0-19%4``)."""
        self.shape = NodeShape(ctx.alloc.cores_per_node, ctx.alloc.gpus_per_node,
                               ctx.alloc.cores_per_gpu, ctx.alloc.gpu_cores)
        """What a node of this allocation offers shares of a node."""

    def waiting(self, pass_no: int) -> list[Job]:
        """The waiting tasks this allocation could run, as policy jobs in queue order: the
        first ``window`` of them, then every on-demand task behind those. Each one's task is
        in :attr:`cache` under its id (see :meth:`offered`). ``pass_no`` is the runner's pass,
        stamped on the on-demand tasks that arrive now."""
        self._pass = pass_no
        pending = self.ctx.queue.settled_scan().tasks  # pending() without its copy of the list
        if self._deps is not None:
            self._deps.new_look()
        self.blocked = {}
        self.delayed = {}
        self._now = self.ctx.clock.now()
        self._sync(pending)
        jobs: list[Job] = []
        skipped: dict[str, str] = {}
        window = max(WINDOW, 16 * self.ctx.alloc.nnodes)
        offered = start = self._reuse(pending, jobs)
        rest: Task | None = None
        append = jobs.append
        get = self.cache.get
        ondemand = Kind.ONDEMAND
        for task in islice(pending, start, None):  # no copy of the whole queue's tail
            if offered >= window:
                rest = task
                break
            # The common case, made short (this runs for the whole window at each decision):
            # a task looked at before, which can run here and is not on demand.
            hit = get(task.id)
            if hit is not None and hit[0] is task and (job := hit[1]) is not None \
                    and job.kind is not ondemand:
                append(job)
                offered += 1
            else:
                self._offer(task, jobs, skipped)
                offered = len(jobs)
        # Kept for the next decision when every task looked at was offered (nothing skipped).
        self.last_window = None if skipped else (pending, tuple(jobs))
        if rest is not None:
            # Beyond the backfill window only on-demand work is looked at.
            later = [t for t in self.ondemand.values() if t.order >= rest.order]
            for task in sorted(later, key=_queue_order):
                self._offer(task, jobs, skipped)
        # Tasks waiting for a dependency may run here later: they are not skipped for good.
        self.skipped = {k: v for k, v in skipped.items()
                        if k not in self.blocked and k not in self.delayed}
        jobs = self.throttles.keep(jobs)
        self.count = len(jobs)
        return jobs

    def awaited(self, time_left: float) -> tuple[Task, Readiness] | None:
        """A task of the last look that waits for a dependency still waiting or running
        somewhere, and that this allocation could run, within ``time_left`` seconds, once
        that has finished; ``None`` if there is none (what waits for a held or missing
        dependency is not counted: nothing says it will ever finish). Without an end
        (``time_left`` infinite) only a running dependency counts, so that a runner never
        stays forever for a waiting task nobody may run."""
        alloc = self.ctx.alloc
        forever = math.isinf(time_left)
        for task, ready in self.blocked.values():
            if ready.failed is None and _may_finish(ready, forever) \
                    and task.walltime <= time_left \
                    and fit_problem(task, nnodes=alloc.nnodes, gpus_per_node=alloc.gpus_per_node,
                                    machine=alloc.machine, shape=self.shape,
                                    mem_per_node=self.mem_per_node(task)) is None:
                return task, ready
        return None

    def mem_per_node(self, task: Task) -> int | None:
        """The memory of a node here, asked of the batch system the first time a task gives
        a ``MEM`` (``None`` before, and where it is not known). Then the runner also says,
        once, when its tasks' cgroups cannot hold them to their ``MEM``."""
        if task.spec.mem is None and not self._mem_asked:
            return None
        if not self._mem_asked:
            from metaq_py.launch.cgroup import memory_problem

            self._mem_asked = True
            nodes = self.ctx.alloc.nodes
            self._mem = self.ctx.batch.node_memory(nodes[0]) if nodes else None
            problem = memory_problem()
            if problem is not None:
                self.ctx.say(f"MEM is not enforced here: {problem}; shares of a node are "
                             f"still packed by it, and a task killed at its MEM is still "
                             f"told apart (outcome oom)")
        return self._mem

    @property
    def node_memory(self) -> int | None:
        """The memory of a node here once a task's ``MEM`` made the runner ask (``None``
        before, and where it is not known): the Cluster packs shares by it."""
        return self._mem

    def _reuse(self, pending: Sequence[Task], jobs: list[Job]) -> int:
        """Put in ``jobs`` what the last window still says of ``pending``; how many tasks of
        ``pending`` that covers. Most decisions follow claims of the first few waiting tasks
        and nothing else: the window is then the last one without its first ``k`` jobs, and
        only its end is looked at again."""
        if self.last_window is None:
            return 0
        old, old_jobs = self.last_window
        scanned = len(old_jobs)
        k = len(old) - len(pending)
        # the very same task objects, not equal ones: a rescan makes new objects, and the
        # cache of policy jobs keeps only the jobs of the objects it was built from
        if 0 <= k <= scanned and all(map(is_, pending[:scanned - k], old[k:scanned])):
            jobs.extend(old_jobs[k:])
            return scanned - k
        return 0

    def offered(self, job_id: object) -> tuple[Task, Job]:
        """The task and policy job of a waiting job the last :meth:`waiting` offered."""
        task, job = self.cache[job_id]  # type: ignore[index]
        if job is None:
            raise KeyError(job_id)  # skipped tasks are never offered
        return task, job

    def is_offered(self, job_id: object) -> bool:
        """Whether the last :meth:`waiting` offered the job ``job_id``."""
        hit = self.cache.get(job_id)  # type: ignore[call-overload]
        return hit is not None and hit[1] is not None

    def arrived_now(self, task_id: str) -> bool:
        """Whether the on-demand task ``task_id`` was first offered in the current pass."""
        return self.arrived.get(task_id) == self._pass

    def claim_lost(self, task_id: str) -> None:
        """Another runner claimed ``task_id`` first: forget its policy job, and the kept
        window holding it."""
        self.cache.pop(task_id, None)
        self.last_window = None

    def _dependencies(self) -> Dependencies:
        if self._deps is None:
            from metaq_py.queue.campaign.deps import Dependencies  # only tasks with AFTER
            self._deps = Dependencies(self.ctx.queue)
        return self._deps

    def _offer(self, task: Task, jobs: list[Job], skipped: dict[str, str]) -> None:
        """Add ``task``'s policy job to ``jobs``, or, if this allocation can never run it,
        its reason to ``skipped`` (said once, when it is first found)."""
        cache, alloc = self.cache, self.ctx.alloc
        if task.not_before > self._now:
            # Never cached as a job while it waits: the window is looked at again next time.
            skipped[task.id] = f"it waits for its retry delay until {task.not_before}"
            self.delayed[task.id] = task
            return
        if task.spec.after or task.spec.after_any:
            # Never cached as a job until its dependencies are met (they stay met then).
            deps = self._dependencies()
            ready = deps.check(task)
            if not ready.ready:
                skipped[task.id] = ready.words  # so the window is looked at again next time
                self.blocked[task.id] = (task, ready)
                if ready.failed is not None and deps.fail(task, ready) is not None:
                    self.ctx.say(f"{self.ctx.named(task.id)} moved to failed/: {ready.failed}")
                return
        hit = cache.get(task.id)
        if hit is None or hit[0] is not task:
            problem = fit_problem(task, nnodes=alloc.nnodes,
                                  gpus_per_node=alloc.gpus_per_node, machine=alloc.machine,
                                  shape=self.shape, mem_per_node=self.mem_per_node(task))
            if problem is not None:
                if self.skipped.get(task.id) != problem:
                    self.ctx.say(f"skipping {self.ctx.named(task.id)}: {problem}")
                self.skipped[task.id] = problem
            hit = (task, None if problem is not None else
                   job_of(task, gpus_per_node=alloc.gpus_per_node, shape=self.shape,
                          nnodes=alloc.nnodes))
            cache[task.id] = hit
            if hit[1] is not None and hit[1].shapes:
                self.shaped = None
        job = hit[1]
        if job is None:
            skipped[task.id] = self.skipped.get(task.id) or "it can never run here"
            return
        if job.kind is Kind.ONDEMAND and task.id not in self.arrived:
            self.arrived[task.id] = self._pass
            self.ctx.events.write("arrival", task=task.id, notice=job.notice)
        jobs.append(job)

    def _sync(self, pending: Sequence[Task]) -> None:
        """Bring the waiting on-demand tasks and the cache of policy jobs up to date: from the
        index's changes since the last look, so that a decision costs the backfill window and
        not the whole queue, or by going over every waiting task when those changes are not
        known (the first time)."""
        index = self.ctx.queue.index
        changes = None if self.seen_serial is None else index.changes_since(self.seen_serial)
        if changes is None:
            self.last_window = None
            cache = self.cache
            self.ondemand = {t.id: t for t in pending if t.spec.type is Kind.ONDEMAND}
            self.cache = {t.id: hit for t in pending
                          if (hit := cache.get(t.id)) is not None and hit[0] is t}
        else:
            for removed, added in changes:
                for task in removed:
                    hit = self.cache.get(task.id)
                    if hit is not None and hit[0] is task:
                        del self.cache[task.id]
                    if self.ondemand.get(task.id) is task:
                        del self.ondemand[task.id]
                for task in added:
                    if task.spec.type is Kind.ONDEMAND:
                        self.ondemand[task.id] = task
        self.seen_serial = index.serial


def _may_finish(ready: Readiness, running_only: bool) -> bool:
    """Whether the dependency ``ready`` waits for is on its way: running, or (unless
    ``running_only``) waiting, or an array not yet done; held and missing ones are not."""
    if running_only:
        return ready.state == "running"
    return ready.state in ("waiting", "running") or \
        (ready.state or "").startswith("an array with")


def _queue_order(task: Task) -> tuple:
    return task.order


class Throttles:
    """The throttles of arrays (``ARRAY 0-19%4``: at most 4 of its indices run at once) in
    the queue at ``root``, whose running indices ``leases`` lists (every runner's claims:
    the queue has no server that counts them). Each array's throttle is read from its
    ``.array`` when that file changes."""

    def __init__(self, root: Path, leases: Callable[[], list[Claim]]) -> None:
        self.root = root
        self.leases = leases
        self._limits: dict[str, tuple[tuple[int, int], int | None]] = {}

    def keep(self, jobs: list[Job]) -> list[Job]:
        """``jobs`` (in queue order) without the indices of a throttled array beyond what it
        may start now: its throttle less its indices running anywhere. The leases are read
        only when an index of a throttled array is offered."""
        limits: dict[str, int] = {}
        for job in jobs:
            array = _array_of(str(job.id))
            if array and array not in limits and (limit := self.limit(array)) is not None:
                limits[array] = limit
        if not limits:
            return jobs
        for claim in self.leases():
            array = _array_of(f"{claim.folder}/{claim.relpath}")
            if array in limits:
                limits[array] -= 1
        kept: list[Job] = []
        for job in jobs:
            array = _array_of(str(job.id))
            if array in limits:
                if limits[array] <= 0:
                    continue
                limits[array] -= 1
            kept.append(job)
        return kept

    def over(self, ident: str) -> str | None:
        """For the task ``ident`` just claimed (its lease written), one sentence when it is an
        index of a throttled array that more indices than its throttle now hold, counted
        from every runner's leases: it must go back unstarted. A claim written after every
        other runner's sees them all, so of claims made at once, the last ones go back."""
        array = _array_of(ident)
        limit = self.limit(array) if array else None
        if limit is None:
            return None
        held = sum(1 for c in self.leases() if _array_of(f"{c.folder}/{c.relpath}") == array)
        if held <= limit:
            return None
        return (f"given back unstarted: {held} indices of the array {array} were claimed at "
                f"once, over its throttle of {limit}")

    def limit(self, array: str) -> int | None:
        """The throttle of the array ``array`` (``None``: none, or no array)."""
        try:
            st = os.lstat(self.root / array / ARRAY_FILE)
        except OSError:
            return None
        key = (st.st_ino, st.st_mtime_ns)
        known = self._limits.get(array)
        if known is not None and known[0] == key:
            return known[1]
        from metaq_py.queue.campaign.arrays import read_array  # only an array's index

        info = read_array(self.root, array)
        limit = None if info is None else info.throttle
        self._limits[array] = (key, limit)
        return limit


def _array_of(ident: str) -> str:
    """The array ``ident`` may be an index of (``todo/run.sh`` for ``todo/run.sh/3``), or
    ``""``."""
    parent, _, last = ident.rpartition("/")
    return parent if last.isdigit() and "/" in parent else ""
