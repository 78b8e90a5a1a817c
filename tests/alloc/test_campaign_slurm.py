"""The campaign example (share/queue/examples/campaign) on the local SLURM (tests/slurm/),
with nobody watching: ``metaq alloc --watch`` brings the allocations, ``share/jobscripts/slurm.sh``
runs ``metaq run`` in them, and the dependencies sequence the steps across allocations.

The campaign is the example's, made smaller to stay within about a minute: 4 propagators, 4
contractions each after its propagator, 1 analysis after them all. Every task runs exactly
once, in a valid order, and no allocation is submitted once the queue is empty. Skips, with
the reason, when SLURM is not up."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from metaq_py.alloc.journal import Journal
from metaq_py.batch.submit import alloc_name
from tests.alloc.test_alloc_slurm import squeue_names, wait_for, wait_passes
from tests.conftest import REPO, SlurmCluster

pytestmark = pytest.mark.slurm

CAMPAIGN = REPO / "metaq_py" / "share" / "queue" / "examples" / "campaign"
N = 4

SETTINGS = """\
poll_interval: 1s
alloc:
  system: slurm
  max_nodes: 2
  min_walltime: 5m
  margin: 2m
  max_allocations: 2
  max_queued: 1
"""


def smaller(script: str) -> str:
    """The example's script for ``N`` configurations and one-minute tasks."""
    text = (CAMPAIGN / script).read_text()
    for old, new in (("#METAQ ARRAY 0-19", f"#METAQ ARRAY 0-{N - 1}"),
                     ("-eq 20", f"-eq {N}"), ("MIN_WC_TIME 10m", "MIN_WC_TIME 1m")):
        text = text.replace(old, new)
    return text


def metaq(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "metaq_py", *args], capture_output=True,
                          text=True, timeout=120, env=env)


def test_the_campaign_brings_its_allocations_and_runs_each_task_once_in_order(
    slurm: SlurmCluster, tmp_path: Path
) -> None:
    root, out, scripts = tmp_path / "q", tmp_path / "out", tmp_path / "scripts"
    out.mkdir()
    scripts.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200",
           "CAMPAIGN_DIR": str(out), "CAMPAIGN_SLEEP": "1"}
    assert metaq("init", str(root), env=env).returncode == 0
    (root / "metaq.yaml").write_text(SETTINGS)
    for name in ("prop.sh", "contract.sh", "analysis.sh"):
        (scripts / name).write_text(smaller(name))
        (scripts / name).chmod(0o755)
    sub = metaq("submit", "--queue", str(root),
                *(str(scripts / n) for n in ("prop.sh", "contract.sh", "analysis.sh")), env=env)
    assert sub.returncode == 0, sub.stderr
    assert f"todo/prop.sh[0-{N - 1}] ({N} tasks)" in sub.stdout

    watcher = subprocess.Popen(
        [sys.executable, "-m", "metaq_py", "alloc", "--watch", "--interval", "1s",
         "--queue", str(root)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, cwd=tmp_path)
    try:
        wait_for("the analysis", lambda: (out / "analysis.out").exists(), timeout=180)
        wait_for("the queue to empty",
                 lambda: not json.loads(metaq("ls", "--json", "--queue", str(root),
                                              env=env).stdout), timeout=30)
        drained = time.time()
        wait_for("the allocations ending", lambda: not squeue_names(alloc_name(root)),
                 timeout=120)
        wait_passes(root, 3)  # a few more passes on the empty queue
    finally:
        watcher.send_signal(signal.SIGINT)
        _, err = watcher.communicate(timeout=60)
    assert watcher.returncode == 0, err

    # Every task ran exactly once, in a valid order.
    lines = (out / "order.log").read_text().splitlines()
    starts = Counter(line for line in lines if line.startswith("start"))
    wanted = {f"start {step} {i}" for step in ("prop", "contract") for i in range(N)}
    assert set(starts) == wanted | {"start analysis"}
    assert set(starts.values()) == {1}
    at = {line: n for n, line in enumerate(lines)}
    for i in range(N):
        assert at[f"end prop {i}"] < at[f"start contract {i}"]
        assert at[f"end contract {i}"] < at["start analysis"]
    assert (out / "analysis.out").read_text().count("correlator") == N
    assert len(json.loads(metaq("ls", "finished", "--json", "--queue", str(root),
                                env=env).stdout)) == 2 * N + 1
    assert not list((root / "failed").rglob("*.sh*"))

    # The allocations came from alloc alone, ran metaq, and the tasks ran in them.
    history = Journal(root).history()
    submits = [e for e in history if e["event"] == "submit"]
    jobs = {e["job"] for e in submits}
    assert jobs and len(jobs) <= 2 * N + 1
    started: Counter[str] = Counter()
    for job in jobs:
        assert slurm.wait(job, timeout=60).state == "COMPLETED"
        log = root / "jobs" / job / "events.jsonl"
        started.update(e["task"] for e in map(json.loads, log.read_text().splitlines())
                       if e["event"] == "start")
    assert len(started) == 2 * N + 1 and set(started.values()) == {1}
    # Nothing was submitted once the queue was empty, and the passes after said why.
    assert all(e["time"] < drained for e in submits)
    assert history[-1]["event"] == "refuse" and history[-1]["code"] == "empty"
    assert not any(e["event"] in ("submit-failed", "dependency-failed") for e in history)
