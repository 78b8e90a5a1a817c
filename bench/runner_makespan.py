"""Makespan of mixed-size short tasks on a local pretend allocation, against the ideal.

200 tasks (default) of 1 to 4 nodes (half 1-node, 30% 2-node, 10% 3-node, 10% 4-node), each
sleeping 0.3 to 0.9 s, with an honest ``MIN_WC_TIME`` (its sleep, rounded up to 0.1 s), on a
local 4-node allocation with EASY. The ideal is the total node-seconds of the sleeps divided by
the nodes; efficiency is ideal / makespan, where the makespan runs from the runner's start to
its last task's end (so the start-up, every scan, claim, launch and exit are counted).

    python bench/runner_makespan.py [--tasks N] [--seed S]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from metaq_py.batch import BatchOverrides, detect_batch
from metaq_py.queue import Queue
from metaq_py.runner import Runner, RunOptions

TARGET = 0.95
NODES = 4


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    scratch = Path(tempfile.mkdtemp(prefix="metaq-bench-makespan-"))
    try:
        q = Queue.init(scratch / "q")
        (q.root / "metaq.yaml").write_text("caps:\n  launch_pause: 0\n")
        q = Queue(q.root)
        work = 0.0
        for i in range(args.tasks):
            size = rng.choices((1, 2, 3, 4), weights=(50, 30, 10, 10))[0]
            seconds = round(rng.uniform(0.3, 0.9), 2)
            work += size * seconds
            path = q.root / "todo" / f"t{i:03d}.sh"
            path.write_text(f"#!/bin/sh\n#METAQ NODES {size}\n"
                            f"#METAQ MIN_WC_TIME {math.ceil(seconds * 10) / 10}\n"
                            f"sleep {seconds}\n")
            path.chmod(0o755)
        batch = detect_batch(overrides=BatchOverrides(system="local", nnodes=NODES), env={})
        runner = Runner(q, batch, options=RunOptions(handle_signals=False),
                        say=lambda line: None)
        runner.run()
        evs = [json.loads(line) for line in
               (q.root / "jobs" / runner.jobid / "events.jsonl").read_text().splitlines()]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    t0 = next(e["time"] for e in evs if e["event"] == "runner-start")
    last = max(e["time"] for e in evs if e["event"] == "end")
    ends = [e for e in evs if e["event"] == "end"]
    assert len(ends) == args.tasks and all(e["outcome"] == "finished" for e in ends)
    makespan = last - t0
    ideal = work / NODES
    eff = ideal / makespan
    busy = sum(e["node_seconds"] for e in ends)
    print(f"{args.tasks} tasks of 1-4 nodes on {NODES} local nodes (EASY)")
    print(f"  ideal (sleep node-seconds / nodes): {ideal:7.2f} s")
    print(f"  makespan:                            {makespan:7.2f} s")
    print(f"  node-seconds held by tasks: {busy:.1f} (of which sleeping {work:.1f})")
    print(f"  efficiency: {eff:.1%} (target >= {TARGET:.0%}) "
          f"{'met' if eff >= TARGET else 'NOT met'}")


if __name__ == "__main__":
    main()
