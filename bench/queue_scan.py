"""How fast the queue index is on a large queue.

Builds a queue of N task files (default 100,000, in sub-folders of 1,000) in a scratch
folder and prints:

- cold index time: the first scan, which opens and parses every header;
- warm rescan time: a second scan with nothing changed (one stat per folder, no opens),
  and after adding one task;
- the periodic full verification pass (one stat per task), unchanged and with 1% of the
  tasks touched;
- peak memory (maximum resident set size of this process).

METAQ sleeps at least a second for every task it looks at; at 100,000 tasks that is more
than a day per pass. How fast the runner then picks among the waiting tasks (its policy, on
the index's ordered list) is measured by ``bench/runner_pick.py``.

    python bench/queue_scan.py [--tasks N] [--dir SCRATCH]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from metaq_py.queue.store import Queue

TARGETS = {"cold": 5.0, "warm": 0.5, "memory_mb": 300.0}


def build(root: Path, n: int, seed: int) -> None:
    rng = random.Random(seed)
    Queue.init(root)
    for i in range(n):
        folder = root / ("priority" if i % 50 == 0 else "todo") / f"batch{i // 1000:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        nodes = 1 if rng.random() < 0.01 else rng.choice([2, 4, 8, 16, 32, 64])
        kind = rng.choice(["rigid", "rigid", "malleable", "ondemand"])
        lines = [f"#METAQ NODES {nodes}", f"#METAQ MIN_WC_TIME {rng.randint(1, 12):02d}:00:00",
                 f"#METAQ PROJECT p{rng.randint(0, 20)}", f"#METAQ TYPE {kind}"]
        if kind == "malleable":
            lines.append(f"#METAQ MIN_NODES {max(1, nodes // 4)}")
        if rng.random() < 0.3:
            lines.append(f"#METAQ GPUS {rng.choice([1, 2, 4])}")
        path = folder / f"task{i:06d}.sh"
        path.write_text("#!/bin/bash\n" + "\n".join(lines) + "\necho run\nsleep 1\n")
        path.chmod(0o755)


def timed(fn, repeat: int = 1) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--dir", type=Path, default=None, help="scratch folder (default: tmp)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="metaq-bench-", dir=args.dir))
    try:
        root = scratch / "queue"
        t0 = time.perf_counter()
        build(root, args.tasks, args.seed)
        print(f"built {args.tasks:,} task files in {time.perf_counter() - t0:.1f} s "
              f"under {root}")

        q = Queue(root)
        cold, scan = timed(q.scan)
        assert len(scan.tasks) == args.tasks and not scan.invalid, "benchmark queue is broken"
        warm, _ = timed(lambda: q.scan(full=False), repeat=3)
        assert q.index.parsed == 0
        verify, _ = timed(lambda: q.scan(full=True), repeat=3)
        assert q.index.parsed == 0

        rng = random.Random(args.seed)
        for task in rng.sample(list(scan.tasks), args.tasks // 100):
            os.utime(task.file, None)
        touched, _ = timed(lambda: q.scan(full=True))
        reparsed = q.index.parsed
        new = root / "todo" / "batch000" / "fresh.sh"
        new.write_text("#!/bin/sh\n#METAQ NODES 1\ntrue\n")
        new.chmod(0o755)
        added, _ = timed(lambda: q.scan(full=False))
        assert len(q.scan().tasks) == args.tasks + 1

        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

        print(f"cold index:            {cold:8.3f} s    (target <= {TARGETS['cold']} s)")
        print(f"warm rescan:           {warm:8.3f} s    (target <= {TARGETS['warm']} s; "
              f"no folder changed)")
        print(f"warm rescan, one new:  {added:8.3f} s    (one folder listed again)")
        print(f"full verify pass:      {verify:8.3f} s    (one stat per task; runs every "
              f"{q.index.verify_interval:g} s)")
        print(f"full pass, 1% touched: {touched:8.3f} s    ({reparsed:,} headers re-read)")
        print(f"peak memory:           {peak_mb:8.1f} MB   "
              f"(target <= {TARGETS['memory_mb']:.0f} MB)")
        print(f"METAQ, 1 s per task:   {args.tasks:8,d} s    per pass "
              f"({args.tasks / max(warm, 1e-9):,.0f}x slower than the warm rescan)")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
