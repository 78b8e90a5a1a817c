"""The claim-time cost of ``#METAQ CREATES``: 10 globs per task over a folder of 10^5 files.

Builds a folder of N output files (default 100,000: ``cfg_<task>_<k>_<tag>.h5``, 10 per task,
not empty) and a task per 10 files whose header has 10 ``CREATES`` globs
(``out/cfg_<task>_<k>_*.h5``), then times the runner's look at each task's outputs
(:class:`metaq_py.runner.tasks.outputs.Outputs`, the look a runner makes after each claim):
the first look (which lists the folder), then every task's, all outputs present (the whole
look: 10 globs matched), and again with the outputs of every other task missing.

Beside it, from the same run, the peer: what a generator does by hand today, Python's
``glob.glob`` for each of the 10 patterns (a listing of the folder per pattern).

No output's content is read: an audit hook counts every ``open`` of a path in the folder
and the bench fails if there is one.

    python bench/creates_lookup.py [--files N] [--dir SCRATCH] [--tasks T]
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from metaq_py.directives import parse_header
from metaq_py.runner.tasks.outputs import Outputs

TARGET_MS = 1.0
"""The issue's bound: under 1 ms per task."""


def build(out: Path, n: int) -> int:
    out.mkdir(parents=True)
    tasks = n // 10
    for t in range(tasks):
        for k in range(10):
            fd = os.open(out / f"cfg_{t}_{k}_a{t % 7}.h5", os.O_WRONLY | os.O_CREAT, 0o644)
            os.write(fd, b"x")
            os.close(fd)
    return tasks


def spec_of(t: int):
    lines = "".join(f"#METAQ CREATES out/cfg_{t}_{k}_*.h5\n" for k in range(10))
    return parse_header(f"#!/bin/bash\n{lines}true\n".encode(), path=f"t{t}.sh")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--tasks", type=int, default=2000, help="tasks looked at (timed)")
    ap.add_argument("--dir", type=Path, default=None)
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(dir=args.dir, prefix="creates-bench-"))
    try:
        out = scratch / "out"
        t0 = time.perf_counter()
        tasks = build(out, args.files)
        print(f"built {args.files} files in {out} in {time.perf_counter() - t0:.1f} s")
        opened: list[str] = []
        where = str(out)

        def audit(event: str, a: tuple) -> None:
            if event == "open" and isinstance(a[0], str | bytes | os.PathLike) and \
                    os.fsdecode(a[0]).startswith(where):
                opened.append(os.fsdecode(a[0]))

        sys.addaudithook(audit)
        n = min(args.tasks, tasks)
        step = max(1, tasks // n)
        chosen = list(range(0, tasks, step))[:n]
        specs = [spec_of(t) for t in chosen]
        outputs = Outputs(scratch)
        t0 = time.perf_counter()
        first = outputs.look(specs[0])
        first_ms = (time.perf_counter() - t0) * 1e3
        assert first.done, first
        t0 = time.perf_counter()
        for s in specs:
            assert outputs.look(s).done
        all_ms = (time.perf_counter() - t0) * 1e3 / len(specs)
        # Every other task misses one output (its last glob): the look stops there.
        for t in chosen[1::2]:
            for p in out.glob(f"cfg_{t}_9_*.h5"):
                p.unlink()
        outputs = Outputs(scratch)
        t0 = time.perf_counter()
        done = sum(outputs.look(s).done for s in specs)
        mixed_ms = (time.perf_counter() - t0) * 1e3 / len(specs)
        assert done == (len(specs) + 1) // 2, done
        # The peer: glob.glob for each pattern, as a generator does by hand.
        peer = specs[: max(1, min(50, len(specs)))]
        t0 = time.perf_counter()
        for s in peer:
            all(glob.glob(str(scratch / p)) for p in s.creates)
        peer_ms = (time.perf_counter() - t0) * 1e3 / len(peer)
        print(f"folder of {args.files} files, 10 CREATES globs per task, {len(specs)} tasks")
        print(f"  first look (lists the folder):             {first_ms:8.2f} ms")
        print(f"  per task, every output there (10 globs):   {all_ms:8.3f} ms"
              f"   (target < {TARGET_MS} ms)")
        print(f"  per task, half the tasks missing one:      {mixed_ms:8.3f} ms"
              f"   (listing made again first)")
        print(f"  peer, glob.glob per pattern ({len(peer)} tasks):   {peer_ms:8.2f} ms per task")
        print(f"  opens of an output: {len(opened)}")
        ok = all_ms < TARGET_MS and mixed_ms < TARGET_MS and not opened
        print("OK" if ok else "OVER TARGET or an output was opened")
        return 0 if ok else 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
