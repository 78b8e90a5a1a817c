"""Shares of a node, with real processes: ``metaq run --batch local`` places several share
tasks on one node at once, each with its own GPU ids and cores."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_queue import metaq
from tests.runner_helpers import wait_until

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


def _run_shares(tmp_path: Path, text: str, count: int,
                *run_args: str) -> tuple[list[dict], list[dict]]:
    """Submit ``count`` copies of the task ``text`` to a new queue, run them with a local
    ``metaq run`` and ``run_args``; what each one reported, and the run's start events."""
    q, seen = tmp_path / "q", tmp_path / "seen"
    seen.mkdir()
    assert metaq("init", str(q)).returncode == 0
    for i in range(count):
        task = tmp_path / f"t{i}.sh"
        task.write_text(text.format(seen=seen))
        task.chmod(0o755)
        done = metaq("submit", str(task), "--again", "--queue", str(q))  # copies
        assert done.returncode == 0, done.stderr
    ran = metaq("run", "--queue", str(q), "--batch", "local", "--launch-pause", "0", *run_args)
    assert ran.returncode == 0, ran.stderr
    got = [json.loads(p.read_text()) for p in sorted(seen.glob("*.json"))]
    assert len(got) == count, (ran.stdout, ran.stderr)
    events = [json.loads(line) for p in (q / "jobs").rglob("events.jsonl")
              for line in p.read_text().splitlines()]
    return got, [e for e in events if e.get("event") == "start"]


def test_four_one_gpu_shares_run_at_once_on_two_nodes(tmp_path: Path) -> None:
    got, starts = _run_shares(tmp_path, TASK, 4, "--nodes", "2", "--gpus-per-node", "2",
                      "--cores-per-node", "2")
    assert all(g["marks"] == 4 for g in got), "the four ran at the same time"
    places = {(g["host"], g["gpus"]) for g in got}
    assert len(places) == 4, f"each share has its own (host, GPU): {got}"
    assert {g["gpus"] for g in got} == {"0", "1"} and len({g["host"] for g in got}) == 2
    cores = {(g["host"], g["cpus"]) for g in got}
    assert len(cores) == 4 and {g["cpus"] for g in got} == {"0", "1"}
    assert len(starts) == 4 and all(len(e["cores"]) == 1 and len(e["gpu_ids"]) == 1
                                    for e in starts)


def test_the_node_shape_comes_from_the_batch_system_else_the_process() -> None:
    import os

    from metaq_py.batch.base import node_cores

    assert node_cores({"SLURM_CPUS_ON_NODE": "64"}) == 64
    assert node_cores({"SLURM_JOB_CPUS_PER_NODE": "128(x2),64"}) == 128
    assert node_cores({"NCPUS": "32"}) == 32
    assert node_cores({"SLURM_CPUS_ON_NODE": "junk"}) == len(os.sched_getaffinity(0))


# --------------------------------------------------------------------------- on demand


def _share_runner(q, **options: object):
    from metaq_py.batch import BatchOverrides, detect_batch
    from metaq_py.runner.loop import Runner, RunOptions

    batch = detect_batch(overrides=BatchOverrides(system="local", nnodes=1, gpus_per_node=2,
                                                  cores_per_node=2), env={})
    options.setdefault("margin", 0.5)
    return Runner(q, batch, options=RunOptions(handle_signals=False, **options),
                  say=lambda line: None)



def test_paa_preempts_every_share_of_the_node_and_each_resumes_once(tmp_path: Path) -> None:
    import threading

    from tests.runner_helpers import events, make_queue, of, task, where

    q = make_queue(tmp_path / "q")
    out = tmp_path / "out"
    out.mkdir()
    # one share takes 1.5 s to stop, the other none: the node is not free until both have
    # (whichever of them was preempted first)
    for name, stop in (("a", "1.5"), ("b", "0")):
        task(q, f"{name}.sh", f"""
            echo "start $METAQ_ATTEMPT $METAQ_RESUME" >> {out}/{name}
            [ "$METAQ_RESUME" = 1 ] && exit 0
            trap 'sleep {stop}; echo saved >> {out}/{name}; date +%s.%N > {out}/{name}.gone; \
exit 0' TERM
            sleep 60 & wait
        """, CPUS=1, GPUS=1, CHECKPOINT="10m 1s")

    def arrive() -> None:
        wait_until(lambda: (out / "a").exists() and (out / "b").exists())
        task(q, "urgent.sh", f"date +%s.%N > {out}/urgent", TYPE="ondemand", NODES=1,
             MIN_WC_TIME="10s")

    threading.Thread(target=arrive, daemon=True).start()
    _share_runner(q, scheduler="N&PAA", grace=5.0).run()
    for name in ("a", "b"):
        assert (out / name).read_text().splitlines() == ["start 1 0", "saved", "start 2 1"]
        assert where(q, f"{name}.sh") == "finished"
    evs = events(q)
    preempted = of(evs, "preempt", for_task="todo/urgent.sh")
    assert sorted(e["task"] for e in preempted) == ["todo/a.sh", "todo/b.sh"]
    for name in ("a", "b"):
        assert len(of(evs, "start", task=f"todo/{name}.sh")) == 2  # resumed exactly once
    urgent = float((out / "urgent").read_text())
    assert urgent >= float((out / "a.gone").read_text()), "it started while a was stopping"
    assert urgent >= float((out / "b.gone").read_text())


def test_a_notice_collects_a_node_once_its_last_share_has_ended(tmp_path: Path) -> None:
    import threading
    import time

    from metaq_py.queue.notices import write_notice
    from tests.runner_helpers import events, make_queue, of, task, where

    q = make_queue(tmp_path / "q")
    for name, seconds in (("a", 1), ("b", 3)):
        task(q, f"{name}.sh", f"sleep {seconds}", CPUS=1, GPUS=1, MIN_WC_TIME="20s")
    noticed: list[float] = []

    def arrive() -> None:
        wait_until(lambda: len(of(events(q), "start")) == 2)
        noticed.append(now := time.time())
        write_notice(q.root, name="obs", nodes=1, arrival=now + 3.0, walltime=60, now=now)
        wait_until(lambda: bool(of(events(q), "reserve")))
        task(q, "alert.sh", "true", TYPE="ondemand", NOTICE="obs", MIN_WC_TIME="10s")

    threading.Thread(target=arrive, daemon=True).start()
    _share_runner(q, scheduler="CUA&SPAA").run()
    evs = events(q)
    ends = {e["task"]: e for e in of(evs, "end")}
    reserve = of(evs, "reserve", notice="obs")
    assert reserve and reserve[0]["hosts"] == ["local0"]
    # announced while both shares ran; collected once the last of them had ended
    assert noticed[0] < ends["todo/a.sh"]["time"] <= ends["todo/b.sh"]["time"]
    assert reserve[0]["time"] >= ends["todo/b.sh"]["time"]
    assert not of(evs, "preempt")
    assert ends["todo/a.sh"]["outcome"] == ends["todo/b.sh"]["outcome"] == "finished"
    alert = of(evs, "start", task="todo/alert.sh")
    assert len(alert) == 1 and alert[0]["notice"] == "obs"
    assert alert[0]["time"] >= ends["todo/b.sh"]["time"]
    assert all(len(of(evs, "start", task=f"todo/{n}.sh")) == 1 for n in "ab")
    assert where(q, "alert.sh") == "finished"


def test_show_prints_a_running_shares_cores_and_gpus(tmp_path: Path) -> None:
    import threading

    from tests.runner_helpers import make_queue, task

    q = make_queue(tmp_path / "q")
    flag = tmp_path / "flag"
    for name in ("a", "b"):
        task(q, f"{name}.sh", f"touch {tmp_path}/{name}.up; while [ ! -e {flag} ]; do "
             f"sleep 0.05; done", CPUS=1, GPUS=1)
    run = threading.Thread(target=_share_runner(q).run, daemon=True)
    run.start()
    try:
        assert wait_until(lambda: (tmp_path / "a.up").exists() and (tmp_path / "b.up").exists())
        shown = {name: metaq("show", f"todo/{name}.sh", "--queue", str(q.root))
                 for name in ("a", "b")}
        as_json = json.loads(metaq("show", "todo/b.sh", "--json", "--queue", str(q.root)).stdout)
    finally:
        flag.touch()
        run.join(30)
    lines = {name: done.stdout.splitlines() for name, done in shown.items()}
    assert all(done.returncode == 0 for done in shown.values())
    assert all("running on: local0" in ls for ls in lines.values())
    got = sorted((next(x for x in ls if x.startswith("cores:")),
                  next(x for x in ls if x.startswith("GPUs:"))) for ls in lines.values())
    assert got == [("cores: 0 (bound)", "GPUs: 0"), ("cores: 1 (bound)", "GPUs: 1")]
    assert as_json["running"]["hosts"] == ["local0"] and len(as_json["running"]["cores"]) == 1


# METAQ's GPU-only task: NODES 0 with GPUS, and METAQ's own duration spelling.
GPU_ONLY = TASK.replace("#METAQ GPUS 1\n#METAQ CPUS 1\n#METAQ MIN_WC_TIME 5:00\n",
                        "#METAQ NODES 0\n#METAQ GPUS 1\n#METAQ MIN_WC_TIME 5min\n") \
    .replace("-lt 4", "-lt 2")


def test_metaq_gpu_only_tasks_share_one_node_with_its_cores_per_gpu(tmp_path: Path) -> None:
    got, starts = _run_shares(tmp_path, GPU_ONLY, 2, "--nodes", "1", "--gpus-per-node", "2",
                              "--cores-per-node", "4")
    assert all(g["marks"] == 2 for g in got), "the two ran at the same time on one node"
    assert {g["gpus"] for g in got} == {"0", "1"} and len({g["host"] for g in got}) == 1
    # 4 cores and 2 GPUs on the node: each one-GPU task gets 2 cores, none shared.
    assert len(starts) == 2 and all(len(e["cores"]) == 2 and len(e["gpu_ids"]) == 1
                                    for e in starts)
    assert not set(starts[0]["cores"]) & set(starts[1]["cores"])
