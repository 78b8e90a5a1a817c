"""Launch throughput of ``metaq run`` on no-op tasks, side by side with GNU parallel, and the
launch cost of bound node shares against whole-node tasks.

**Throughput** (issue 16, part 5: at least 2 times GNU parallel's rate). Both run N no-op jobs
(default 10,000) with J at a time (default 4) on this machine and are timed from start to the
last exit; with ``--repeat R`` they take turns R times and the best of each is compared. What
each one does per job differs, and the ratio should be read with that in mind:

- GNU parallel, run as a user would (``parallel -j4 true ::: ...``), forks ``/bin/true``
  through a shell and collects its output;
- metaq, per task: reads its header from the queue, decides with EASY, claims it by an atomic
  rename with a lease, starts the script in its own session (and its own cgroup where the
  kernel allows) with a log file and a hostfile, notices its exit through a pidfd and sweeps
  its session, and moves it to ``finished/`` with its logbook and two JSON-lines events. That
  is the work that makes a task impossible to lose.

metaq runs here with ``--launch-pause 0`` (the default pause, 0.05 s, exists to protect a shared
batch node and caps launches at 20 per second; its figure is printed too, on fewer tasks).

**Launch cost with shares** (issue 18: "launch cost per task does not rise by more than
10%"). The same no-op tasks, J at a time, once as whole-node tasks on J pretend nodes and once
as ``#METAQ CPUS 1`` shares of nodes of 2 cores, each share pinned to its core (binding is on:
a pretend node of 2 cores fits this machine). The cost per task is the runner's wall time and
its CPU time (its own threads', not the tasks') over the tasks, best of R.

    python bench/runner_launch.py [--tasks N] [--jobs J] [--cost-tasks M] [--repeat R]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from metaq_py import build
from metaq_py.batch import BatchOverrides, detect_batch
from metaq_py.queue.store import Queue
from metaq_py.runner.loop import Runner, RunOptions

TARGET = 2.0
"""metaq's rate over GNU parallel's that issue 16 asks for (part 5)."""

COST_TARGET = 1.10
"""The most a bound share's launch cost may be over a whole-node task's (issue 18)."""

SHARE_CORES = 2
"""Cores of a pretend node in the shares run: small enough for binding on this machine."""


@dataclass(frozen=True, slots=True)
class Timing:
    """One ``metaq run``: its wall seconds and the CPU seconds of the runner (not the
    tasks')."""

    wall: float
    cpu: float


def make_queue(root: Path, tasks: int, header: str = "") -> Queue:
    Queue.init(root)
    (root / "metaq.yaml").write_text("defaults:\n  min_wc_time: 1m\n")
    folder = root / "todo"
    for i in range(tasks):
        path = folder / f"t{i:05d}.sh"
        path.write_text(f"#!/bin/sh\n{header}exit 0\n")
        path.chmod(0o755)
    return Queue(root)


def metaq_run(root: Path, tasks: int, jobs: int, pause: float, *, shares: bool = False
              ) -> Timing:
    """Run ``tasks`` no-op tasks, ``jobs`` at a time: whole-node tasks on ``jobs`` nodes, or
    one-core shares of ``jobs / SHARE_CORES`` nodes (bound to their cores)."""
    if shares:
        q = make_queue(root, tasks, "#METAQ CPUS 1\n")
        overrides = BatchOverrides(system="local", nnodes=max(1, jobs // SHARE_CORES),
                                   cores_per_node=SHARE_CORES)
    else:
        q = make_queue(root, tasks)
        overrides = BatchOverrides(system="local", nnodes=jobs)
    batch = detect_batch(overrides=overrides, env={})
    said: list[str] = []
    runner = Runner(q, batch, options=RunOptions(launch_pause=pause, handle_signals=False),
                    say=said.append)
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    runner.run()
    took = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    done = sum(1 for p in (q.root / "finished" / "todo").iterdir() if p.name[0] != ".")
    assert done == tasks, f"only {done} of {tasks} tasks finished"
    assert not any("not bound" in line for line in said), said  # binding must be on
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    shutil.rmtree(root, ignore_errors=True)
    return Timing(took, cpu)


def parallel_seconds(tasks: int, jobs: int) -> float:
    t0 = time.perf_counter()
    subprocess.run(["parallel", "-j", str(jobs), "true", ":::", *map(str, range(tasks))],
                   check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def throughput(scratch: Path, tasks: int, jobs: int, repeat: int) -> None:
    has_parallel = shutil.which("parallel") is not None
    ours: list[float] = []
    theirs: list[float] = []
    for i in range(repeat):
        run = metaq_run(scratch / f"q{i}", tasks, jobs, 0.0)
        ours.append(run.wall)
        if has_parallel:
            theirs.append(parallel_seconds(tasks, jobs))
    small = max(20, tasks // 100)
    paused = metaq_run(scratch / "paused", small, jobs, 0.05).wall
    best = min(ours)
    print(f"{tasks} no-op tasks, {jobs} at a time ({build()}; best of {repeat})")
    print(f"  metaq run (--launch-pause 0): {best:7.2f} s  {tasks / best:8.1f} tasks/s  "
          f"(runs: {', '.join(f'{t:.2f}' for t in ours)} s)")
    if not theirs:
        print("  GNU parallel is not installed (Debian: apt-get install parallel): the "
              "comparison is skipped")
    else:
        them = min(theirs)
        ratio = them / best
        print(f"  GNU parallel -j {jobs} true:     {them:7.2f} s  {tasks / them:8.1f} tasks/s  "
              f"(runs: {', '.join(f'{t:.2f}' for t in theirs)} s)")
        print(f"  ratio ours/parallel: {ratio:.2f} (target >= {TARGET:g}) "
              f"{'met' if ratio >= TARGET else 'NOT met'}")
    print(f"  with the default launch pause 0.05 s: {small / paused:.1f} tasks/s "
          f"({small} tasks)")


def launch_cost(scratch: Path, tasks: int, jobs: int, repeat: int) -> None:
    whole: list[Timing] = []
    shared: list[Timing] = []
    for i in range(repeat):  # in turns, so that a busy moment of the machine hits both
        whole.append(metaq_run(scratch / f"w{i}", tasks, jobs, 0.0))
        shared.append(metaq_run(scratch / f"s{i}", tasks, jobs, 0.0, shares=True))
    w_wall, s_wall = min(t.wall for t in whole), min(t.wall for t in shared)
    w_cpu, s_cpu = min(t.cpu for t in whole), min(t.cpu for t in shared)
    print(f"launch cost per task, {tasks} no-op tasks, {jobs} at a time (best of {repeat})")
    print(f"  whole-node tasks ({jobs} nodes):            wall {w_wall / tasks * 1e3:6.3f} ms  "
          f"runner CPU {w_cpu / tasks * 1e3:6.3f} ms")
    print(f"  bound 1-core shares ({max(1, jobs // SHARE_CORES)} nodes x {SHARE_CORES} cores): "
          f"wall {s_wall / tasks * 1e3:6.3f} ms  runner CPU {s_cpu / tasks * 1e3:6.3f} ms")
    for what, ratio in (("wall", s_wall / w_wall), ("runner CPU", s_cpu / w_cpu)):
        print(f"  ratio shares/whole ({what}): {ratio:.3f} (target <= {COST_TARGET:g}) "
              f"{'met' if ratio <= COST_TARGET else 'NOT met'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=10_000)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--cost-tasks", type=int, default=2_000)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="metaq-bench-launch-"))
    try:
        throughput(scratch, args.tasks, args.jobs, args.repeat)
        launch_cost(scratch, args.cost_tasks, args.jobs, max(args.repeat, 3))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
