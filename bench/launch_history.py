"""Launch cost per whole-node task, before node shares came in and now (issue 18's figure).

Issue 18 asks that launch cost per task not rise by more than 10% with shares of nodes. This
bench answers it for the tasks everyone ran before: the same no-op whole-node tasks, run by
``metaq run --batch local --nodes 4 --launch-pause 0`` from a checkout of the commit before
shares (``--before``, default 56439bb, the parent of the commit that added
``metaq_py/policy/shares.py``) and from this tree, interleaved, three rounds each, medians
printed. Each side runs its own source (the command starts in its tree). The cost of a share's
launch against a whole-node task's, today, is ``bench/runner_launch.py``'s second figure.

    python bench/launch_history.py [--tasks N] [--before REV]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
TARGET = 1.10


def cost(tree: Path, tasks: int) -> float:
    """Wall milliseconds per task of one ``metaq run`` of ``tasks`` no-op tasks from
    ``tree``'s source."""
    scratch = Path(tempfile.mkdtemp(prefix="metaq-bench-history-"))
    try:
        q = scratch / "q"
        subprocess.run([sys.executable, "-m", "metaq_py", "init", str(q)], cwd=tree,
                       check=True, capture_output=True)
        (q / "metaq.yaml").write_text("defaults:\n  min_wc_time: 1m\n")
        for i in range(tasks):
            path = q / "todo" / f"t{i:05d}.sh"
            path.write_text("#!/bin/sh\nexit 0\n")
            path.chmod(0o755)
        t0 = time.perf_counter()
        ran = subprocess.run([sys.executable, "-m", "metaq_py", "run", "--queue", str(q),
                              "--batch", "local", "--nodes", "4", "--launch-pause", "0",
                              "--walltime", "1h"], cwd=tree, capture_output=True, text=True)
        took = time.perf_counter() - t0
        done = sum(1 for p in (q / "finished" / "todo").iterdir() if p.name[0] != ".")
        if ran.returncode != 0 or done != tasks:
            raise SystemExit(f"the run from {tree} failed ({done} of {tasks} finished): "
                             f"{ran.stderr[-400:]}")
        return took / tasks * 1e3
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=2000)
    ap.add_argument("--before", default="56439bb")
    args = ap.parse_args()
    old = Path(tempfile.mkdtemp(prefix="metaq-bench-before-")) / "tree"
    subprocess.run(["git", "-C", str(HERE), "worktree", "add", "--detach", str(old),
                    args.before], check=True, capture_output=True)
    try:
        runs: dict[str, list[float]] = {"before": [], "now": []}
        for _ in range(3):
            runs["before"].append(cost(old, args.tasks))
            runs["now"].append(cost(HERE, args.tasks))
    finally:
        subprocess.run(["git", "-C", str(HERE), "worktree", "remove", "--force", str(old)],
                       capture_output=True)
    before, now = statistics.median(runs["before"]), statistics.median(runs["now"])
    print(f"whole-node launch cost per task, {args.tasks} no-op tasks, 4 at a time "
          f"(median of 3, interleaved)")
    for name, label in (("before", f"before shares ({args.before})"), ("now", "now")):
        print(f"  {label:<26} {statistics.median(runs[name]):.3f} ms  "
              f"(runs {', '.join(f'{x:.3f}' for x in runs[name])})")
    ratio = now / before
    print(f"  ratio now/before: {ratio:.3f} (target <= {TARGET}) "
          f"{'met' if ratio <= TARGET else 'NOT met'}")


if __name__ == "__main__":
    main()
