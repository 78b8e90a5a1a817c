"""How long ``metaq submit``, ``status`` and ``run`` (one task) take from a fresh interpreter,
and how many of metaq_py's modules each loads (packages not counted, as issue 36 counted
them; ``tests/imports.py``), for this tree and, with ``--before REV``, a commit of this
repository as it was (unpacked with ``git archive``), interleaved.

Each command runs ``--repeat`` times (default 9) on a fresh queue; the median and the best
wall time are printed.

    python bench/command_start.py [--before REV] [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent

_COUNT = r"""
import atexit, json, sys
atexit.register(lambda: print("MODULES=" + json.dumps(sorted(
    m for m, mod in sys.modules.items()
    if m.startswith("metaq_py") and not hasattr(mod, "__path__"))), file=sys.stderr))
sys.argv = ["metaq", *sys.argv[1:]]
from metaq_py.cli import main
main()
"""


def _metaq(tree: Path, cwd: Path, *argv: str, count: bool = False) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    command = [sys.executable, "-c", _COUNT] if count else [sys.executable, "-m", "metaq_py"]
    return subprocess.run([*command, *argv], cwd=cwd, env=env, capture_output=True, text=True,
                          check=True)


def measure(tree: Path, repeat: int) -> dict[str, tuple[list[float], int]]:
    """Each command's wall times and module count, run from ``tree``."""
    work = Path(tempfile.mkdtemp(prefix="metaq-bench-start-"))
    try:
        _metaq(tree, work, "init", "Q")
        task = work / "t.sh"
        task.write_text("#!/bin/sh\n#METAQ MIN_WC_TIME 1m\ntrue\n")
        task.chmod(0o755)
        out: dict[str, tuple[list[float], int]] = {}
        runs = {
            "submit": lambda i: ("submit", "t.sh", "--folder", f"s{i}", "-q", "Q"),
            "status": lambda i: ("status", "-q", "Q"),
            "run": lambda i: ("run", "--nodes", "1", "--batch", "local", "--jobid", f"J{i}",
                              "-q", "Q"),
        }
        for name, argv in runs.items():
            times = []
            for i in range(repeat):
                if name == "run":
                    _metaq(tree, work, "submit", "t.sh", "--folder", f"r{i}", "-q", "Q")
                t0 = time.perf_counter()
                _metaq(tree, work, *argv(i))
                times.append(time.perf_counter() - t0)
            if name == "run":
                _metaq(tree, work, "submit", "t.sh", "--folder", "last", "-q", "Q")
            done = _metaq(tree, work, *argv(repeat), count=True)
            line = next(x for x in done.stderr.splitlines() if x.startswith("MODULES="))
            out[name] = (times, len(json.loads(line.removeprefix("MODULES="))))
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", help="a commit to measure as it was, beside this tree")
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="metaq-bench-start-trees-"))
    try:
        trees = {"this tree": HERE}
        if args.before:
            old = scratch / "before"
            old.mkdir()
            archive = subprocess.run(["git", "-C", str(HERE), "archive", args.before],
                                     check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
            trees = {args.before: old, **trees}
        found = {label: measure(tree, args.repeat) for label, tree in trees.items()}
        print(f"fresh-interpreter wall time (median, best of {args.repeat}) and metaq_py "
              f"modules loaded (packages not counted)")
        for command in ("submit", "status", "run"):
            for label, results in found.items():
                times, modules = results[command]
                print(f"  {command:7} {label:14} {statistics.median(times) * 1e3:6.0f} ms  "
                      f"best {min(times) * 1e3:6.0f} ms  {modules:3d} modules")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
