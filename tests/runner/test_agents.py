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
from tests.runner_helpers import events, make_queue, of, runner, task, wait_until


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
    assert all(e["usage_from"] == "agent" and e["cpu_user_seconds"] is not None for e in ends)


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
