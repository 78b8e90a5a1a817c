"""What a claim costs when a running task sits under its file name, as in METAQ.

A claim renames a task to ``working/<machine>/<jobid>/<name>``; when the job already holds a
task of that name, it goes to the smallest free numbered slot ``<n>/<name>``. Looking at slots
2, 3, ... on disk in turn would make the k-th claim of one name cost k looks; the runner
keeps in mind the slots its job holds (``JobFolder``), so it looks on disk at one or two.
This builds a queue of N tasks (default 2,000) twice and claims all of them into one job:
once with N different file names (every claim lands on its name) and once with N tasks all
called ``run.sh`` in N sub-folders (the worst case: N slots). It prints the mean time per
claim for each, and the ratio (about 1 when the slots cost nothing).

METAQ itself never holds two tasks of one name in one job, so its campaigns always see the
first figure.

    python bench/claim_slots.py [--tasks N]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import metaq_py
from metaq_py.queue.store import Queue

SCRIPT = "#!/bin/sh\n#METAQ NODES 1\ntrue\n"


def claim_all(scratch: Path, n: int, *, same_name: bool) -> float:
    """Seconds per claim of ``n`` tasks into one job."""
    q = Queue.init(scratch / ("same" if same_name else "unique"))
    for i in range(n):
        path = q.root / "todo" / f"d{i:05d}" / ("run.sh" if same_name else f"t{i}.sh")
        path.parent.mkdir(parents=True)
        path.write_text(SCRIPT)
        path.chmod(0o755)
    tasks = q.pending()
    assert len(tasks) == n
    start = time.perf_counter()
    for task in tasks:
        assert q.claim(task, machine="m", jobid="1") is not None
    return (time.perf_counter() - start) / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=2000)
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="metaq-bench-slots-"))
    try:
        unique = claim_all(scratch, args.tasks, same_name=False)
        same = claim_all(scratch, args.tasks, same_name=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"build: {metaq_py.build()}")
    print(f"{args.tasks} claims into one job")
    print(f"  different names: {unique * 1e6:8.1f} us per claim")
    print(f"  all one name:    {same * 1e6:8.1f} us per claim ({args.tasks} slots)")
    print(f"  ratio:           {same / unique:8.2f}")


if __name__ == "__main__":
    main()
