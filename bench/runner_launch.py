"""Launch throughput of ``metaq run`` on no-op tasks, side by side with GNU parallel.

Both run N no-op jobs (default 1,000) with J at a time (default 4) on this machine and are timed
from start to the last exit. What each one does per job differs, and the ratio should be read
with that in mind:

- GNU parallel forks ``/bin/true`` with a shell around it and collects its output;
- metaq, per task: reads its header from the queue, decides with EASY, claims it by an atomic
  rename with a lease, forks the script in its own session with a log file and a hostfile,
  waits for it on a watcher thread, and moves it to ``finished/`` with its record and two
  JSON-lines events. That is the work that makes a task impossible to lose.

metaq runs here with ``--launch-pause 0`` (the default pause, 0.05 s, exists to protect a shared
batch node and caps launches at 20 per second; its figure is printed too, on fewer tasks).

    python bench/runner_launch.py [--tasks N] [--jobs J]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from metaq_py.batch import BatchOverrides, detect_batch
from metaq_py.queue.store import Queue
from metaq_py.runner.loop import Runner, RunOptions

TARGET = 2.0
"""metaq's rate over GNU parallel's that issue 16 asks for (part 5)."""


def make_queue(root: Path, tasks: int) -> Queue:
    Queue.init(root)
    (root / "metaq.yaml").write_text("defaults:\n  min_wc_time: 1m\n")
    folder = root / "todo"
    for i in range(tasks):
        path = folder / f"t{i:05d}.sh"
        path.write_text("#!/bin/sh\nexit 0\n")
        path.chmod(0o755)
    return Queue(root)


def metaq_seconds(scratch: Path, tasks: int, jobs: int, pause: float) -> float:
    q = make_queue(scratch / f"q-{pause}", tasks)
    batch = detect_batch(overrides=BatchOverrides(system="local", nnodes=jobs), env={})
    runner = Runner(q, batch, options=RunOptions(launch_pause=pause, handle_signals=False),
                    say=lambda line: None)
    t0 = time.perf_counter()
    runner.run()
    took = time.perf_counter() - t0
    done = sum(1 for p in (q.root / "finished" / "todo").iterdir() if p.name[0] != ".")
    assert done == tasks, f"only {done} of {tasks} tasks finished"
    return took


def parallel_seconds(tasks: int, jobs: int) -> float:
    t0 = time.perf_counter()
    subprocess.run(["parallel", "-j", str(jobs), "true", ":::", *map(str, range(tasks))],
                   check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=4)
    args = ap.parse_args()
    has_parallel = shutil.which("parallel") is not None
    scratch = Path(tempfile.mkdtemp(prefix="metaq-bench-launch-"))
    try:
        ours = metaq_seconds(scratch, args.tasks, args.jobs, 0.0)
        theirs = parallel_seconds(args.tasks, args.jobs) if has_parallel else None
        small = max(20, args.tasks // 10)
        paused = metaq_seconds(scratch, small, args.jobs, 0.05)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"{args.tasks} no-op tasks, {args.jobs} at a time")
    print(f"  metaq run (--launch-pause 0): {ours:7.2f} s  {args.tasks / ours:8.1f} tasks/s")
    if theirs is None:
        print("  GNU parallel is not installed (Debian: apt-get install parallel): the "
              "comparison is skipped")
    else:
        ratio = (args.tasks / ours) / (args.tasks / theirs)
        print(f"  GNU parallel -j {args.jobs} true:     {theirs:7.2f} s  "
              f"{args.tasks / theirs:8.1f} tasks/s")
        print(f"  ratio ours/parallel: {ratio:.2f} (target >= {TARGET:g}) "
              f"{'met' if ratio >= TARGET else 'NOT met'}")
    print(f"  with the default launch pause 0.05 s: {small / paused:.1f} tasks/s "
          f"({small} tasks)")


if __name__ == "__main__":
    main()
