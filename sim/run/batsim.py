"""A run written as Batsim writes its own (``metaq simulate --format batsim``), so that evalys
and the Batsim analysis notebooks read our runs as they read Batsim's.

The columns and their spelling are those of Batsim 4 (``JobsTracer`` in Batsim's
``src/export.cpp``, the version evalys reads):

- ``jobs.csv``: ``job_id, workload_name, profile, submission_time,
  requested_number_of_resources, requested_time, success, final_state, starting_time,
  execution_time, finish_time, waiting_time, turnaround_time, stretch, allocated_resources,
  consumed_energy, metadata``, one row per job, times as C's ``%f`` prints them;
  ``allocated_resources`` is an interval set (``0-3 7``); ``metadata`` is ``""``.
- ``schedule.csv``: a header and one row of aggregates, in Batsim's order (its keys sorted):
  ``batsim_version, consumed_joules, makespan, ... time_unavailable``.

What our runs do not have is written as Batsim writes it for a platform without energy or
power states: ``consumed_energy`` and ``consumed_joules`` 0, no machine switches, no time
sleeping, switching or unavailable. ``batsim_version`` says which metaq-py wrote the file.

Choices, as Batsim's own ``swf_to_batsim_output_csv`` tool makes them:

- times count from the first submit (a Batsim workload starts at 0), so ``makespan`` (Batsim
  4: the last finish time) is measured from there;
- ``workload_name`` is ``w0`` and ``profile`` the delay profile Batsim's SWF converter gives
  a job: its runtime in whole seconds;
- the simulator tracks node counts, not which node a job held, so ``allocated_resources``
  places each job on the lowest-numbered free machines at its start (ends before starts at one
  instant): a valid placement of the same schedule, as Batsim's converter does;
- a job whose runtime reached its requested walltime was killed there: ``success`` 0 and
  ``final_state`` ``COMPLETED_WALLTIME_REACHED``, as Batsim reports it; every other job is
  ``COMPLETED_SUCCESSFULLY``.

A hybrid workload's jobs are preempted and resized, which Batsim's rows cannot say; such a run
is refused in one sentence. Jobs that never finished (a run cut by its window) are left out,
and counted.
"""

from __future__ import annotations

import csv
import heapq
import math
from collections.abc import Sequence
from pathlib import Path

from metaq_py.ranges import format_indices
from sim.run.metrics import JobOutcome
from sim.run.result import SimulationResult

__all__ = ["JOBS_COLUMNS", "SCHEDULE_COLUMNS", "intervals", "write_batsim"]

JOBS_COLUMNS = (
    "job_id", "workload_name", "profile", "submission_time", "requested_number_of_resources",
    "requested_time", "success", "final_state", "starting_time", "execution_time",
    "finish_time", "waiting_time", "turnaround_time", "stretch", "allocated_resources",
    "consumed_energy", "metadata",
)
"""Batsim 4's ``_jobs.csv`` columns, in its order."""

SCHEDULE_COLUMNS = (
    "batsim_version", "consumed_joules", "makespan", "max_slowdown", "max_turnaround_time",
    "max_waiting_time", "mean_slowdown", "mean_turnaround_time", "mean_waiting_time",
    "nb_computing_machines", "nb_grouped_switches", "nb_jobs", "nb_jobs_finished",
    "nb_jobs_killed", "nb_jobs_rejected", "nb_jobs_success", "nb_machine_switches",
    "scheduling_time", "simulation_time", "success_rate", "time_computing", "time_idle",
    "time_sleeping", "time_switching_off", "time_switching_on", "time_unavailable",
)
"""Batsim 4's ``_schedule.csv`` columns: its keys in sorted order, as its map writes them."""


def _f(x: float) -> str:
    """A double as Batsim's ``std::to_string`` prints it (C's ``%f``)."""
    return f"{x:f}"


def intervals(ids: Sequence[int]) -> str:
    """Machine ids as Batsim's interval set prints them: ``0-3 7`` (our ranges, with spaces)."""
    return format_indices(ids).replace(",", " ")


def _placements(jobs: list[JobOutcome], machines: int) -> dict[int, list[int]]:
    """Each job's machines: the lowest free ids at its start, ends freeing theirs first."""
    events = sorted([(o.end, 0, n) for n, o in enumerate(jobs)]  # type: ignore[misc]
                    + [(o.start, 1, n) for n, o in enumerate(jobs)])
    free = list(range(machines))
    heapq.heapify(free)
    held: dict[int, list[int]] = {}
    for _, starting, n in events:
        if starting:
            if jobs[n].size > len(free):
                raise ValueError(f"job {jobs[n].id} holds more machines than are free at "
                                 f"{jobs[n].start:g}: the run is not a rigid schedule")
            held[n] = [heapq.heappop(free) for _ in range(jobs[n].size)]
        else:
            for machine in held.get(n, ()):
                heapq.heappush(free, machine)
    return held


def write_batsim(result: SimulationResult, walltimes: dict[int, float], out: Path, *,
                 version: str) -> tuple[list[Path], int]:
    """Write ``jobs.csv`` and ``schedule.csv`` into ``out``. ``walltimes`` are the jobs'
    requested times by id. Returns the files and the count of unfinished jobs left out."""
    if result.hybrid:
        raise ValueError("--format batsim writes rigid jobs' schedules: a hybrid workload's "
                         "preemptions and resizes have no place in Batsim's jobs.csv")
    done = [o for o in result.outcomes if o.start is not None and o.end is not None]
    left_out = len(result.outcomes) - len(done)
    origin = min((o.submit for o in result.outcomes), default=0.0)
    held = _placements(done, result.nodes)
    rows = []
    sums = {"wait": 0.0, "turnaround": 0.0, "slowdown": 0.0}
    peaks = {"wait": 0.0, "turnaround": 0.0, "slowdown": 0.0, "finish": 0.0}
    success = 0
    computing = 0.0
    for n, o in enumerate(done):
        assert o.start is not None and o.end is not None
        submit, start, run = o.submit - origin, o.start - origin, o.end - o.start
        walltime = walltimes.get(o.id, math.inf)
        killed = run >= walltime
        wait, turnaround = start - submit, start + run - submit
        slowdown = turnaround / run if run > 0 else 1.0
        success += not killed
        computing += run * o.size
        for key, value in (("wait", wait), ("turnaround", turnaround),
                           ("slowdown", slowdown)):
            sums[key] += value
            peaks[key] = max(peaks[key], value)
        peaks["finish"] = max(peaks["finish"], start + run)
        rows.append((
            str(o.id), "w0", str(math.ceil(o.runtime)), _f(submit), str(o.size),
            _f(walltime if math.isfinite(walltime) else -1.0), str(int(not killed)),
            "COMPLETED_WALLTIME_REACHED" if killed else "COMPLETED_SUCCESSFULLY",
            _f(start), _f(run), _f(start + run), _f(wait), _f(turnaround), _f(slowdown),
            intervals(held[n]), _f(0.0), '""'))
    out.mkdir(parents=True, exist_ok=True)
    jobs_path, schedule_path = out / "jobs.csv", out / "schedule.csv"
    with jobs_path.open("w", newline="") as f:
        # Batsim joins fields with commas and quotes nothing but metadata, itself quoted
        f.write(",".join(JOBS_COLUMNS) + "\n")
        f.writelines(",".join(row) + "\n" for row in rows)
    count = len(done)
    makespan = peaks["finish"]
    values = {
        "batsim_version": version, "consumed_joules": _f(0.0), "makespan": _f(makespan),
        "max_slowdown": _f(peaks["slowdown"]), "max_turnaround_time": _f(peaks["turnaround"]),
        "max_waiting_time": _f(peaks["wait"]),
        "mean_slowdown": _f(sums["slowdown"] / count if count else math.nan),
        "mean_turnaround_time": _f(sums["turnaround"] / count if count else math.nan),
        "mean_waiting_time": _f(sums["wait"] / count if count else math.nan),
        "nb_computing_machines": str(result.nodes), "nb_grouped_switches": "0",
        "nb_jobs": str(count), "nb_jobs_finished": str(count),
        "nb_jobs_killed": str(count - success), "nb_jobs_rejected": "0",
        "nb_jobs_success": str(success), "nb_machine_switches": "0",
        "scheduling_time": _f(float(result.decision_seconds.sum())),
        "simulation_time": _f(result.wall_seconds),
        "success_rate": _f(success / count if count else math.nan),
        "time_computing": _f(computing), "time_idle": _f(result.nodes * makespan - computing),
        "time_sleeping": _f(0.0), "time_switching_off": _f(0.0), "time_switching_on": _f(0.0),
        "time_unavailable": _f(0.0),
    }
    with schedule_path.open("w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(SCHEDULE_COLUMNS)
        writer.writerow([values[k] for k in SCHEDULE_COLUMNS])
    return [jobs_path, schedule_path], left_out
