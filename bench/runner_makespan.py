"""Makespan of mixed-size short tasks on a local pretend allocation, against the ideal, in
each queue order.

200 tasks (default) of 1 to 4 nodes (half 1-node, 30% 2-node, 10% 3-node, 10% 4-node), each
sleeping 0.3 to 0.9 s, with an honest ``MIN_WC_TIME`` (its sleep, rounded up to 0.1 s), on a
local 4-node allocation with EASY. The same task set, dropped into the queue at once, is run
twice: once with ``order: submit`` (the default: equal-priority tasks by submit time) and once
with ``order: largest-first`` (more nodes first, then submit time), each on a fresh queue. The
ideal is the total node-seconds of the sleeps divided by the nodes; efficiency is
ideal / makespan, where the makespan runs from the runner's start to its last task's end (so
the start-up, every scan, claim, launch and exit are counted).

    python bench/runner_makespan.py [--tasks N] [--seed S]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from metaq_py.batch import BatchOverrides, detect_batch
from metaq_py.queue.settings.config import LARGEST_FIRST, SUBMIT
from metaq_py.queue.store import Queue
from metaq_py.runner.loop import Runner, RunOptions

TARGET = 0.95
NODES = 4


@dataclass(frozen=True)
class Outcome:
    """One run: ``makespan`` in seconds and ``busy``, the node-seconds tasks held nodes."""

    makespan: float
    busy: float


def task_set(count: int, seed: int) -> list[tuple[int, float]]:
    """``count`` tasks as (nodes, sleep seconds), drawn reproducibly from ``seed``."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        size = rng.choices((1, 2, 3, 4), weights=(50, 30, 10, 10))[0]
        out.append((size, round(rng.uniform(0.3, 0.9), 2)))
    return out


def run(tasks: list[tuple[int, float]], order: str, scratch: Path) -> Outcome:
    """Run ``tasks`` on a fresh queue whose ``metaq.yaml`` says ``order``."""
    q = Queue.init(scratch / order)
    (q.root / "metaq.yaml").write_text(f"order: {order}\ncaps:\n  launch_pause: 0\n")
    q = Queue(q.root)
    base = time.time_ns() - len(tasks) * 10**6
    for i, (size, seconds) in enumerate(tasks):
        path = q.root / "todo" / f"t{i:03d}.sh"
        path.write_text(f"#!/bin/sh\n#METAQ NODES {size}\n"
                        f"#METAQ MIN_WC_TIME {math.ceil(seconds * 10) / 10}\n"
                        f"sleep {seconds}\n")
        path.chmod(0o755)
        # Submit times one millisecond apart in task order, so both runs see the very same
        # submit order (mtimes written in one burst can tie on a coarse file system).
        submit = base + i * 10**6
        os.utime(path, ns=(submit, submit))
    batch = detect_batch(overrides=BatchOverrides(system="local", nnodes=NODES), env={})
    runner = Runner(q, batch, options=RunOptions(handle_signals=False), say=lambda line: None)
    runner.run()
    evs = [json.loads(line) for line in
           (q.root / "jobs" / runner.jobid / "events.jsonl").read_text().splitlines()]
    t0 = next(e["time"] for e in evs if e["event"] == "runner-start")
    ends = [e for e in evs if e["event"] == "end"]
    assert len(ends) == len(tasks) and all(e["outcome"] == "finished" for e in ends)
    return Outcome(max(e["time"] for e in ends) - t0, sum(e["node_seconds"] for e in ends))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    tasks = task_set(args.tasks, args.seed)
    work = sum(size * seconds for size, seconds in tasks)
    ideal = work / NODES
    scratch = Path(tempfile.mkdtemp(prefix="metaq-bench-makespan-"))
    try:
        outcomes = {order: run(tasks, order, scratch) for order in (SUBMIT, LARGEST_FIRST)}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"{args.tasks} tasks of 1-4 nodes on {NODES} local nodes (EASY), seed {args.seed}")
    print(f"  ideal (sleep node-seconds / nodes): {ideal:7.2f} s "
          f"(node-seconds sleeping: {work:.1f})")
    for order, label in ((SUBMIT, "submit order"), (LARGEST_FIRST, "largest-first")):
        o = outcomes[order]
        eff = ideal / o.makespan
        print(f"  EASY, {label + ':':14} {eff:6.1%}  (makespan {o.makespan:6.2f} s, "
              f"node-seconds held {o.busy:.1f}; target >= {TARGET:.0%} "
              f"{'met' if eff >= TARGET else 'NOT met'})")


if __name__ == "__main__":
    main()
