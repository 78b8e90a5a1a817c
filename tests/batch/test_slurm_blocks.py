"""Blocks of neighbouring nodes from the real SLURM's topology: the local four-node cluster is
started with a ``topology.conf`` of two leaf switches (``n1,n2 | n3,n4``) under a top switch
(``tests/slurm/topology.conf.in``). Hostname order alone would put all four in one block (they
are one run of numbers), so a task placed by switch proves ``scontrol show topology`` was asked.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from metaq_py.batch.slurm import SlurmBatch
from metaq_py.batch.topology import HOSTNAME_BLOCK, blocks_of, parse_slurm_topology
from metaq_py.queue.store import Queue
from tests.conftest import REPO, SlurmCluster
from tests.runner_helpers import make_queue, task

JOBSCRIPT = REPO / "metaq_py" / "share" / "jobscripts" / "slurm.sh"
NODES = ("n1", "n2", "n3", "n4")

SCONTROL_22_05 = """\
SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=n[1-2]
SwitchName=leaf2 Level=0 LinkSpeed=1 Nodes=n[3-4]
SwitchName=top Level=1 LinkSpeed=1 Nodes=n[1-4] Switches=leaf[1-2]
"""
"""``scontrol show topology`` as SLURM 22.05.8 prints it for tests/slurm/topology.conf.in
(captured from the local cluster): the top switch lists every node too, and is not a block."""


def test_the_leaf_switches_as_slurm_22_05_prints_them() -> None:
    assert parse_slurm_topology(SCONTROL_22_05) == [("leaf1", "n[1-2]"), ("leaf2", "n[3-4]")]
    switches = [("leaf1", ("n1", "n2")), ("leaf2", ("n3", "n4"))]
    assert blocks_of(NODES, switches, HOSTNAME_BLOCK) == ((0, 1), (2, 3))
    # without the switches, the four are one run of hostnames: one block
    assert blocks_of(NODES, [], HOSTNAME_BLOCK) == ((0, 1, 2, 3),)


@pytest.mark.slurm
def test_the_local_slurm_prints_the_captured_topology(slurm: SlurmCluster) -> None:
    """The live cluster says what the sample says (its leaf switches, whatever else another
    SLURM version prints on those lines)."""
    done = subprocess.run(["scontrol", "show", "topology"], capture_output=True, text=True,
                          timeout=30, check=True)
    assert parse_slurm_topology(done.stdout) == parse_slurm_topology(SCONTROL_22_05), \
        f"tests/slurm/start.sh wrote another topology.conf: {done.stdout!r}"


@pytest.mark.slurm
def test_the_slurm_adapter_asks_scontrol_for_its_blocks(slurm: SlurmCluster) -> None:
    batch = SlurmBatch(env=dict(os.environ), clock=time.time)
    assert batch.blocks(NODES) == ((0, 1), (2, 3))
    assert batch.blocks(("n4", "n2", "n3")) == ((1,), (0, 2))


def _events(q: Queue, jobid: str) -> list[dict]:
    path = q.root / "jobs" / jobid / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.slurm
def test_a_two_node_task_runs_under_one_switch(slurm: SlurmCluster, tmp_path: Path) -> None:
    """``one`` (first in the queue) takes n1, so the scheduler names n2 and n3 for ``pair``:
    one node under each leaf switch. The runner moves it under leaf2, onto n3 and n4, where
    the steps it runs really land."""
    q = make_queue(tmp_path / "q")
    seen = tmp_path / "seen"
    seen.mkdir()
    task(q, "one.sh", f"echo \"$METAQ_NODELIST\" > {seen}/one; sleep 5", folder="priority",
         NODES=1)
    # SLURMD_NODENAME is the node a step runs on (every pretend node has the same hostname)
    task(q, "pair.sh", f"""
        srun --nodelist="$METAQ_NODELIST" -N 2 --ntasks-per-node=1 \\
             bash -c 'echo "$SLURMD_NODENAME"' | sort > {seen}/pair
    """, NODES=2)
    jobid = slurm.sbatch("-N", "4", "-t", "5", "-o", tmp_path / "job.out", JOBSCRIPT,
                         "--launch-pause", "0", cwd=tmp_path,
                         env={"PYTHONPATH": str(REPO), "METAQ_QUEUE": str(q.root)})
    end = slurm.wait(jobid, timeout=120)
    assert end.state == "COMPLETED", (tmp_path / "job.out").read_text()
    starts = {Path(e["task"]).stem: e for e in _events(q, jobid) if e["event"] == "start"}
    assert set(starts) == {"one", "pair"}
    assert starts["one"]["hosts"] == ["n1"] and starts["one"]["blocks"] == 1
    # by hostname order it would have stayed on n2,n3 (one block of four); by switch it moves
    assert starts["pair"]["hosts"] == ["n3", "n4"]
    assert starts["pair"]["blocks"] == 1
    assert (seen / "pair").read_text().split() == ["n3", "n4"]
