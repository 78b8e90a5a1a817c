"""Tasks of several shapes (``#METAQ SHAPE``), with real processes: ``metaq run`` starts each
in the shape that starts soonest, and the task runs with that shape's nodes, GPUs and wall
clock."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_queue import metaq

# Holds one node until the shaped task has started (or 30 s have passed).
BUSY = """#!/bin/sh
#METAQ NODES 1
#METAQ MIN_WC_TIME 10:00
i=0
while [ ! -e {seen}/shaped.json ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
"""

# Four nodes for an hour, or else one node for four hours, or else a share of one node.
SHAPED = """#!/bin/sh
#METAQ NODES 4
#METAQ MIN_WC_TIME 1h
#METAQ SHAPE NODES 1 MIN_WC_TIME 4h
#METAQ SHAPE CPUS 1 GPUS 1 MIN_WC_TIME 8h
printf '{{"nnodes": "%s", "gpus": "%s", "cpus": "%s"}}\\n' \\
    "$METAQ_NNODES" "$CUDA_VISIBLE_DEVICES" "$METAQ_CPUS" > {seen}/shaped.json
"""


def _run(tmp_path: Path, tasks: dict[str, str], *run_args: str) -> tuple[dict, list[dict]]:
    """Submit ``tasks`` (name: text) in order and run them with a local ``metaq run``; what
    the shaped task reported, and the run's start events."""
    q, seen = tmp_path / "q", tmp_path / "seen"
    seen.mkdir()
    assert metaq("init", str(q)).returncode == 0
    for name, text in tasks.items():
        path = tmp_path / name
        path.write_text(text.format(seen=seen))
        path.chmod(0o755)
        done = metaq("submit", str(path), "--queue", str(q))
        assert done.returncode == 0, done.stderr
    ran = metaq("run", "--queue", str(q), "--batch", "local", "--launch-pause", "0",
                "--walltime", "12h", *run_args)
    assert ran.returncode == 0, ran.stderr
    got = json.loads((seen / "shaped.json").read_text())
    events = [json.loads(line) for p in (q / "jobs").rglob("events.jsonl")
              for line in p.read_text().splitlines()]
    return got, [e for e in events if e.get("event") == "start"]


def test_the_first_shape_runs_when_it_can_start_at_once(tmp_path: Path) -> None:
    got, starts = _run(tmp_path, {"shaped.sh": SHAPED}, "--nodes", "4")
    assert got["nnodes"] == "4"
    [start] = starts
    assert len(start["hosts"]) == 4 and start["shape"] == 0


def test_a_busy_node_makes_the_one_node_shape_start_now(tmp_path: Path) -> None:
    got, starts = _run(tmp_path, {"busy.sh": BUSY, "shaped.sh": SHAPED}, "--nodes", "4")
    assert got["nnodes"] == "1", "four nodes were not free: the one-node shape ran"
    shaped = [e for e in starts if e["task"].endswith("shaped.sh")]
    busy = [e for e in starts if e["task"].endswith("busy.sh")]
    assert len(shaped) == 1 and len(busy) == 1 and shaped[0]["shape"] == 1
    assert not set(shaped[0]["hosts"]) & set(busy[0]["hosts"])


def test_a_share_shape_starts_beside_a_share_when_the_node_is_not_free(tmp_path: Path) -> None:
    # One node with 2 cores and 2 GPUs: four nodes never fit here (that shape is left out),
    # the whole node is not free while the busy share runs, and the share shape fits beside it.
    busy_share = BUSY.replace("#METAQ NODES 1", "#METAQ CPUS 1")
    got, starts = _run(tmp_path, {"busy.sh": busy_share, "shaped.sh": SHAPED}, "--nodes", "1",
                       "--gpus-per-node", "2", "--cores-per-node", "2")
    assert got["nnodes"] == "1" and len(got["gpus"].split(",")) == 1
    [shaped] = [e for e in starts if e["task"].endswith("shaped.sh")]
    [busy] = [e for e in starts if e["task"].endswith("busy.sh")]
    assert shaped["shape"] == 2 and len(shaped["cores"]) == 1
    assert shaped["hosts"] == busy["hosts"] and shaped["cores"] != busy["cores"]
