"""Shares of a node, with real processes: ``metaq run --batch local`` places several share
tasks on one node at once, each with its own GPU ids and cores."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_queue import metaq

# Each task records what it was given, then waits until all four have started: it can only
# see the four marks if the four ran at the same time.
TASK = """#!/bin/sh
#METAQ GPUS 1
#METAQ CPUS 1
#METAQ MIN_WC_TIME 5:00
seen={seen}
me=$(basename "$METAQ_TASK")
touch "$seen/$me.mark"
i=0
while [ "$(ls "$seen" | grep -c mark)" -lt 4 ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
printf '{{"host": "%s", "gpus": "%s", "cpus": "%s", "marks": %s}}\\n' \\
    "$METAQ_NODELIST" "$CUDA_VISIBLE_DEVICES" "$METAQ_CPUS" \\
    "$(ls "$seen" | grep -c mark)" > "$seen/$me.json"
"""


def test_four_one_gpu_shares_run_at_once_on_two_nodes(tmp_path: Path) -> None:
    q, seen = tmp_path / "q", tmp_path / "seen"
    seen.mkdir()
    assert metaq("init", str(q)).returncode == 0
    for i in range(4):
        task = tmp_path / f"t{i}.sh"
        task.write_text(TASK.format(seen=seen))
        task.chmod(0o755)
        done = metaq("submit", str(task), "--queue", str(q))
        assert done.returncode == 0, done.stderr
    ran = metaq("run", "--queue", str(q), "--batch", "local", "--nodes", "2",
                "--gpus-per-node", "2", "--cores-per-node", "2", "--launch-pause", "0")
    assert ran.returncode == 0, ran.stderr
    got = [json.loads(p.read_text()) for p in sorted(seen.glob("*.json"))]
    assert len(got) == 4, (ran.stdout, ran.stderr)
    assert all(g["marks"] == 4 for g in got), "the four ran at the same time"
    places = {(g["host"], g["gpus"]) for g in got}
    assert len(places) == 4, f"each share has its own (host, GPU): {got}"
    assert {g["gpus"] for g in got} == {"0", "1"} and len({g["host"] for g in got}) == 2
    cores = {(g["host"], g["cpus"]) for g in got}
    assert len(cores) == 4 and {g["cpus"] for g in got} == {"0", "1"}
    events = [json.loads(line) for p in (q / "jobs").rglob("events.jsonl")
              for line in p.read_text().splitlines()]
    starts = [e for e in events if e.get("event") == "start"]
    assert len(starts) == 4 and all(len(e["cores"]) == 1 and len(e["gpu_ids"]) == 1
                                    for e in starts)


def test_the_node_shape_comes_from_the_batch_system_else_the_process() -> None:
    import os

    from metaq_py.batch.base import node_cores

    assert node_cores({"SLURM_CPUS_ON_NODE": "64"}) == 64
    assert node_cores({"SLURM_JOB_CPUS_PER_NODE": "128(x2),64"}) == 128
    assert node_cores({"NCPUS": "32"}) == 32
    assert node_cores({"SLURM_CPUS_ON_NODE": "junk"}) == len(os.sched_getaffinity(0))
