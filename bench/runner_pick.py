"""Pick latency of the runner with 100,000 queued tasks.

A pick is what the runner does when a node frees up: rescan the queue (cached index), turn the
waiting tasks into policy jobs (cached per task), decide with EASY and claim the chosen task by
an atomic rename. The queue holds N tasks (default 100,000) in sub-folders of 1,000; one node is
free at each pick, and the claimed task is handed back to the runner's bookkeeping at once so
that the next pick again finds one free node. The first pick (cold index) is printed apart.

    python bench/runner_pick.py [--tasks N] [--picks P]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from metaq_py.batch import BatchOverrides, detect_batch
from metaq_py.queue.store import Queue
from metaq_py.runner.loop import Runner, RunOptions

TARGET = 0.010


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=100_000)
    ap.add_argument("--picks", type=int, default=50)
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="metaq-bench-pick-"))
    try:
        q = Queue.init(scratch / "q")
        for i in range(args.tasks):
            folder = q.root / "todo" / f"f{i // 1000:03d}"
            if i % 1000 == 0:
                folder.mkdir()
            path = folder / f"t{i:06d}.sh"
            path.write_text("#!/bin/sh\n#METAQ MIN_WC_TIME 10m\ntrue\n")
            path.chmod(0o755)
        batch = detect_batch(overrides=BatchOverrides(system="local", nnodes=1), env={})
        r = Runner(q, batch, options=RunOptions(handle_signals=False), say=lambda line: None)
        r.ctx.job_dir.mkdir(parents=True, exist_ok=True)
        times = []
        for n in range(args.picks + 1):
            t0 = time.perf_counter()
            r.decider.decide(r.clock.now(), n)
            times.append(time.perf_counter() - t0)
            assert len(r.roster.to_launch) == 1, "a pick claimed nothing"
            live = r.roster.to_launch[0]
            r.roster.forget(live, now=r.clock.now())
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    cold, warm = times[0], times[1:]
    p50 = statistics.median(warm)
    p99 = sorted(warm)[max(0, int(len(warm) * 0.99) - 1)]
    print(f"pick latency with {args.tasks:,} queued tasks ({args.picks} picks)")
    print(f"  first pick (cold index, parses every header): {cold:.2f} s")
    print(f"  p50 {p50 * 1e3:.1f} ms, p99 {p99 * 1e3:.1f} ms, max {max(warm) * 1e3:.1f} ms "
          f"(target <= {TARGET * 1e3:.0f} ms) {'met' if p50 <= TARGET else 'NOT met'}")


if __name__ == "__main__":
    main()
