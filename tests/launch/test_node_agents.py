"""The node agents (:mod:`metaq_py.launch.node_agent`) and the runner's pool of them
(:mod:`metaq_py.launch.agents`), as real processes: locally, one agent a pretend node, and on
the local SLURM, one ``srun --ntasks-per-node=1`` step over four nodes."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from metaq_py.launch.agents import AgentPool
from metaq_py.launch.sweep import marked_processes
from metaq_py.ranges import machine_cpus
from tests.capability import cgroup_problem
from tests.conftest import SlurmCluster


class Pool:
    """A pool with its events in a queue, and ways to wait for them."""

    def __init__(self, nodes: list[str], system: str = "local", timeout: float = 5.0,
                 cores: int = 1) -> None:
        self.events: queue.Queue[dict] = queue.Queue()
        self.pool = AgentPool(nodes, system=system, on_event=self.events.put, timeout=timeout,
                              cores=cores)

    def next(self, op: str, timeout: float = 30.0, **match: object) -> dict:
        """The next event ``op`` whose fields equal ``match`` (others are skipped)."""
        deadline = time.monotonic() + timeout
        while True:
            e = self.events.get(timeout=max(0.01, deadline - time.monotonic()))
            if e["op"] == op and all(e.get(k) == v for k, v in match.items()):
                return e


@pytest.fixture
def two(tmp_path: Path) -> Iterator[Pool]:
    p = Pool(["local0", "local1"])
    p.pool.open()
    yield p
    p.pool.close()


def test_agents_start_bind_and_measure_their_node_s_tasks(two: Pool, tmp_path: Path) -> None:
    assert two.pool.missing == () and set(two.pool.agent_pids) == {"local0", "local1"}
    log = tmp_path / "log"
    allowed = machine_cpus()
    burn = ("import os, time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: "
            "pass\nprint(os.environ['WHO'], sorted(os.sched_getaffinity(0)))")
    for i, node in enumerate(("local0", "local1")):
        core = i % len(allowed)
        assert two.pool.start(node, f"t{i}", ["python3", "-c", burn], env={
            **os.environ, "WHO": f"t{i}"}, log=str(log), cpus=[core])
    ends = {}
    for _ in range(2):
        e = two.next("exit")
        ends[e["id"]] = e
    for i in range(2):
        e = ends[f"t{i}"]
        assert e["code"] == 0 and e["node"] == f"local{i}"
        assert e["cpu_user_seconds"] + e["cpu_system_seconds"] >= 0.3
        assert e["max_rss_bytes"] > 0
    lines = sorted(log.read_text().splitlines())
    assert lines == [f"t{i} {[allowed[i % len(allowed)]]}" for i in range(2)]


def test_a_kill_takes_the_whole_tree(two: Pool, tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    two.pool.start("local0", "tree", ["sh", "-c", f"setsid sleep 300 & sleep 300 & "
                                                  f"touch {ready}; wait"],
                   env=dict(os.environ), log=str(tmp_path / "log"))
    started = two.next("started", id="tree")
    deadline = time.monotonic() + 10
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ready.exists()
    if cgroup_problem() is None:  # contained as a task the runner starts itself
        cgroup = Path(f"/proc/{started['pid']}/cgroup").read_text()
        assert f"/metaq-{two.pool.agent_pids['local0']}/" in cgroup, cgroup
    mark = Path(f"/proc/{started['pid']}/environ").read_bytes().split(b"METAQ_TASK_MARK=")[1]
    mark_text = mark.split(b"\0")[0].decode()
    assert len(marked_processes(mark_text)) >= 3  # sh, a sleep, the sleep that left
    two.pool.kill("local0", "tree")
    assert two.next("exit", id="tree")["code"] == -signal.SIGKILL
    # Each was sent SIGKILL before the exit was told; one may still be on its way out (its
    # environment readable until the kernel frees its memory) on a loaded machine.
    deadline = time.monotonic() + 10
    while marked_processes(mark_text) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marked_processes(mark_text) == []


def test_a_dead_agent_loses_its_node_and_the_other_goes_on(two: Pool, tmp_path: Path) -> None:
    os.kill(two.pool.agent_pids["local0"], signal.SIGKILL)
    lost = two.next("lost")
    assert lost["node"] == "local0" and "closed its line" in lost["why"]
    assert not two.pool.start("local0", "late", ["true"], env={}, log=str(tmp_path / "log"))
    assert two.pool.start("local1", "on", ["true"], env=dict(os.environ),
                          log=str(tmp_path / "log"))
    assert two.next("exit", id="on")["code"] == 0


def test_a_stopped_agent_is_lost_after_its_silence_and_never_waited_for(
        two: Pool, tmp_path: Path) -> None:
    pid = two.pool.agent_pids["local1"]
    os.kill(pid, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        lost = two.next("lost", timeout=30)
        assert lost["node"] == "local1" and "has said nothing for" in lost["why"]
        assert time.monotonic() - t0 < 30
        t1 = time.monotonic()
        assert not two.pool.start("local1", "x", ["true"], env={}, log=str(tmp_path / "log"))
        assert time.monotonic() - t1 < 1
    finally:
        os.kill(pid, signal.SIGCONT)


def test_closing_the_pool_ends_the_agents_and_their_tasks(tmp_path: Path) -> None:
    p = Pool(["local0"])
    p.pool.open()
    p.pool.start("local0", "long", ["sleep", "300"], env=dict(os.environ),
                 log=str(tmp_path / "log"))
    pid = p.next("started", id="long")["pid"]
    agent = p.pool.processes[0]
    p.pool.close()
    assert agent.returncode == 0
    assert not Path(f"/proc/{pid}").exists() or \
        Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"


def test_agents_that_cannot_come_leave_their_nodes_out_without_waiting(tmp_path: Path) -> None:
    # A step that fails at once (srun refusing it, say): no agent comes, and open() does not
    # wait out its timeout for them.
    p = Pool(["n1", "n2"], system="slurm", timeout=60)
    p.pool.srun = "false"
    t0 = time.monotonic()
    p.pool.open()
    assert p.pool.missing == ("n1", "n2") and time.monotonic() - t0 < 30
    assert not p.pool.start("n1", "t", ["true"], env={}, log=str(tmp_path / "log"))
    p.pool.close()


@pytest.mark.slurm
def test_one_step_puts_an_agent_on_every_node(slurm: SlurmCluster, tmp_path: Path) -> None:
    out = tmp_path / "out"
    script = tmp_path / "inside.py"
    script.write_text(f"""
import os, queue, sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
from metaq_py.launch.agents import AgentPool
events = queue.Queue()
nodes = ["n1", "n2", "n3", "n4"]
pool = AgentPool(nodes, system="slurm", on_event=events.put, timeout=60, cores=2)
pool.open()
assert pool.missing == (), pool.missing
for i, node in enumerate(nodes):
    pool.start(node, f"t{{i}}", ["sh", "-c", "echo $SLURMD_NODENAME"], env=dict(os.environ),
               log={str(out)!r} + "." + node, cpus=[1])
ends = [events.get(timeout=60) for _ in range(8)]
pool.close()
print(sorted((e["op"], e["node"], e.get("code")) for e in ends))
""")
    done = subprocess.run(["salloc", "-N", "4", "--exclusive", "-t", "5", "--quiet",
                           "python3", str(script)], capture_output=True, text=True, timeout=180,
                          check=False)
    assert done.returncode == 0, done.stderr
    for node in ("n1", "n2", "n3", "n4"):
        assert Path(f"{out}.{node}").read_text().strip() == node
        assert f"('exit', '{node}', 0)" in done.stdout
