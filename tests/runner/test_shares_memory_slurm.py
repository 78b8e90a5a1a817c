"""Shares of a node packed by ``MEM`` in a real batch job on the local SLURM, whose nodes say
``RealMemory=4000`` (megabytes) and have 2 cores: two shares of 1500M run side by side, two of
2500M one after the other although a core is free for the second. Skips, with the reason,
when the cluster is not up."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import REPO, SlurmCluster
from tests.runner_helpers import make_queue, task

pytestmark = pytest.mark.slurm

JOBSCRIPT = REPO / "metaq_py" / "share" / "jobscripts" / "slurm.sh"

# A share marks itself running, waits (at most ``limit`` tenths of a second) until both shares
# of its pair have marked themselves, says how many it saw, and then (``rm``) unmarks itself,
# so that a share started after it ended sees it no more.
PAIR = """
    me=$(basename "$METAQ_TASK" .sh)
    touch {seen}/$me.running
    i=0
    n=$(ls {seen} | grep -c '^{pair}.*running$')
    while [ "$n" -lt 2 ] && [ $i -lt {limit} ]; do
        sleep 0.1; i=$((i+1)); n=$(ls {seen} | grep -c '^{pair}.*running$')
    done
    echo "$n" > {seen}/$me.saw
    {rm}
"""


def test_shares_share_a_node_only_as_far_as_its_memory_goes(slurm: SlurmCluster,
                                                             tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    seen = tmp_path / "seen"
    seen.mkdir()
    for name in ("a1", "a2"):  # 3000M together: they fit beside each other
        task(q, f"{name}.sh", PAIR.format(seen=seen, pair="a", limit=600, rm=":"),
             CPUS=1, MEM="1500M")
    for name in ("b1", "b2"):  # 5000M together: more than the node's 4000M
        task(q, f"{name}.sh", PAIR.format(seen=seen, pair="b", limit=30,
                                          rm=f"rm {seen}/$me.running"), CPUS=1, MEM="2500M")
    jobid = slurm.sbatch("-N", "1", "--exclusive", "-t", "5", "-o", tmp_path / "job.out",
                         JOBSCRIPT, "--launch-pause", "0", cwd=tmp_path,
                         env={"PYTHONPATH": str(REPO), "METAQ_QUEUE": str(q.root)})
    end = slurm.wait(jobid, timeout=180)
    assert end.state == "COMPLETED", (tmp_path / "job.out").read_text()
    saw = {p.stem: int(p.read_text()) for p in seen.glob("*.saw")}
    assert saw == {"a1": 2, "a2": 2, "b1": 1, "b2": 1}, saw
    events = [json.loads(line) for line in
              (q.root / "jobs" / jobid / "events.jsonl").read_text().splitlines()]
    starts = {e["task"]: e for e in events if e["event"] == "start"}
    ends = {e["task"]: e for e in events if e["event"] == "end"}
    assert all(e["outcome"] == "finished" for e in ends.values()) and len(ends) == 4
    assert len({starts[f"todo/{n}.sh"]["hosts"][0] for n in ("a1", "a2", "b1", "b2")}) == 1
    first, second = sorted(("todo/b1.sh", "todo/b2.sh"), key=lambda t: starts[t]["time"])
    assert starts[second]["time"] >= ends[first]["time"], "the 2500M shares overlapped"
