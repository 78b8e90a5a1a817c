"""What named tasks used, and what became of them: one row per task or per array
(``metaq report run.sh``), totalled from the batch jobs' event logs.

A person names tasks as ``hold``, ``cancel`` and ``retry`` take them
(:meth:`~metaq_py.queue.admin.QueueAdmin.select`): one task, a whole array (``run.sh``) or
some of its indices (``run.sh[0-9]``). An array's row totals its members, the tasks of the
indices named; ``--each`` adds one row per member.

Each member counts once in ``finished`` or ``failed`` by the outcome of its last ``end``
event (a task that failed, was retried with ``metaq retry`` and then finished is finished);
a member whose last run was requeued, preempted or reclaimed, or that has not ended yet, is
in neither. Node-hours, GPU-hours and CPU efficiency are counted as in
:mod:`metaq_py.report.accounting`, over every run of every member, whatever its outcome.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from metaq_py.outcomes import DONE_OUTCOMES
from metaq_py.report.accounting import cpu_seconds, event_seconds
from metaq_py.report.joblog import JobLog

__all__ = ["Named", "TaskUse", "task_use"]


@dataclass(frozen=True, slots=True)
class Named:
    """What a person named: ``name`` as they wrote it (or the task's identity), and the
    identities of its ``members`` (one for a single task, the indices named for an array)."""

    name: str
    members: tuple[str, ...]
    array: bool = False


@dataclass(frozen=True, slots=True)
class TaskUse:
    """What the runs of ``tasks`` tasks used: ``runs`` counted from ``end`` events,
    ``finished`` and ``failed`` tasks by their last outcome, node-hours and GPU-hours, and
    ``cpu_hours`` (user plus system) over ``core_hours`` (cores held times wall time) of the
    ``measured`` runs whose usage is known. ``members`` are the rows of an array's tasks,
    when asked for."""

    name: str
    tasks: int
    runs: int = 0
    finished: int = 0
    failed: int = 0
    node_hours: float = 0.0
    gpu_hours: float = 0.0
    cpu_hours: float = 0.0
    core_hours: float = 0.0
    measured: int = 0
    members: tuple[TaskUse, ...] = ()

    @property
    def cpu_efficiency(self) -> float | None:
        """CPU time over cores times wall time, as ``seff`` prints it (``None``: no measured
        run held cores)."""
        return self.cpu_hours / self.core_hours if self.core_hours > 0 else None

    def to_json(self) -> dict[str, Any]:
        """The row as plain JSON values (``metaq report TASK --json``)."""
        out: dict[str, Any] = {
            "name": self.name, "tasks": self.tasks, "runs": self.runs,
            "finished": self.finished, "failed": self.failed,
            "node_hours": self.node_hours, "gpu_hours": self.gpu_hours,
            "cpu_hours": self.cpu_hours, "core_hours": self.core_hours,
            "measured_runs": self.measured, "cpu_efficiency": self.cpu_efficiency}
        if self.members:
            out["members"] = [m.to_json() for m in self.members]
        return out


@dataclass(slots=True)
class _Tally:
    """One task's sums while the event logs are read."""

    runs: int = 0
    node_seconds: float = 0.0
    gpu_seconds: float = 0.0
    cpu_seconds: float = 0.0
    core_seconds: float = 0.0
    measured: int = 0
    last: tuple[float, str] | None = None  # (time, outcome) of its latest end event

    def add(self, e: dict[str, Any]) -> None:
        self.runs += 1
        self.node_seconds += event_seconds(e.get("node_seconds"))
        self.gpu_seconds += event_seconds(e.get("gpu_seconds"))
        cpu, cores = cpu_seconds(e), event_seconds(e.get("core_seconds"))
        if cpu is not None and cores > 0:
            self.cpu_seconds += cpu
            self.core_seconds += cores
            self.measured += 1
        moment = e["time"]
        if self.last is None or moment >= self.last[0]:
            self.last = (moment, str(e.get("outcome", "unknown")))

    def row(self, name: str, tasks: int) -> TaskUse:
        outcome = self.last[1] if self.last is not None else None
        return TaskUse(name, tasks, self.runs, int(outcome in DONE_OUTCOMES),
                       int(outcome == "failed"), self.node_seconds / 3600.0,
                       self.gpu_seconds / 3600.0, self.cpu_seconds / 3600.0,
                       self.core_seconds / 3600.0, self.measured)


def task_use(logs: Iterable[JobLog], named: Sequence[Named], *, since: float | None = None,
             each: bool = False) -> list[TaskUse]:
    """One row per entry of ``named`` (in that order), from the ``end`` events of ``logs`` at
    or after ``since``; with ``each``, an array's row carries a row per member."""
    tallies: dict[str, _Tally] = {m: _Tally() for n in named for m in n.members}
    for log in logs:
        for e in log.events:
            if e["event"] != "end" or (since is not None and e["time"] < since):
                continue
            task = e.get("task")
            tally = tallies.get(task) if isinstance(task, str) else None
            if tally is not None:
                tally.add(e)
    rows = []
    for n in named:
        members = [tallies[m].row(m, 1) for m in n.members]
        total = _sum(n.name, members)
        rows.append(replace(total, members=tuple(members)) if each and n.array else total)
    return rows


def _sum(name: str, rows: list[TaskUse]) -> TaskUse:
    return TaskUse(name, len(rows), sum(r.runs for r in rows), sum(r.finished for r in rows),
                   sum(r.failed for r in rows), sum(r.node_hours for r in rows),
                   sum(r.gpu_hours for r in rows), sum(r.cpu_hours for r in rows),
                   sum(r.core_hours for r in rows), sum(r.measured for r in rows))

