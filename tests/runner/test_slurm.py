"""``metaq run`` in real jobs on the local four-node SLURM, submitted with the project's own
``share/jobscripts/slurm.sh``. Each test skips, with the reason, when the cluster is not up."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from metaq_py.queue.admin import QueueAdmin
from metaq_py.queue.store import Queue
from tests.conftest import REPO, SlurmCluster
from tests.runner_helpers import make_queue, task

pytestmark = pytest.mark.slurm

JOBSCRIPT = REPO / "metaq_py" / "share" / "jobscripts" / "slurm.sh"


def _env(q: Queue) -> dict[str, str]:
    return {"PYTHONPATH": str(REPO), "METAQ_QUEUE": str(q.root)}


def _events(q: Queue, jobid: str) -> list[dict]:
    path = q.root / "jobs" / jobid / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _finished(q: Queue) -> list[str]:
    return sorted(e.id for e in QueueAdmin(q).entries("finished", specs=False))


def test_tasks_run_on_the_nodes_they_were_given(slurm: SlurmCluster, tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    seen = tmp_path / "seen"
    seen.mkdir()
    for i, nodes in enumerate((1, 2, 1, 3, 2)):
        # SLURMD_NODENAME is the node a step runs on (every pretend node has the same hostname).
        task(q, f"t{i}.sh", f"""
            srun --nodelist="$METAQ_NODELIST" -N "$METAQ_NNODES" --ntasks-per-node=1 \\
                 bash -c 'echo "$SLURMD_NODENAME $(hostname)"' | sort > {seen}/t{i}
            echo "$METAQ_NODELIST" > {seen}/t{i}.given
        """, NODES=nodes)
    jobid = slurm.sbatch("-N", "4", "-t", "5", "-o", tmp_path / "job.out", JOBSCRIPT,
                         "--launch-pause", "0", cwd=tmp_path, env=_env(q))
    end = slurm.wait(jobid, timeout=120)
    assert end.state == "COMPLETED", (tmp_path / "job.out").read_text()
    assert len(_finished(q)) == 5
    for i, nodes in enumerate((1, 2, 1, 3, 2)):
        given = (seen / f"t{i}.given").read_text().strip().split(",")
        ran = [line.split()[0] for line in (seen / f"t{i}").read_text().splitlines()]
        assert len(given) == nodes and sorted(ran) == sorted(given)
    starts = [e for e in _events(q, jobid) if e["event"] == "start"]
    assert {h for e in starts for h in e["hosts"]} <= {"n1", "n2", "n3", "n4"}


def test_a_short_time_limit_requeues_unfinished_tasks(slurm: SlurmCluster,
                                                      tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    for i in range(3):
        task(q, f"slow{i}.sh", "sleep 300 & wait", MIN_WC_TIME="20s")
    task(q, "quick.sh", "true", MIN_WC_TIME="5s")
    # One minute, warned 50 s before the end (SLURM may warn up to a minute early).
    jobid = slurm.sbatch("-N", "4", "-t", "1", "--signal=B:USR1@50", "-o",
                         tmp_path / "job.out", JOBSCRIPT, "--grace", "3", "--margin", "5",
                         cwd=tmp_path, env=_env(q))
    end = slurm.wait(jobid, timeout=150)
    out = (tmp_path / "job.out").read_text()
    assert end.state == "COMPLETED", out  # metaq left before the limit
    assert "received SIGUSR1" in out or "allocation ends" in out
    pending = sorted(t.id for t in q.pending())
    finished = _finished(q)
    assert sorted(pending + finished) == ["todo/quick.sh", "todo/slow0.sh", "todo/slow1.sh",
                                          "todo/slow2.sh"]
    assert "todo/quick.sh" in finished
    assert not q.leases()
    requeued = [e for e in _events(q, jobid) if e["event"] == "end"
                and e["outcome"] == "requeued"]
    assert len(requeued) == sum(1 for t in pending if t.startswith("todo/slow"))


def test_two_allocations_share_a_queue_and_run_each_task_once(slurm: SlurmCluster,
                                                              tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    ledger = tmp_path / "ledger"
    for i in range(200):
        task(q, f"t{i:03d}.sh", f'echo "$METAQ_TASK $SLURM_JOB_ID" >> {ledger}',
             MIN_WC_TIME="10s")
    jobs = [slurm.sbatch("-N", "2", "-t", "5", "-o", tmp_path / f"job{k}.out", JOBSCRIPT,
                         "--launch-pause", "0.01", cwd=tmp_path, env=_env(q))
            for k in range(2)]
    for jobid in jobs:
        end = slurm.wait(jobid, timeout=240)
        assert end.state == "COMPLETED"
    lines = ledger.read_text().splitlines()
    tasks = [line.split()[0] for line in lines]
    assert len(tasks) == 200 and len(set(tasks)) == 200
    assert len(_finished(q)) == 200 and not q.pending() and not q.leases()
    by_job = {j: sum(1 for line in lines if line.endswith(f" {j}")) for j in jobs}
    assert sum(by_job.values()) == 200


def test_a_killed_runner_leaves_leases_the_next_one_reclaims(slurm: SlurmCluster,
                                                             tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    out = tmp_path / "runs"
    task(q, "work.sh", f"""
        echo "$METAQ_ATTEMPT $METAQ_RESUME $SLURM_JOB_ID" >> {out}
        if [ "$METAQ_ATTEMPT" = 1 ]; then sleep 300; fi
    """)
    first = slurm.sbatch("-N", "1", "-t", "5", "-o", tmp_path / "first.out", JOBSCRIPT,
                         cwd=tmp_path, env=_env(q))
    deadline = time.monotonic() + 60
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert out.exists(), (tmp_path / "first.out").read_text()
    # kill -9 of the runner: it is the batch shell (the job script execs it).
    import subprocess
    subprocess.run(["scancel", "--batch", "--signal=KILL", first], check=True)
    slurm.wait(first, timeout=60)
    leases = q.leases()
    assert [c.jobid for c in leases] == [first]
    second = slurm.sbatch("-N", "1", "-t", "5", "-o", tmp_path / "second.out", JOBSCRIPT,
                          cwd=tmp_path, env=_env(q))
    end = slurm.wait(second, timeout=120)
    assert end.state == "COMPLETED", (tmp_path / "second.out").read_text()
    reclaim = [e for e in _events(q, second) if e["event"] == "reclaim"]
    assert len(reclaim) == 1 and reclaim[0]["jobid"] == first
    runs = out.read_text().splitlines()
    assert runs == [f"1 0 {first}", f"2 1 {second}"]
    assert _finished(q) == ["todo/work.sh"] and not q.leases()


SHARE = """
    me=$(basename "$METAQ_TASK" .sh)
    touch {seen}/$me.mark
    i=0
    while [ "$(ls {seen} | grep -c mark)" -lt 2 ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
    echo "$SLURMD_NODENAME $CUDA_VISIBLE_DEVICES $(ls {seen} | grep -c mark) \\
$(grep Cpus_allowed_list /proc/self/status | cut -f2)" > {seen}/$me.out
"""


def test_one_gpu_shares_run_at_once_each_on_its_own_cores(slurm: SlurmCluster,
                                                           tmp_path: Path) -> None:
    from metaq_py.ranges import parse_cpu_list

    q = make_queue(tmp_path / "q")
    seen = tmp_path / "seen"
    seen.mkdir()
    shares = 2  # as many 1-GPU shares as a pretend node (and this machine) has cores
    for i in range(shares):
        task(q, f"s{i}.sh", SHARE.format(seen=seen), CPUS=1, GPUS=1)
    jobid = slurm.sbatch("-N", "1", "--exclusive", "-t", "5", "-o", tmp_path / "job.out",
                         JOBSCRIPT, "--srun", "--gpus-per-node", str(shares),
                         "--launch-pause", "0", cwd=tmp_path, env=_env(q))
    end = slurm.wait(jobid, timeout=120)
    assert end.state == "COMPLETED", (tmp_path / "job.out").read_text()
    got = [(seen / f"s{i}.out").read_text().split() for i in range(shares)]
    assert len({node for node, *_ in got}) == 1, f"all on one node: {got}"
    assert sorted(gpu for _, gpu, _, _ in got) == [str(g) for g in range(shares)]
    assert all(int(marks) == shares for _, _, marks, _ in got), "they ran at the same time"
    cores = [set(parse_cpu_list(allowed)) for *_, allowed in got]
    assert all(len(c) == 1 for c in cores) and len(set.union(*cores)) == shares, cores
    starts = [e for e in _events(q, jobid) if e["event"] == "start"]
    assert sorted(e["cores"][0] for e in starts) == list(range(shares))
    assert all(e["bound"] is True for e in starts)
