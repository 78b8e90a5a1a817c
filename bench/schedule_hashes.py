"""Hashes of schedules: does a change to the policy core leave every schedule as it was?

Prints one line per run: a name, the number of actions the scheduler took, and a SHA-256 (first
16 hex digits) of every action in order with the time it was taken at (so every job's starts,
with their nodes, every preemption, shrink, expand, reservation and release), and of every
job's outcome (first start, end, preemptions, shrinks). Two revisions of the code schedule alike
exactly when their lines are equal. Runs:

- the shared Theta traces (``../shared/traces/*.swf.gz``, plain: every job rigid) and the
  synthetic default of ``metaq simulate`` (10,000 jobs, seed 0), under ``easy`` and
  ``conservative``;
- the W5 hybrid workload (seed 0) of Theta 2022 and of the synthetic trace under the
  baselines and a few on-demand mechanisms, over EASY and over conservative backfilling;
- random machines, as the live runner sees them (shares of nodes, an allocation's end, tasks
  of several shapes, malleable tasks), each decided once by ``easy`` and ``conservative``:
  the simulator never exercises these paths.

Run: ``python bench/schedule_hashes.py [--quick] [--completion pool]`` (``--quick`` skips the
Theta W5 runs; ``--completion pool`` gives the on-demand mechanisms the completion rule
before R12, the only default of theirs that changed since the first hashes were taken; code
from before R12 has no such rule and runs as ``pool``, and says so). It runs the checkout it
lives in (whatever ``metaq_py`` is installed), and says so.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import math
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout, first

import metaq_py
from metaq_py import build
from metaq_py.cluster import Cluster
from metaq_py.policy import Job, Kind, make_scheduler, queue_key
from metaq_py.policy.mechanisms import Scheduler
from metaq_py.policy.model import Decision
from metaq_py.policy.shares import NodeShape
from metaq_py.policy.snapshot import Snapshot
from sim.engine.core import simulate
from sim.trace.loader import load_trace
from sim.trace.synthetic import synthetic_trace
from sim.workload.model import WorkloadModel, hybrid_workload

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"


class Recording(Scheduler):
    """A scheduler that hashes every action it decides, with the time of the decision."""

    def __init__(self, base: Scheduler) -> None:
        super().__init__(**{f.name: getattr(base, f.name) for f in dataclasses.fields(base)})
        object.__setattr__(self, "digest", hashlib.sha256())
        object.__setattr__(self, "count", 0)

    def decide(self, snapshot: Snapshot) -> Decision:
        decision = super().decide(snapshot)
        if decision.actions:
            self.digest.update(repr((snapshot.now, decision.actions)).encode())
            object.__setattr__(self, "count", self.count + len(decision.actions))
        return decision


COMPLETION = ["return"]
"""The completion rule the hybrid runs use (``--completion``)."""


HAS_COMPLETION = "completion" in {f.name for f in dataclasses.fields(Scheduler)}
"""Whether the code run has the completion rule at all (code before R12 has none: its nodes
always go to the common pool, ``--completion pool``'s behaviour)."""


def run(name: str, source: object, policy: str, **options: str) -> None:
    t0 = time.perf_counter()
    if "&" in policy and HAS_COMPLETION:
        options = {**options, "completion": COMPLETION[0]}
    scheduler = Recording(make_scheduler(policy, **options))
    result = simulate(source, policy=scheduler)  # type: ignore[arg-type]
    for o in result.outcomes:
        scheduler.digest.update(repr((o.id, o.start, o.end, o.preemptions, o.shrinks)).encode())
    print(f"{name:<44} {scheduler.count:>8} actions  {scheduler.digest.hexdigest()[:16]}  "
          f"({time.perf_counter() - t0:.1f} s)", flush=True)


def random_machine(rng: random.Random) -> tuple[Cluster, list[Job], float, bool]:
    """A cluster of 2-12 nodes (with shares of nodes half the time) running random jobs, a
    random queue (rigid, malleable, shares, tasks of two shapes), an end and an oracle."""
    total = rng.randint(2, 12)
    shape = rng.choice([None, None, NodeShape(8, 2), NodeShape(4)])
    c = Cluster(total, shape=shape)
    walls = [10.0, 50.0, 100.0, 300.0, 1000.0]
    for i in range(rng.randint(0, 10)):
        wall, elapsed = rng.choice(walls), rng.random()
        free = sorted(c.free)
        if shape is not None and rng.random() < 0.5:
            cores, gpus = rng.randint(1, 4), rng.randint(0, shape.gpus)
            node = rng.randrange(total)
            load = c.shares.loads.get(node) if c.shares is not None else None
            if (load is None and node in c.free) or (load is not None and load.fits(cores, gpus)):
                c.start(Job(f"r{i}", Kind.RIGID, 1, wall, -wall, runtime=wall * 0.4,
                            cores=cores, gpus=gpus), (node,), now=-elapsed * wall)
            continue
        size = rng.randint(1, 4)
        if size <= len(free):
            c.start(Job(f"r{i}", Kind.RIGID, size, wall, -wall, runtime=wall * 0.7),
                    tuple(free[:size]), now=-elapsed * wall)
    queue = []
    for k in range(rng.randint(0, 16)):
        wall, roll = rng.choice(walls), rng.random()
        size = rng.randint(1, total + 1)
        if shape is not None and roll < 0.3:
            queue.append(Job(f"q{k}", Kind.RIGID, 1, wall, float(-k), runtime=wall * 0.5,
                             cores=rng.randint(1, 9), gpus=rng.randint(0, 3)))
        elif roll < 0.55:
            queue.append(Job(f"q{k}", Kind.MALLEABLE, size, wall, float(-k), runtime=wall * 0.9,
                             min_size=rng.randint(1, size)))
        elif roll < 0.7:
            other = Job(f"q{k}", Kind.RIGID, max(1, size // 2), wall * 2, float(-k),
                        runtime=wall * 1.2)
            queue.append(Job(f"q{k}", Kind.RIGID, size, wall, float(-k), runtime=wall * 0.6,
                             shapes=(other,)))
        else:
            queue.append(Job(f"q{k}", Kind.RIGID, size, wall, float(-k), runtime=wall * 0.6))
    end = rng.choice([math.inf, math.inf, 120.0, 600.0])
    return c, sorted(queue, key=queue_key), end, rng.random() < 0.3


def random_decisions(policy: str, count: int) -> None:
    rng = random.Random(2024)
    digest = hashlib.sha256()
    actions = 0
    plain = make_scheduler(policy)
    oracle = make_scheduler(policy, oracle=True)
    for _ in range(count):
        c, queue, end, use_oracle = random_machine(rng)
        snap = c.snapshot(now=0.0, waiting=queue, end=end, shaped=None)
        decision = (oracle if use_oracle else plain).decide(snap)
        actions += len(decision.actions)
        digest.update(repr(decision).encode())
    print(f"{'random machines, ' + policy:<44} {actions:>8} actions  "
          f"{digest.hexdigest()[:16]}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the Theta W5 runs")
    parser.add_argument("--completion", default="return", choices=("return", "pool"),
                        help="the hybrid runs' completion rule (pool: before R12)")
    parser.add_argument("--traces", type=Path, default=TRACES,
                        help=f"folder of the *.swf.gz traces (default {TRACES})")
    args = parser.parse_args()
    traces_dir = args.traces
    COMPLETION[0] = args.completion
    rule = f"completion {COMPLETION[0]}" if HAS_COMPLETION else \
        "no completion rule (before R12: the common pool)"
    print(f"metaq_py from {Path(metaq_py.__file__).parent} ({build()}); traces from "
          f"{traces_dir}; hybrid runs: {rule}")
    synthetic = synthetic_trace(jobs=10_000, seed=0)
    traces = [(p.name.removesuffix(".swf.gz"), load_trace(p))
              for p in sorted(traces_dir.glob("*.swf.gz"))]
    if not traces:
        print(f"no traces under {traces_dir}: only the synthetic runs", file=sys.stderr)
    for label, trace in [*traces, ("synthetic", synthetic)]:
        for policy in ("easy", "conservative"):
            run(f"{label}, {policy}", trace, policy)
    w5 = WorkloadModel.for_workload("W5", seed=0)
    hybrids = [("synthetic W5", hybrid_workload(synthetic, w5))]
    if traces and not args.quick:
        hybrids.insert(0, (f"{traces[0][0]} W5", hybrid_workload(traces[0][1], w5)))
    for label, workload in hybrids:
        for policy, options in (("easy", {}), ("conservative", {}), ("CUA&SPAA", {}),
                                ("N&PAA", {}), ("CUP&PAA", {}),
                                ("CUA&SPAA", {"backfill": "conservative"}),
                                ("CUP&SPAA", {"backfill": "conservative"})):
            suffix = " over conservative" if options else ""
            run(f"{label}, {policy}{suffix}", workload, policy, **options)
    for policy in ("easy", "conservative"):
        random_decisions(policy, 20_000)


if __name__ == "__main__":
    main()
