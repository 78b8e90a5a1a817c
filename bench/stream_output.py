"""A task that prints a lot, binary and without a newline, with ``output: streams`` (issue 29,
part 1: bounded memory, nothing lost).

Runs one real ``metaq run`` (a process) over a task that writes N MiB (default 1024) of binary
bytes with no newline to stdout and a line to stderr, then reads it back with ``metaq log``
into a pipe, and prints: the runner's peak memory and wall time, the bytes ``metaq log``
gave back (which must be all of them), its peak memory and time, and the inodes the queue
holds. The same task with ``output: files`` is run beside it for the runner's figures.

    python bench/stream_output.py [--mib N]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ENV = dict(os.environ, PYTHONPATH=str(REPO))


def child_peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def run(scratch: Path, output: str, mib: int) -> None:
    queue = scratch / output / "queue"
    queue.parent.mkdir(parents=True)
    subprocess.run([sys.executable, "-m", "metaq_py", "init", str(queue)], check=True,
                   capture_output=True, env=ENV)
    (queue / "metaq.yaml").write_text(f"defaults:\n  min_wc_time: 1m\noutput: {output}\n")
    script = queue / "todo" / "big.sh"
    # Pseudo-random binary bytes, no newline at the end.
    script.write_text(f"#!/bin/sh\nopenssl enc -aes-128-ctr -pass pass:metaq -nosalt "
                      f"-pbkdf2 </dev/zero 2>/dev/null | head -c {mib}M\n")
    script.chmod(0o755)
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "metaq_py", "run", "--queue", str(queue),
                           "--batch", "local", "--nodes", "1", "--launch-pause", "0",
                           "--jobid", "big"], env=ENV, capture_output=True, text=True)
    took = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(f"metaq run failed: {done.stderr[-2000:]}")
    # RUSAGE_CHILDREN is the largest child so far: run the files case first (see main).
    print(f"output: {output}, a task printing {mib} MiB of binary bytes, no newline")
    print(f"  metaq run: {took:6.1f} s, peak memory of the largest process so far "
          f"{child_peak_mib():7.1f} MiB")
    if output == "streams":
        t0 = time.perf_counter()
        log = subprocess.Popen([sys.executable, "-m", "metaq_py", "log", "--queue", str(queue),
                                "big.sh"], env=ENV, stdout=subprocess.PIPE)
        assert log.stdout is not None
        digest, size = hashlib.sha256(), 0
        while piece := log.stdout.read(1 << 20):
            digest.update(piece)
            size += len(piece)
        log.wait()
        took = time.perf_counter() - t0
        want = subprocess.run(f"openssl enc -aes-128-ctr -pass pass:metaq -nosalt -pbkdf2 "
                              f"</dev/zero 2>/dev/null | head -c {mib}M | sha256sum",
                              shell=True, capture_output=True, text=True).stdout.split()[0]
        same = "the same bytes" if digest.hexdigest() == want else "NOT the same bytes"
        print(f"  metaq log: {took:6.1f} s, {size} bytes ({same} as the task wrote), peak "
              f"memory of the largest process so far {child_peak_mib():7.1f} MiB")
    inodes = sum(1 + len(files) for _, _, files in os.walk(queue))
    print(f"  inodes in the queue afterwards: {inodes}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mib", type=int, default=1024)
    args = ap.parse_args()
    if shutil.which("openssl") is None:
        sys.exit("openssl is needed for the task's bytes")
    scratch = Path(tempfile.mkdtemp(prefix="metaq-bench-streams-"))
    try:
        run(scratch, "files", args.mib)
        run(scratch, "streams", args.mib)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
