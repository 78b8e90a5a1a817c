"""On-demand latency of ``metaq run``: from an on-demand task file's appearance in the queue to
its launch, when the nodes it needs are available by reservation or by preemption.

A real ``metaq run --nodes 4 --mechanism CUA&PAA --linger`` runs in its own process on a local
pretend cluster. A rigid two-node filler task keeps half of it busy (it is requeued when
preempted and comes back). This script plays the collaborator, one arrival at a time:

- even arrivals come **by reservation**: a notice for two nodes is written, the runner reserves
  the two idle nodes (CUA), and then the task naming the notice is dropped into ``todo/``;
- odd arrivals come **by preemption**: a three-node task without notice is dropped into
  ``todo/``; PAA preempts the filler, and the task starts once the filler is gone.

Before each arrival the script waits a random time up to the polling interval, so arrivals do
not line up with the runner's polling phase. The arrival is the task file's modification time
(it is written under a hidden name and renamed into place, as ``metaq submit`` does); the
launch is the runner's ``start`` event. Both come from this machine's clock.

It runs twice: with file-system events (watchdog, on this local file system) and with polling
only (``metaq run --no-fs-events``). Targets, over the arrivals: p99 at most 2 s with events,
and at most the polling interval plus 1 s with polling only.

    python bench/ondemand_latency.py [--arrivals 100] [--poll 1.0] [--seed 7]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from metaq_py.queue.notices import write_notice
from metaq_py.queue.store import Queue

JOB = "bench"
EVENTS_TARGET = 2.0
"""p99 target with file-system events, in seconds."""
POLLING_SLACK = 1.0
"""p99 target with polling only: the polling interval plus this, in seconds."""


@dataclass
class EventTail:
    """The runner's event log, read as it grows."""

    path: Path
    events: list[dict] = field(default_factory=list)
    _offset: int = 0

    def refresh(self) -> list[dict]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return self.events
        end = data.rfind(b"\n") + 1  # a line still being written waits for the next read
        for line in data[:end].splitlines():
            if line.strip():
                self.events.append(json.loads(line))
        self._offset += end
        return self.events

    def of(self, kind: str, **match: object) -> list[dict]:
        return [e for e in self.refresh() if e["event"] == kind
                and all(e.get(k) == v for k, v in match.items())]


def _task(q: Queue, name: str, body: str, **directives: object) -> Path:
    """Write an executable task into ``todo/`` whole, at once (hidden name, then rename)."""
    head = "".join(f"#METAQ {k} {v}\n" for k, v in directives.items())
    path = q.root / "todo" / name
    tmp = path.with_name(f".{name}.tmp")
    tmp.write_text(f"#!/bin/sh\n{head}{textwrap.dedent(body).lstrip()}")
    tmp.chmod(0o755)
    tmp.rename(path)
    return path


def _until(what: str, predicate, runner: subprocess.Popen, log: Path,
           timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if runner.poll() is not None:
            sys.exit(f"metaq run stopped while waiting for {what}:\n{log.read_text()[-3000:]}")
        time.sleep(0.01)
    sys.exit(f"timed out after {timeout:g} s waiting for {what}:\n{log.read_text()[-3000:]}")


def measure(scratch: Path, *, arrivals: int, poll: float, fs_events: bool,
            seed: int) -> dict[str, list[float]]:
    """Latencies in seconds of ``arrivals`` on-demand tasks, by how their nodes came."""
    rng = random.Random(seed)
    root = scratch / ("events" if fs_events else "polling")
    Queue.init(root)
    (root / "metaq.yaml").write_text(
        f"defaults:\n  min_wc_time: 1m\ncaps:\n  launch_pause: 0\npoll_interval: {poll}\n")
    q = Queue(root)
    _task(q, "filler.sh", "exec sleep 100000\n", NODES=2, SIGNAL="TERM@1")
    log = scratch / f"runner-{root.name}.log"
    cmd = [sys.executable, "-m", "metaq_py", "run", "-q", str(root), "--batch", "local",
           "--jobid", JOB, "--nodes", "4", "--mechanism", "CUA&PAA", "--linger",
           "--walltime", "1h", "--grace", "1", "--margin", "1",
           "--fs-events" if fs_events else "--no-fs-events"]
    with open(log, "w") as out:
        runner = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    tail = EventTail(root / "jobs" / JOB / "events.jsonl")
    got: dict[str, list[float]] = {"reservation": [], "preemption": []}
    try:
        _until("the filler to start", lambda: bool(tail.of("start", task="todo/filler.sh")),
               runner, log)
        for i in range(arrivals):
            name = f"od{i:03d}.sh"
            if i % 2 == 0:
                how = "reservation"
                now = time.time()
                write_notice(root, name=f"n{i:03d}", nodes=2, arrival=now + 0.5, walltime=60,
                             now=now)
                _until(f"the reservation for n{i:03d}",
                       lambda i=i: sum(len(e["hosts"]) for e in
                                       tail.of("reserve", notice=f"n{i:03d}")) >= 2,
                       runner, log)
                directives = {"NODES": 2, "NOTICE": f"n{i:03d}"}
            else:
                how = "preemption"
                directives = {"NODES": 3}
            fillers = len(tail.of("start", task="todo/filler.sh"))
            time.sleep(rng.uniform(0, poll))
            arrived = _task(q, name, "exit 0\n", TYPE="ondemand", MIN_WC_TIME="30s",
                            **directives).stat().st_mtime
            _until(f"{name} to end", lambda name=name: bool(tail.of("end", task=f"todo/{name}")),
                   runner, log)
            (start,) = tail.of("start", task=f"todo/{name}")
            if how == "preemption":
                assert start["lenders"] == ["todo/filler.sh"], start
                _until("the filler to come back",
                       lambda n=fillers: len(tail.of("start", task="todo/filler.sh")) > n,
                       runner, log)
            else:
                assert start["notice"] == f"n{i:03d}" and not start["lenders"], start
            got[how].append(start["time"] - arrived)
    finally:
        if runner.poll() is None:
            runner.send_signal(signal.SIGTERM)
        runner.wait(timeout=60)
    done = sum(1 for p in (root / "finished" / "todo").iterdir() if p.name.startswith("od"))
    assert done == arrivals, f"only {done} of {arrivals} on-demand tasks finished"
    return got


def percentile(values: list[float], p: float) -> float:
    """The nearest-rank ``p``-th percentile (p99 of 100 values is the 99th smallest)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def _line(label: str, values: list[float]) -> str:
    return (f"    {label:<12} n={len(values):3d}  p50 {percentile(values, 50):6.3f} s  "
            f"p99 {percentile(values, 99):6.3f} s  max {max(values):6.3f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arrivals", type=int, default=100)
    ap.add_argument("--poll", type=float, default=1.0,
                    help="poll_interval of the queue, in seconds")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    if args.arrivals < 2 or args.poll <= 0:
        sys.exit("--arrivals must be at least 2 and --poll above 0")
    scratch = Path(tempfile.mkdtemp(prefix="metaq-bench-ondemand-"))
    print(f"on-demand latency: task file appears -> launch; {args.arrivals} arrivals per mode, "
          f"half by reservation (CUA), half by preemption (PAA); 4 local nodes; "
          f"poll_interval {args.poll:g} s; {os.cpu_count()} cores")
    try:
        for fs_events in (True, False):
            got = measure(scratch, arrivals=args.arrivals, poll=args.poll,
                          fs_events=fs_events, seed=args.seed)
            every = got["reservation"] + got["preemption"]
            target = EVENTS_TARGET if fs_events else args.poll + POLLING_SLACK
            p99 = percentile(every, 99)
            mode = ("file-system events (watchdog)" if fs_events
                    else f"polling only, every {args.poll:g} s (--no-fs-events)")
            print(f"  {mode}")
            print(_line("all", every))
            print(_line("reservation", got["reservation"]))
            print(_line("preemption", got["preemption"]))
            print(f"    target p99 <= {target:g} s: {'met' if p99 <= target else 'NOT met'}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
