"""How long junk in ``todo/`` delays the first real start (issue 28: at most 1 s more).

A queue holds one real task and N junk files in ``todo/`` (default 100,000: files that are
not executable, garbage, all settled a minute ago, as a careless or hostile member leaves
them). A ``metaq run`` process starts; the time from its start to the real task's first
line is printed, beside the same queue without the junk, from the same run. Then ``metaq
status`` on the junk queue: its time and the size of what it prints.

    python bench/junk_first_start.py [--junk N] [--dir SCRATCH]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from metaq_py.queue.store import Queue

TARGET = 1.0
"""Seconds the junk may add to the first real start."""

SETTINGS = "poll_interval: 1s\ncaps:\n  launch_pause: 0\n"


def make(root: Path, junk: int, marker: Path) -> None:
    """A queue at ``root`` with ``junk`` junk files and one real task that writes the time
    it starts into ``marker``."""
    Queue.init(root)
    (root / "metaq.yaml").write_text(SETTINGS)
    todo = root / "todo"
    for i in range(junk):
        (todo / f"junk-{i:06d}.txt").write_bytes(b"\x00not a task\n" if i % 2 else b"#!/bin/sh\n")
    real = todo / "zz-real.sh"
    real.write_text(f"#!/bin/bash\n#METAQ MIN_WC_TIME 1m\n"
                    f"{sys.executable} -c 'import time; print(time.time())' > {marker}\n")
    real.chmod(0o755)
    old = time.time() - 60
    with os.scandir(todo) as it:
        for e in it:
            os.utime(e.path, (old, old))


def first_start(root: Path, marker: Path) -> float:
    """Seconds from starting ``metaq run`` to the real task's start."""
    t0 = time.time()
    proc = subprocess.Popen([sys.executable, "-m", "metaq_py", "run", "-q", str(root),
                             "--nodes", "2", "--batch", "local", "--jobid", "b1",
                             "--grace", "1"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        while not marker.exists() or not marker.read_text().strip():
            if proc.poll() is not None:
                raise SystemExit(f"the runner stopped before the real task started ({root})")
            time.sleep(0.01)
        return float(marker.read_text()) - t0
    finally:
        proc.wait(timeout=600)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--junk", type=int, default=100_000)
    ap.add_argument("--dir", type=Path, default=None)
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="metaq-junk-", dir=args.dir))
    try:
        clean, dirty = scratch / "clean", scratch / "junk"
        make(clean, 0, scratch / "clean.start")
        t = time.perf_counter()
        make(dirty, args.junk, scratch / "junk.start")
        made = time.perf_counter() - t
        base = first_start(clean, scratch / "clean.start")
        with_junk = first_start(dirty, scratch / "junk.start")
        t = time.perf_counter()
        status = subprocess.run([sys.executable, "-m", "metaq_py", "status", "-q", str(dirty)],
                                capture_output=True, text=True)
        took = time.perf_counter() - t
        left = sum(1 for _ in os.scandir(dirty / "todo"))
        print(f"junk files in todo/: {args.junk} (made in {made:.1f} s)")
        print(f"first real start, no junk:   {base:.2f} s")
        print(f"first real start, with junk: {with_junk:.2f} s "
              f"(+{with_junk - base:.2f} s; target +{TARGET:g} s)")
        print(f"metaq status with the junk:  {took:.2f} s, "
              f"{len(status.stdout) + len(status.stderr)} bytes printed "
              f"({len(status.stdout.splitlines()) + len(status.stderr.splitlines())} lines)")
        print(f"files left in todo/ after the run: {left}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
