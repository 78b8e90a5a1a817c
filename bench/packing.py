"""GPU packing of shares of a node, against a perfect packing and against whole nodes.

A pretend cluster of 4 nodes x 4 GPUs x 64 cores runs 2,000 tasks (default) of three shapes,
drawn reproducibly: 1 GPU + 8 cores (60%), 32 cores without GPUs (25%), and 2 whole nodes
with their 8 GPUs (15%), each running 10 to 60 minutes with an honest ``MIN_WC_TIME``. The
real runner (EASY) drives a real queue on disk, with stand-in processes on a fake clock
(``tests/runner/fakes.py``'s ``World``), so days of work take minutes: about 3 and 4 minutes
for the two runs of 2,000 tasks on the shared 2-core machine, most of it the real queue's
claims and moves on disk.

Printed: the GPU-hours used over the GPU-hours available (16 GPUs times the makespan), and a
perfect packing's figure for the same tasks, whose makespan can be no shorter than the GPU
work over 16 GPUs nor the core work over 256 cores; the target is at least 90% of it. Beside
them, today's whole-node figure: the same tasks without ``#METAQ CPUS``, so each share takes a
whole node, as every task did before shares.

Binding is skipped: a pretend node has more cores (64) than this machine, and the stand-in
processes run nothing; the runner's own line saying so is printed.

    python bench/packing.py [--tasks N] [--seed S]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from metaq_py.batch import BatchOverrides, detect_batch
from metaq_py.queue.store import Queue
from metaq_py.runner.loop import Runner, RunOptions
from tests.runner.fakes import START, Behaviour, FakeWakeups, World

NODES, GPUS, CORES = 4, 4, 64
TARGET = 0.90
SETTINGS = """\
folders: [todo]
caps:
  launch_pause: 0
  tasks: 1000
heartbeat: 1h
stale_after: 3h
poll_interval: 1h
"""


@dataclass(frozen=True)
class Shape:
    """A task's shape: ``nodes`` (whole nodes) or a share of ``cores``, with ``gpus`` in all."""

    name: str
    gpus: int
    cores: int = 0
    nodes: int = 1


GPU_SHARE = Shape("1 GPU + 8 cores", gpus=1, cores=8)
CPU_SHARE = Shape("32 cores", gpus=0, cores=32)
TWO_NODES = Shape("2 whole nodes", gpus=2 * GPUS, nodes=2)


def task_set(count: int, seed: int) -> list[tuple[Shape, float]]:
    """``count`` tasks as (shape, seconds), drawn reproducibly from ``seed``."""
    rng = random.Random(seed)
    shapes = rng.choices([GPU_SHARE, CPU_SHARE, TWO_NODES], weights=[60, 25, 15], k=count)
    return [(s, 60.0 * rng.randint(10, 60)) for s in shapes]


def perfect(tasks: list[tuple[Shape, float]]) -> float:
    """The best GPU-hours used over available any packing could reach: the makespan is at
    least the GPU work over every GPU and the core work over every core."""
    gpu_s = sum(s.gpus * t for s, t in tasks)
    core_s = sum((s.cores or s.nodes * CORES) * t for s, t in tasks)
    makespan = max(gpu_s / (NODES * GPUS), core_s / (NODES * CORES))
    return gpu_s / (NODES * GPUS * makespan)


def run(tasks: list[tuple[Shape, float]], *, shares: bool) -> tuple[float, float, list[str]]:
    """Run ``tasks`` (as shares, or each on whole nodes) on a fresh queue; the GPU-hours used
    over available, the wall seconds it took, and what the runner said."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "q"
        Queue.init(root)
        (root / "metaq.yaml").write_text(SETTINGS)
        behaviours = {}
        for i, (shape, seconds) in enumerate(tasks):
            lines = ["#!/bin/sh", f"#METAQ MIN_WC_TIME {int(seconds)}"]
            if shape.cores and shares:
                lines += [f"#METAQ CPUS {shape.cores}", f"#METAQ GPUS {shape.gpus}"]
            elif not shape.cores:
                lines += [f"#METAQ NODES {shape.nodes}", f"#METAQ GPUS {shape.gpus}"]
            elif shape.gpus:
                lines += [f"#METAQ GPUS {shape.gpus}"]
            name = f"t{i:05d}.sh"
            path = root / "todo" / name
            path.write_text("\n".join(lines) + "\ntrue\n")
            path.chmod(0o755)
            behaviours[f"todo/{name}"] = Behaviour(seconds=seconds)
        said: list[str] = []
        world = World(behaviours)
        batch = detect_batch(overrides=BatchOverrides(
            system="local", nnodes=NODES, gpus_per_node=GPUS, cores_per_node=CORES), env={})
        opts = RunOptions(handle_signals=False, grace=1.0, margin=0.5)
        q = Queue(root, clock=world.clock)
        world.wakeups = FakeWakeups(world, q, opts)
        runner = Runner(q, batch, options=opts, clock=world.clock, wakeups=world.wakeups,
                        start=world.launch, say=said.append)
        began = time.perf_counter()
        runner.run()
        took = time.perf_counter() - began
        ends = [json.loads(line) for log in (root / "jobs").glob("*/events.jsonl")
                for line in log.read_text().splitlines()]
        ends = [e for e in ends if e["event"] == "end"]
        assert len(ends) == len(tasks), f"{len(ends)} of {len(tasks)} tasks ran"
        used = {e["task"]: e for e in ends}
        gpu_s = sum(shape.gpus * used[f"todo/t{i:05d}.sh"]["seconds"]
                    for i, (shape, _) in enumerate(tasks))
        makespan = max(e["time"] for e in ends) - START
        return gpu_s / (NODES * GPUS * makespan), took, said


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    tasks = task_set(args.tasks, args.seed)
    best = perfect(tasks)
    shared, took, said = run(tasks, shares=True)
    whole, took_whole, _ = run(tasks, shares=False)
    counts = {s.name: sum(1 for t, _ in tasks if t is s) for s in (GPU_SHARE, CPU_SHARE,
                                                                   TWO_NODES)}
    print(f"pretend cluster: {NODES} nodes x {GPUS} GPUs x {CORES} cores; {args.tasks} tasks: "
          + ", ".join(f"{n} {name}" for name, n in counts.items()))
    for line in said:
        if "not bound" in line:
            print(f"binding skipped: {line}")
    print(f"perfect packing:      {best:6.1%} of GPU-hours used")
    print(f"shares (CPUS):        {shared:6.1%} of GPU-hours used = {shared / best:6.1%} of "
          f"perfect (target {TARGET:.0%}) [{took:.1f} s]")
    print(f"whole nodes (today):  {whole:6.1%} of GPU-hours used = {whole / best:6.1%} of "
          f"perfect [{took_whole:.1f} s]")


if __name__ == "__main__":
    main()
