"""``metaq run --agents``: tasks started by one agent per node (:mod:`metaq_py.launch.agent_task`),
in a real runner on a local pretend cluster and in a real job on the local SLURM."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from pathlib import Path

import pytest

from metaq_py.queue.admin import QueueAdmin
from metaq_py.ranges import machine_cpus, parse_cpu_list
from tests.conftest import REPO, SlurmCluster
from tests.runner_helpers import events, make_queue, of, runner, task, wait_until

JOBSCRIPT = REPO / "metaq_py" / "share" / "jobscripts" / "slurm.sh"


def _state(q, state: str) -> list[str]:
    return sorted(e.id for e in QueueAdmin(q).entries(state, specs=False))


def test_agents_run_whole_node_tasks_and_shares_bound(tmp_path: Path) -> None:
    if len(machine_cpus()) < 2:
        pytest.skip("needs two CPUs to bind two shares apart")
    q = make_queue(tmp_path / "q")
    seen = tmp_path / "seen"
    seen.mkdir()
    report = 'python3 -c "import os; print(sorted(os.sched_getaffinity(0)))"'
    for i in range(4):
        task(q, f"whole{i}.sh", f"echo $METAQ_NODELIST > {seen}/whole{i}")
    for i in range(2):
        task(q, f"share{i}.sh", f"{report} > {seen}/share{i}", CPUS=1)
    said: list[str] = []
    runner(q, nodes=2, cores=2, agents=True, say=said.append).run()
    assert _state(q, "finished") == [f"todo/share{i}.sh" for i in range(2)] + \
        [f"todo/whole{i}.sh" for i in range(4)], said
    cores = sorted(parse_cpu_list(
        (seen / f"share{i}").read_text().strip("[]\n").replace(" ", "")) for i in range(2))
    assert all(len(c) == 1 for c in cores)
    ends = of(events(q), "end")
    assert all(e["usage_from"] == f"agent on {e['hosts'][0]}" and e["cpu_user_seconds"]
               is not None and e["max_rss_bytes"] > 0 for e in ends), ends


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSTOP], ids=["kill-9", "sigstop"])
def test_a_lost_agent_requeues_its_node_s_task_once_and_the_rest_finish(
        tmp_path: Path, sig: signal.Signals) -> None:
    q = make_queue(tmp_path / "q")
    ledger = tmp_path / "ledger"
    gate = tmp_path / "gate"
    # Each task writes its start to the ledger; "slow" waits for the gate on its first attempt.
    task(q, "slow.sh", f"""
        echo "slow $METAQ_ATTEMPT $METAQ_NODELIST" >> {ledger}
        while [ ! -e {gate} ]; do sleep 0.1; done
        echo "slow-done $METAQ_ATTEMPT" >> {ledger}
    """)
    for i in range(6):
        task(q, f"t{i}.sh", f'echo "t{i} $METAQ_ATTEMPT $METAQ_NODELIST" >> {ledger}; sleep 0.5')
    said: list[str] = []
    r = runner(q, nodes=2, cores=1, agents=True, say=said.append, max_tasks=2)
    done = threading.Thread(target=r.run)
    done.start()
    try:
        assert wait_until(lambda: ledger.exists() and "slow 1" in ledger.read_text(), 30)
        node = next(line.split()[2] for line in ledger.read_text().splitlines()
                    if line.startswith("slow 1"))
        agent = r.launcher.agents.pool.agent_pids[node]
        os.kill(agent, sig)
        assert wait_until(lambda: any(f"node {node} is lost" in s for s in said), 30), said
        gate.touch()
        # the runner ends without waiting for the stopped agent
        done.join(120)
        assert not done.is_alive()
    finally:
        gate.touch()
        if sig == signal.SIGSTOP:
            with contextlib.suppress(ProcessLookupError):  # the runner killed it at its end
                os.kill(agent, signal.SIGCONT)
        done.join(120)
    assert not done.is_alive()
    lines = ledger.read_text().splitlines()
    # the first attempt was killed with its agent's node: it never got past the gate
    assert "slow-done 1" not in lines and "slow-done 2" in lines, lines
    lines = [line for line in lines if not line.startswith("slow-done")]
    starts = [line.split()[0] for line in lines]
    # slow ran twice (requeued once, on the other node); every other task ran exactly once
    assert sorted(starts) == sorted(["slow", "slow", *(f"t{i}" for i in range(6))]), lines
    assert [line.split()[2] for line in lines if line.startswith("slow 1")] == [node]
    # its second attempt, and every task started after the loss, ran on the other node
    after = lines[[line.startswith("slow 1") for line in lines].index(True) + 1:]
    assert [line.split()[2] for line in lines if line.startswith("slow 2")] != [node]
    assert all(line.split()[2] != node for line in after), lines
    assert _state(q, "finished") == sorted(["todo/slow.sh", *(f"todo/t{i}.sh" for i in range(6))])
    requeued = of(events(q), "end", task="todo/slow.sh", outcome="requeued")
    assert len(requeued) == 1


def _agent_pid(jobid: str, node: str) -> int | None:
    """The pid of the agent of SLURM job ``jobid`` on ``node`` (not its sentinel)."""
    def cmd(pid: str) -> bytes:
        try:
            return Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return b""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if b"metaq_py.launch.node_agent" not in cmd(pid):
            continue
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            ppid = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]
        except OSError:
            continue
        if f"SLURM_JOB_ID={jobid}".encode() in env and \
                f"SLURMD_NODENAME={node}".encode() in env and \
                b"metaq_py.launch.node_agent" not in cmd(ppid):
            return int(pid)
    return None


@pytest.mark.slurm
def test_agents_in_a_slurm_job_run_each_task_on_its_node_and_survive_a_kill(
        slurm: SlurmCluster, tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    ledger = tmp_path / "ledger"
    gate = tmp_path / "gate"
    task(q, "slow.sh", f"""
        echo "slow $METAQ_ATTEMPT $METAQ_NODELIST $SLURMD_NODENAME" >> {ledger}
        while [ ! -e {gate} ]; do sleep 0.1; done
        echo "slow-done $METAQ_ATTEMPT" >> {ledger}
    """)
    for i in range(12):
        task(q, f"t{i:02d}.sh",
             f'echo "t{i:02d} $METAQ_ATTEMPT $METAQ_NODELIST $SLURMD_NODENAME" >> {ledger}')
    jobid = slurm.sbatch("-N", "4", "--exclusive", "-t", "5", "-o", tmp_path / "job.out",
                         JOBSCRIPT, "--agents", "--launch-pause", "0", cwd=tmp_path,
                         env={"PYTHONPATH": str(REPO), "METAQ_QUEUE": str(q.root)})
    try:
        assert wait_until(lambda: ledger.exists() and "slow 1" in ledger.read_text(), 120)
        node = next(line.split()[2] for line in ledger.read_text().splitlines()
                    if line.startswith("slow 1"))
        pid = _agent_pid(jobid, node)
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        assert wait_until(lambda: "slow 2" in ledger.read_text(), 60), \
            (tmp_path / "job.out").read_text()
    finally:
        gate.touch()
    end = slurm.wait(jobid, timeout=120)
    out = (tmp_path / "job.out").read_text()
    assert end.state == "COMPLETED", out
    assert f"node {node} is lost" in out
    lines = ledger.read_text().splitlines()
    assert "slow-done 1" not in lines and "slow-done 2" in lines, lines
    starts = [line.split() for line in lines if not line.startswith("slow-done")]
    assert sorted(w[0] for w in starts) == sorted(["slow", "slow",
                                                    *(f"t{i:02d}" for i in range(12))])
    # each ran on its node: the one the runner gave it is the one slurmstepd says it is on
    assert all(w[2] == w[3] for w in starts), lines
    assert _state(q, "finished") == sorted(["todo/slow.sh",
                                            *(f"todo/t{i:02d}.sh" for i in range(12))])
    assert len(of(events(q), "end", task="todo/slow.sh", outcome="requeued")) == 1
