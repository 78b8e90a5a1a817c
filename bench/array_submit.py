"""How long submitting a task array takes: ``metaq submit --array 0-9999`` (target: 2 s).

Submits an array of N indices (default 10,000) into a fresh queue in a scratch folder, first
through the queue's own call (:meth:`~metaq_py.queue.submit.Submitter.submit`) and then as a
person would, through a ``metaq submit`` process (Python's start-up and imports included),
then an array whose every index waits for its own index of the first
(``#METAQ AFTER prop.sh[{index}]``), and prints each time, the files made and a cold scan of
the result.

    python bench/array_submit.py [--indices N] [--dir SCRATCH]
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

from metaq_py.queue.store import Queue
from metaq_py.queue.submit import Submitter

TARGET = 2.0


def script(path: Path, directives: str = "") -> Path:
    path.write_text(f"#!/bin/bash\n#METAQ MIN_WC_TIME 10m\n{directives}echo $METAQ_ARRAY_INDEX\n")
    path.chmod(0o755)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--indices", type=int, default=10_000)
    ap.add_argument("--dir", type=Path, default=None)
    args = ap.parse_args()
    top = Path(tempfile.mkdtemp(prefix="metaq-array-", dir=args.dir))
    span = f"0-{args.indices - 1}"
    try:
        q = Queue.init(top / "q")
        t0 = time.perf_counter()
        Submitter(q).submit(script(top / "prop.sh"), array=span)
        in_process = time.perf_counter() - t0
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "metaq_py", "submit", "--queue", str(q.root),
                        "--array", span, "--folder", "cli", str(script(top / "prop.sh"))],
                       check=True, capture_output=True)
        command = time.perf_counter() - t0
        t0 = time.perf_counter()
        Submitter(q).submit(script(top / "con.sh", "#METAQ AFTER prop.sh[{index}]\n"),
                             array=span)
        dependent = time.perf_counter() - t0
        t0 = time.perf_counter()
        n = len(Queue(q.root).scan().tasks)
        scan = time.perf_counter() - t0
    finally:
        shutil.rmtree(top, ignore_errors=True)
    print(f"array of {args.indices} indices (target {TARGET:.1f} s each):")
    print(f"  submit, in process:              {in_process:6.3f} s "
          f"({'ok' if in_process <= TARGET else 'SLOW'})")
    print(f"  metaq submit --array, a process: {command:6.3f} s "
          f"({'ok' if command <= TARGET else 'SLOW'})")
    print(f"  with AFTER prop.sh[{{index}}]:     {dependent:6.3f} s "
          f"({'ok' if dependent <= TARGET else 'SLOW'})")
    print(f"  cold scan of the {n} tasks:     {scan:6.3f} s")


if __name__ == "__main__":
    main()
