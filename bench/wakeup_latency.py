"""How soon a runner's queue watcher wakes for a task that arrives right after a claim.

A claim renames a task out of a watched task folder; watchdog holds the first half of a
rename for a while (0.5 s by default) hoping to pair it with its second half, and a task that
arrives in that instant is reported only after the hold. ``QueueWatcher`` shortens the hold
(``MOVE_PAIRING``). This measures, over N rounds of "claim, then an arrival", the time from the
arrival to the wake-up, with the watcher's hold and with watchdog's own (the peer figure,
from the same run), and prints the median and the worst of each. It was a timed assertion in
tests/queue/test_watcher.py (under 0.25 s), which a loaded machine misses.

    python bench/wakeup_latency.py [--rounds 20]
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from metaq_py.queue import watcher as watching
from metaq_py.queue.watcher import QueueWatcher


def rounds(top: Path, n: int) -> list[float]:
    """Seconds from each arrival (right after a claim) to the wake-up it causes."""
    todo, working = top / "todo", top / "working"
    todo.mkdir(parents=True)
    working.mkdir()
    took = []
    with QueueWatcher([todo], interval=30) as w:
        if not w.live:
            raise SystemExit("watchdog is not available here: nothing to measure")
        for i in range(n):
            (todo / f"c{i}.sh").write_text("#!/bin/sh\n")
            w.wait(timeout=5)
            while w.wait(timeout=0.3):
                pass
            (todo / f"c{i}.sh").rename(working / f"c{i}.sh")  # a claim
            t0 = time.monotonic()
            (todo / f"n{i}.sh").write_text("#!/bin/sh\n")  # an arrival just after it
            w.wait(timeout=5)
            took.append(time.monotonic() - t0)
            while w.wait(timeout=0.3):
                pass
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    classes = []
    for module, name in watching._PAIRING_CLASSES:
        try:
            classes.append(getattr(importlib.import_module(module), name))
        except (ImportError, AttributeError):
            continue
    default = {cls: cls.delay for cls in classes}
    with tempfile.TemporaryDirectory(prefix="metaq-bench-wake-") as tmp:
        ours = rounds(Path(tmp) / "ours", args.rounds)  # the watcher shortens the hold
        keep = watching._shorten_move_pairing
        watching._shorten_move_pairing = lambda: None  # type: ignore[assignment]
        for cls, delay in default.items():
            cls.delay = delay
        try:
            theirs = rounds(Path(tmp) / "theirs", args.rounds)
        finally:
            watching._shorten_move_pairing = keep
    held = ", ".join(f"{d:g} s" for d in default.values()) or "unknown"
    for label, took in ((f"metaq-py (hold {watching.MOVE_PAIRING:g} s)", ours),
                        (f"watchdog's own hold ({held})", theirs)):
        print(f"{label:36} median {1000 * statistics.median(took):7.1f} ms   "
              f"worst {1000 * max(took):7.1f} ms   ({len(took)} rounds)")


if __name__ == "__main__":
    main()
