"""METAQ's job-script variables as ``metaq run`` options: the pure mapping (hypothesis), and a
METAQ-style job script that changes only its launch line, run for real."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from metaq_py.cli.metaq_env import IGNORED, MetaqEnvError, read_metaq_env
from metaq_py.durations import format_duration
from tests.cli.test_queue import REPO, metaq

_names = st.text("abcdefghij0123456789_-", min_size=1, max_size=12)


@given(_names, _names, st.integers(1, 4096), st.integers(0, 16), st.integers(1, 10**6),
       st.integers(0, 86400 * 30), st.booleans(), st.integers(0, 3600))
def test_every_variable_maps_to_its_option(root: str, job: str, nodes: int, per_node: int,
                                           simultaneous: int, seconds: int, forever: bool,
                                           pause: int) -> None:
    env = {"METAQ": f"/{root}", "METAQ_JOB_ID": job, "METAQ_MACHINE": root,
           "METAQ_NODES": str(nodes), "METAQ_GPUS": str(per_node * nodes),
           "METAQ_RUN_TIME": format_duration(seconds),
           "METAQ_SIMULTANEOUS_TASKS": str(simultaneous),
           "METAQ_LOOP_FOREVER": "true" if forever else "false",
           "METAQ_SLEEP_AFTER_LAUNCH": str(pause),
           "METAQ_TASK_FOLDERS": f"/{root}/priority /{root}/todo"}
    got = read_metaq_env(env)
    assert (got.queue, got.jobid, got.machine) == (Path(f"/{root}"), job, root)
    assert (got.nodes, got.gpus_per_node, got.max_tasks) == (nodes, per_node, simultaneous)
    assert (got.walltime, got.linger, got.launch_pause) == (seconds, forever, pause)
    assert got.warnings == (), "METAQ's default folders mean the same here: no warning"


@given(st.integers(0, 1000), st.integers(1, 64), st.integers(1, 64))
def test_gpus_are_a_pool_divided_among_the_nodes(gpus: int, env_nodes: int,
                                                 flag_nodes: int) -> None:
    env = {"METAQ_GPUS": str(gpus), "METAQ_NODES": str(env_nodes)}
    got = read_metaq_env(env, nodes=flag_nodes)  # --nodes overrides METAQ_NODES
    assert got.gpus_per_node == gpus // flag_nodes
    assert bool(got.warnings) == bool(gpus % flag_nodes)
    assert read_metaq_env({"METAQ_GPUS": str(gpus)}).gpus_per_node is None


@given(st.sets(st.sampled_from(sorted(IGNORED)), min_size=1))
def test_each_meaningless_variable_gets_one_line(names: set[str]) -> None:
    got = read_metaq_env({name: "1" for name in names})
    assert len(got.warnings) == len(names)
    assert all(any(w.startswith(f"{n} is ignored") for w in got.warnings) for n in names)


def test_other_task_folders_are_warned_about_not_silently_dropped() -> None:
    got = read_metaq_env({"METAQ": "/q", "METAQ_TASK_FOLDERS": "/q/todo/big /q/todo"})
    assert len(got.warnings) == 1 and "METAQ_TASK_FOLDERS is ignored" in got.warnings[0]


@pytest.mark.parametrize(("name", "value", "words"), [
    ("METAQ_NODES", "four", "METAQ_NODES must be a whole number, not 'four'"),
    ("METAQ_NODES", "0", "at least 1"),
    ("METAQ_GPUS", "-1", "whole number"),
    ("METAQ_RUN_TIME", "soon", "METAQ_RUN_TIME 'soon' is not a duration"),
    ("METAQ_LOOP_FOREVER", "yes", "true or false"),
    ("METAQ_SIMULTANEOUS_TASKS", "0", "at least 1"),
])
def test_bad_values_are_one_sentence(name: str, value: str, words: str) -> None:
    with pytest.raises(MetaqEnvError, match=words):
        read_metaq_env({name: value})


@given(st.dictionaries(st.sampled_from(["METAQ", "METAQ_NODES", "METAQ_GPUS", "METAQ_RUN_TIME",
                                        "METAQ_LOOP_FOREVER", "METAQ_SLEEP_AFTER_LAUNCH"]),
                       st.text(max_size=12)))
def test_any_values_map_or_raise_one_error(env: dict[str, str]) -> None:
    try:
        read_metaq_env(env)
    except MetaqEnvError as e:
        assert str(e) and "\n" not in str(e)


# A METAQ job script as its README shows it; only the launch line is metaq-py's.
JOB_SCRIPT = """#!/bin/bash
METAQ={queue}
METAQ_JOB_ID=job42
METAQ_NODES=2
METAQ_GPUS=4
METAQ_RUN_TIME=15:00
METAQ_MACHINE=laptop
METAQ_TASK_FOLDERS=(
    $METAQ/priority
    $METAQ/todo
    )
METAQ_SIMULTANEOUS_TASKS=2
METAQ_MAX_LAUNCHES=1048576
METAQ_LOOP_FOREVER=false
METAQ_SLEEP_AFTER_LAUNCH=0
METAQ_SLEEPY_TIME=3

export ${{!METAQ@}}; METAQ_TASK_FOLDERS="${{METAQ_TASK_FOLDERS[*]}}" \\
    {python} -m metaq_py run --batch local
"""


def test_a_metaq_job_script_runs_with_only_its_launch_line_changed(tmp_path: Path) -> None:
    import sys

    q = tmp_path / "q"
    assert metaq("init", str(q)).returncode == 0
    out = tmp_path / "out"
    out.mkdir()
    for i in range(3):
        task = q / "todo" / f"t{i}.sh"
        task.write_text(f"#!/bin/sh\n#METAQ NODES 1\n#METAQ GPUS 2\n#METAQ MIN_WC_TIME 1min\n"
                        f"echo \"$CUDA_VISIBLE_DEVICES\" > {out}/t{i}\n")
        task.chmod(0o755)
    job = tmp_path / "job.sh"
    job.write_text(JOB_SCRIPT.format(queue=q, python=sys.executable))
    job.chmod(0o755)
    ran = subprocess.run(["bash", str(job)], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO),
                                           "HOME": str(tmp_path)})
    assert ran.returncode == 0, ran.stderr
    assert sorted(p.name for p in out.iterdir()) == ["t0", "t1", "t2"]
    # Two GPUs per node (METAQ_GPUS 4 over METAQ_NODES 2): each task got both of one node.
    assert {p.read_text().strip() for p in out.iterdir()} == {"0,1"}
    warned = [line for line in ran.stderr.splitlines() if line.startswith("warning:")]
    assert sorted(w.split()[1] for w in warned) == ["METAQ_MAX_LAUNCHES", "METAQ_SLEEPY_TIME"]
    events = [json.loads(line) for p in (q / "jobs").rglob("events.jsonl")
              for line in p.read_text().splitlines()]
    assert len([e for e in events if e.get("event") == "start"]) == 3
    assert [p.parent.name for p in (q / "jobs").rglob("events.jsonl")] == ["job42"], \
        "METAQ_JOB_ID names the batch job"
    started = [e for e in events if e.get("event") in ("run_start", "start", "job")]
    assert any(e.get("machine") == "laptop" for e in started) or \
        "laptop" in (q / "jobs" / "job42" / "events.jsonl").read_text()
