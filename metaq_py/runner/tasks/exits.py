"""Settling task exits: where a task goes in the queue when its process is over.

Why the runner stopped a task (:class:`~metaq_py.runner.tasks.live_task.Why`) decides: a task
stopped for a restart starts again at once on its new hosts; a preempted or interrupted one
goes back to its folder to resume; a cancelled
one to ``cancelled/``; a lost one is left alone (it is no longer ours); any other is finished
or failed by its exit code. When the queue cannot be written (a full disk), the task stays
claimed, its lease renewed, and settling it is tried again at each heartbeat.
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

from metaq_py.cluster import Cluster
from metaq_py.launch import TaskProcess
from metaq_py.launch.usage import Usage
from metaq_py.outcomes import FAILED, FINISHED, OOM, RECLAIMED, TIMEOUT
from metaq_py.queue.fit import gpu_ids_for
from metaq_py.queue.lease import mark_ended
from metaq_py.runner.context import Context
from metaq_py.runner.tasks.live_task import LiveTask, Why
from metaq_py.runner.tasks.roster import Roster

if TYPE_CHECKING:
    from metaq_py.launch.step_usage import StepUsage

__all__ = ["Settler"]


class Settler:
    """Settles the exits of the roster's tasks. ``unsettled`` holds the tasks that ended but
    could not be moved yet; ``stopping`` (on each call) is why the runner is stopping, if it
    is, which is the reason an interrupted task is requeued with."""

    def __init__(self, ctx: Context, cluster: Cluster, roster: Roster) -> None:
        self.ctx = ctx
        self.cluster = cluster
        self.roster = roster
        self.unsettled: list[LiveTask] = []
        self._steps: StepUsage | None = None
        """SLURM's figures for tasks run in steps of their own (asked once per end); made
        at the first such end (``metaq run --srun``)."""
        self._used: dict[TaskProcess, Usage | None] = {}
        """Each ended process's usage from first asked until its ``end`` event is written."""

    def exited(self, process: TaskProcess, *, stopping: str | None) -> None:
        """``process`` is over: settle its task, or start it again after a restart."""
        roster = self.roster
        live = roster.live.get(process.spec.task)
        if live is None or live.process is not process:
            return
        now = self.ctx.clock.now()
        lost = getattr(process, "lost", None)  # its node's agent is lost (--agents)
        if lost is not None and live.why in (None, Why.RESTART):
            live.why, stopping = Why.INTERRUPT, f"its node {process.spec.nodes[0]} is lost: {lost}"
        roster.check_checkpoint(live, now)  # one made just before the exit
        live.account(now)
        roster.let_go(live)
        if live.why is Why.RESTART and stopping is None:
            self._relaunch(live)
            self._write_end(live, "requeued")
            return
        roster.forget(live, now=now)
        self.settle_or_keep(live, stopping=stopping)

    def retry(self, *, stopping: str | None) -> None:
        """Try again to settle the tasks that could not be moved (at a heartbeat)."""
        for live in list(self.unsettled):
            if self.ctx.queue.heartbeat(live.claim):
                self.settle_or_keep(live, stopping=stopping)
            else:
                self.unsettled.remove(live)  # taken back meanwhile: no longer ours to move

    def settle_or_keep(self, live: LiveTask, *, stopping: str | None) -> bool:
        """Settle an exited task; when the queue cannot be written (a full disk), keep it
        claimed, its lease renewed, and try again at each heartbeat."""
        status = live.process.status if live.process is not None else None
        returncode = status.returncode if status is not None else 0
        try:
            outcome = self._settle(live, returncode, stopping, self.usage(live))
        except OSError as e:
            if live not in self.unsettled:
                self.unsettled.append(live)
                self.ctx.say(f"cannot move {self.ctx.named(live.id)} after its exit "
                             f"({e.strerror}); it stays claimed and is tried again at every "
                             f"heartbeat")
            return False
        if live in self.unsettled:
            self.unsettled.remove(live)
            self.ctx.say(f"{self.ctx.named(live.id)} is settled now: {outcome}")
        self._write_end(live, outcome)
        if outcome in (FAILED, TIMEOUT, OOM) and live.claim.spec.max_fails is not None:
            self._max_fails(live)
        return True

    def _max_fails(self, live: LiveTask) -> None:
        """An index of an array with ``MAX_FAILS`` failed: once that many have, the indices
        still waiting go to ``hold/``, so that no more hours are burnt on them."""
        from metaq_py.queue.admin import QueueAdmin  # only an array that fails needs it
        program = live.claim.program
        array_id = program.env.get("METAQ_ARRAY_ID") if program is not None else None
        max_fails = live.claim.spec.max_fails
        if array_id is None or max_fails is None:
            return
        try:
            held = QueueAdmin(self.ctx.queue).hold_rest(array_id, max_fails=max_fails)
        except OSError as e:
            self.ctx.say(f"cannot hold the rest of {array_id} after MAX_FAILS ({e.strerror})")
            return
        if held:
            self.ctx.say(f"{array_id} reached its MAX_FAILS {max_fails}: {held} waiting "
                         f"indices moved to hold/ ('metaq release {array_id}' runs them)")


    def park(self) -> list[str]:
        """At the runner's stop: try once more to settle each task that could not be moved,
        and record the exit of each that still cannot (:func:`~metaq_py.queue.lease
        .mark_ended`), so that whoever takes its claim back settles it rather than runs it
        again. A sentence for each left so."""
        said = []
        for live in list(self.unsettled):
            if self.settle_or_keep(live, stopping=None):
                continue
            status = live.process.status if live.process is not None else None
            code = status.returncode if status is not None else 0
            code = 128 - code if code < 0 else code
            if live.why is None and mark_ended(live.claim.path, code):
                said.append(f"{live.id} ended (exit code {code}) but could not be moved; "
                            f"its exit is recorded beside it in {live.claim.path.parent}, and "
                            f"the runner that takes it back settles it, never runs it again")
            else:
                said.append(f"{live.id} ended but could not be moved; it stays claimed in "
                            f"{live.claim.path}, and the next runner (or metaq reset --dead) "
                            f"puts it back")
        return said

    def usage(self, live: LiveTask) -> Usage | None:
        """What ``live``'s run used: SLURM's figures for a task in a step of its own (the
        runner reaped only its ``srun``), else the kernel's from reaping its script; kept
        until its ``end`` event is written, since its logbook entry carries it too."""
        process = live.process
        if process is None:
            return None
        if process not in self._used:
            status = process.status
            if process.spec.srun_wrap:
                from metaq_py.launch.slurm_step import read_step  # a step of its own
                step = read_step(process.spec.step_file)
                self._used[process] = self._step_usage().of(step) if step is not None else None
            else:
                self._used[process] = status.usage if status is not None else None
        return self._used[process]

    def _step_usage(self) -> StepUsage:
        if self._steps is None:
            from metaq_py.launch.step_usage import StepUsage  # only tasks in steps of their own
            self._steps = StepUsage()
        return self._steps

    def _write_end(self, live: LiveTask, outcome: str) -> None:
        status = live.process.status if live.process is not None else None
        sig = status.signal if status is not None else None
        seconds = live.since - live.started
        cores = len(live.cores) * seconds if live.cores is not None \
            else live.node_seconds * self.ctx.alloc.cores_per_node
        usage = self.usage(live)
        if live.process is not None:
            self._used.pop(live.process, None)
        self.ctx.events.write(
            "end", task=live.id, attempt=live.attempt, hosts=list(live.hosts),
            outcome=outcome, exit_code=status.exit_code if status else None,
            signal=sig.name if sig else None, seconds=seconds,
            node_seconds=live.node_seconds, gpu_seconds=live.gpu_seconds,
            core_seconds=cores, **(usage.fields() if usage is not None else {}),
            project=live.claim.spec.project, user=live.claim.user, kind=str(live.job.kind))

    def _settle(self, live: LiveTask, returncode: int, stopping: str | None,
                usage: Usage | None) -> str:
        """Move the task where its exit sends it (its logbook entry carrying ``usage``);
        the ``outcome`` of its ``end`` event. Raises ``OSError`` when the queue cannot be
        written."""
        q, claim, why = self.ctx.queue, live.claim, live.why
        used = usage.fields() if usage is not None else None
        if why is Why.LOST:
            return RECLAIMED
        if why is Why.CANCEL:
            q.cancelled(claim)
            return "cancelled"
        if why in (Why.PREEMPT, Why.INTERRUPT, Why.RESTART):
            what = (f"preempted for {live.for_task}" if why is Why.PREEMPT and live.for_task
                    else "preempted" if why is Why.PREEMPT
                    else f"interrupted: {stopping or 'stopped'}")
            moved = q.requeue(claim, reason=f"{what} in job {self.ctx.jobid}",
                              count_attempt=False, usage=used)
            if moved is None:
                return "reclaimed"
            return "preempted" if why is Why.PREEMPT else "requeued"
        reason = None
        code = returncode
        if returncode < 0:
            code = 128 - returncode
            try:
                reason = f"killed by {signal.Signals(-returncode).name}"
            except ValueError:
                reason = f"killed by signal {-returncode}"
        status = live.process.status if live.process is not None else None
        oom = status is not None and status.oom
        if oom:
            reason = _oom_words(claim.spec.mem, usage)
        moved = q.finish(claim, exit_code=code, reason=reason, usage=used,
                         timed_out=why is Why.TIMEOUT, oom=oom)
        if moved is None:
            return RECLAIMED  # the claim was taken from us meanwhile
        return moved.outcome or (FINISHED if moved.state == FINISHED else FAILED)

    def _relaunch(self, live: LiveTask) -> None:
        """Put ``live``, stopped for a restart, on the roster again to launch on the nodes
        the Cluster now gives it, resuming, as its next attempt."""
        r = self.cluster.running.get(live.id)
        new_ids = tuple(r.nodes if r is not None else live.node_ids)
        restarted = LiveTask(
            claim=live.claim, job=live.job, node_ids=new_ids, hosts=self.ctx.hosts(new_ids),
            gpu_ids=None, attempt=live.attempt + 1, resume=True, grace=live.grace,
            stop_signal=live.stop_signal, instant=live.instant, notice=live.notice,
            lenders=live.lenders, time_limit=live.time_limit)
        restarted.gpu_ids = gpu_ids_for(live.claim.spec.gpus, len(new_ids),
                                        self.ctx.alloc.gpu_ids)
        self.roster.add(restarted)


def _oom_words(mem: int | None, usage: Usage | None) -> str:
    """The MEM a task passed and the peak its run reached, for the reason of an ``oom``."""
    words = f"MEM {mem >> 20} MiB" if mem is not None else "MEM"
    peak = None if usage is None else usage.memory_peak_bytes or usage.max_rss_bytes
    return words + (f", peak {peak >> 20} MiB" if peak is not None else "")
