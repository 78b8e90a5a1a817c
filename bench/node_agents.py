"""Node agents against one ``srun`` step per task: tasks/s and ``slurmctld`` RPCs per task.

Issue 32: per-task ``srun`` is an RPC storm on the controller; mpi_jm's answer is one daemon a
node, started once per allocation (:mod:`metaq_py.launch.node_agent`). The agents must cost the
controller at least 50 times fewer RPCs per task.

Inside one 4-node allocation of the local SLURM (``salloc -N 4 --exclusive``, made by this
script), N one-core tasks (``true``, each bound to one core) run two ways, at most as many at
once as the allocation has cores:

- ``srun``: one step per task, ``srun --exact --nodes=1 --ntasks=1 --cpus-per-task=1
  --nodelist=NODE --cpu-bind=mask_cpu:MASK true``, as ``metaq run --srun`` starts them;
- ``agents``: a one-task ``srun`` step a node starts an agent on each node
  (:class:`~metaq_py.launch.agents.AgentPool`), which then starts every task of its node;
  the agents' start and end are counted in.

Each way is timed from its first start to its last end. ``slurmctld``'s RPCs are read from
``sdiag`` (the sum of its "by message type" counts) before and after, so they include what
else the controller served meanwhile (the other users of the shared test cluster, sdiag's
own call): the figure is an upper bound for each way.

    python bench/node_agents.py [--tasks N]
"""

from __future__ import annotations

import argparse
import os
import queue
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))

from metaq_py.launch.agents import AgentPool  # noqa: E402
from metaq_py.launch.binding import cpu_mask  # noqa: E402


def rpcs() -> int:
    """The controller's RPCs so far: the sum of sdiag's counts by message type."""
    out = subprocess.run(["sdiag"], capture_output=True, text=True, check=True).stdout
    part = out.split("Remote Procedure Call statistics by message type", 1)[1]
    part = part.split("Remote Procedure Call statistics by user", 1)[0]
    return sum(int(n) for n in re.findall(r"count:(\d+)", part))


def slots(nodes: list[str], cores: int) -> list[tuple[str, int]]:
    return [(n, c) for c in range(cores) for n in nodes]


def by_srun(n: int, nodes: list[str], cores: int) -> tuple[float, int]:
    free: queue.Queue[tuple[str, int]] = queue.Queue()
    for slot in slots(nodes, cores):
        free.put(slot)
    failed = []

    def one(node: str, core: int) -> None:
        done = subprocess.run(
            ["srun", "--exact", "--nodes=1", "--ntasks=1", "--cpus-per-task=1",
             f"--nodelist={node}", f"--cpu-bind=mask_cpu:{cpu_mask([core])}",
             "--quiet", "true"], stdin=subprocess.DEVNULL, capture_output=True, check=False)
        if done.returncode != 0:
            failed.append(done.stderr.decode(errors="replace").strip())
        free.put((node, core))

    before = rpcs()
    t0 = time.monotonic()
    threads = []
    for _ in range(n):
        node, core = free.get()
        t = threading.Thread(target=one, args=(node, core))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    seconds = time.monotonic() - t0
    used = rpcs() - before
    if failed:
        print(f"  srun: {len(failed)} of {n} steps failed, the first: {failed[0]}")
    return seconds, used


def by_agents(n: int, nodes: list[str], cores: int, log: str) -> tuple[float, int]:
    events: queue.Queue[dict] = queue.Queue()
    before = rpcs()
    t0 = time.monotonic()
    pool = AgentPool(nodes, system="slurm", on_event=events.put, timeout=60, cores=cores)
    pool.open()
    if pool.missing:
        raise SystemExit(f"no agent came on {', '.join(pool.missing)}")
    free = slots(nodes, cores)
    running: dict[str, tuple[str, int]] = {}
    started = ended = 0
    env = dict(os.environ)
    while ended < n:
        while free and started < n:
            node, core = free.pop()
            task = f"t{started}"
            running[task] = (node, core)
            pool.start(node, task, ["true"], env=env, log=log, cpus=[core])
            started += 1
        e = events.get(timeout=60)
        if e["op"] == "exit":
            if e.get("code") != 0:
                raise SystemExit(f"a task failed: {e}")
            free.append(running.pop(e["id"]))
            ended += 1
        elif e["op"] == "lost":
            raise SystemExit(f"a node was lost: {e}")
    pool.close()
    seconds = time.monotonic() - t0
    return seconds, rpcs() - before


def inside(n: int) -> None:
    nodes = subprocess.run(["scontrol", "show", "hostnames", os.environ["SLURM_JOB_NODELIST"]],
                           capture_output=True, text=True, check=True).stdout.split()
    cores = int(os.environ["SLURM_JOB_CPUS_PER_NODE"].split("(")[0])
    log = f"/tmp/node_agents_bench.{os.getpid()}.log"
    print(f"{n} one-core tasks (true) on {len(nodes)} nodes x {cores} cores, "
          f"at most {len(nodes) * cores} at once")
    rows = []
    for name, run in (("agents", lambda: by_agents(n, nodes, cores, log)),
                      ("srun per task", lambda: by_srun(n, nodes, cores))):
        seconds, used = run()
        rows.append((name, n / seconds, used / n, seconds))
        print(f"  {name:<14} {n / seconds:8.1f} tasks/s  {used / n:8.3f} slurmctld RPCs a "
              f"task  ({seconds:.1f} s, {used} RPCs)")
    Path(log).unlink(missing_ok=True)
    agents, steps = rows
    print(f"  RPCs a task: srun per task / agents = {steps[2] / max(agents[2], 1e-9):.0f}x "
          f"(target at least 50x); tasks/s: agents / srun = {agents[1] / steps[1]:.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside:
        inside(args.tasks)
        return
    subprocess.run(["salloc", "-N", "4", "--exclusive", "-t", "30", "--quiet",
                    sys.executable, __file__, "--inside", "--tasks", str(args.tasks)],
                   check=True, env={**os.environ, "PYTHONPATH": str(HERE)})


if __name__ == "__main__":
    main()
