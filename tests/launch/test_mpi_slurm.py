"""Real MPI programs started by ``$METAQ_MPIRUN`` in real jobs on the local four-node SLURM.

A small C program (``mpi/rankinfo.c``, compiled here with MPICH's ``mpicc``) reports each
rank's node (every pretend node has the same host name: the ``SLURMD_NODENAME`` slurmstepd
set on the node, see the program) and the CPUs it may run on. Two 2-node tasks of 4 ranks run
at once in one 4-node allocation, once with ``srun`` and once with MPICH's ``mpiexec`` as the
launcher; each task's ranks must be on exactly its two nodes, two a node, each bound to its
own core of the node. Then the same with Open MPI's ``mpirun`` (Debian's ``openmpi-bin``
beside MPICH: the program compiled with ``mpicc.openmpi``, the launcher's program named
``mpirun.openmpi`` in ``metaq.yaml``), whose daemons ``srun`` starts on the task's nodes.

The pretend nodes are four daemons on one machine, and UCX is kept to its shared-memory
transports (``UCX_TLS=self,sm``): over TCP on the loopback, Debian's MPICH 4.0.2 now and then
hangs in ``MPI_Finalize`` on a loaded machine (a rank closing its UCX endpoints waits for a
peer already blocked in the PMI barrier, which no longer makes progress; MPICH removed that
barrier in pull request 6596). See docs/notebook.md, "Real MPI and node agents". Open MPI is
kept to TCP over the loopback (``ob1`` with the ``self`` and ``tcp`` transports): its
shared-memory transport names its segments by host name, job and local rank, so the first
ranks of two pretend nodes (both ``vm``) would share one segment (seen: a segmentation fault
in ``MPI_Barrier``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from metaq_py.queue.admin import QueueAdmin
from metaq_py.queue.store import Queue
from metaq_py.ranges import parse_cpu_list
from tests.capability import missing
from tests.conftest import REPO, SlurmCluster
from tests.runner_helpers import SETTINGS, make_queue, task

pytestmark = pytest.mark.slurm

JOBSCRIPT = REPO / "metaq_py" / "share" / "jobscripts" / "slurm.sh"
SOURCE = Path(__file__).parent / "mpi" / "rankinfo.c"
UCX = {"UCX_TLS": "self,sm", "UCX_NET_DEVICES": "lo"}
MPI_ARGS = {"srun": "[--mpi=pmi2]", "mpiexec": "[]", "mpirun": "[]"}
"""The test SLURM's ``MpiDefault`` is ``none``: MPICH's ranks under srun need PMI-2."""
OPEN_MPI = {"OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": "self,tcp",
            "OMPI_MCA_btl_tcp_if_include": "lo", "OMPI_MCA_oob_tcp_if_include": "lo",
            "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
"""Open MPI on pretend nodes: TCP over the loopback; and CI runs as root, which Open MPI's
``mpirun`` refuses unless told."""


@pytest.fixture(scope="module")
def rankinfo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The MPI program, compiled."""
    for tool in ("mpicc", "mpiexec"):
        if shutil.which(tool) is None:
            missing(f"{tool} is not installed (apt-get install mpich libmpich-dev)")
    out = tmp_path_factory.mktemp("mpi") / "rankinfo"
    subprocess.run(["mpicc", "-O2", "-o", str(out), str(SOURCE)], check=True, timeout=120)
    return out


@pytest.fixture(scope="module")
def rankinfo_openmpi(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The MPI program, compiled with Open MPI."""
    for tool in ("mpicc.openmpi", "mpirun.openmpi"):
        if shutil.which(tool) is None:
            missing(f"{tool} is not installed (apt-get install openmpi-bin libopenmpi-dev)")
    where = subprocess.run(["mpicc.openmpi", "--showme:incdirs"], capture_output=True,
                           text=True, timeout=60, check=False).stdout.split()
    if not any((Path(d) / "mpi.h").exists() for d in where):
        missing("Open MPI's mpi.h is not installed (apt-get install libopenmpi-dev)")
    out = tmp_path_factory.mktemp("openmpi") / "rankinfo"
    subprocess.run(["mpicc.openmpi", "-O2", "-o", str(out), str(SOURCE)], check=True,
                   timeout=120)
    return out


def _queue(root: Path, launcher: str) -> Queue:
    program = "  executable: mpirun.openmpi\n" if launcher == "mpirun" else ""
    return make_queue(root, SETTINGS + f"mpi:\n  launcher: {launcher}\n{program}"
                                       f"  args: {MPI_ARGS[launcher]}\n")


def _env(q: Queue) -> dict[str, str]:
    return {"PYTHONPATH": str(REPO), "METAQ_QUEUE": str(q.root), **UCX, **OPEN_MPI}


def _ends(q: Queue, jobid: str) -> list[dict]:
    path = q.root / "jobs" / jobid / "events.jsonl"
    return [e for e in map(json.loads, path.read_text().splitlines()) if e["event"] == "end"]


TOGETHER = """
    touch {seen}/{name}.mark
    i=0  # each waits (at most a minute) until the other has started: the two run at once
    while [ "$(ls {seen} | grep -c mark)" -lt 2 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
    echo "$METAQ_NODELIST" > {seen}/{name}.given
    echo "$METAQ_MPIRUN" > {seen}/{name}.line
    $METAQ_MPIRUN {program} > {seen}/{name}.ranks
"""


@pytest.mark.parametrize(("launcher", "run_args"), [
    ("srun", ()), ("mpiexec", ()),
    ("srun", ("--srun",)),  # the script in a step of its own, whose ranks' step overlaps it
    ("srun", ("--agents",)),  # the script started by its first node's agent
    ("mpirun", ()),  # Open MPI's
], ids=["srun", "mpiexec", "srun-in-a-step", "srun-by-agents", "openmpi-mpirun"])
def test_two_mpi_tasks_share_an_allocation_each_on_its_nodes_and_cores(
        slurm: SlurmCluster, request: pytest.FixtureRequest, tmp_path: Path, launcher: str,
        run_args: tuple[str, ...]) -> None:
    program = _program(request, launcher)
    q = _queue(tmp_path / "q", launcher)
    seen = tmp_path / "seen"
    seen.mkdir()
    for name in ("a", "b"):
        task(q, f"{name}.sh", TOGETHER.format(seen=seen, name=name, program=program), NODES=2)
    jobid = slurm.sbatch("-N", "4", "--exclusive", "-t", "5", "-o", tmp_path / "job.out",
                         JOBSCRIPT, "--launch-pause", "0", *run_args, cwd=tmp_path, env=_env(q))
    end = slurm.wait(jobid, timeout=180)
    out = (tmp_path / "job.out").read_text()
    assert end.state == "COMPLETED", out
    finished = sorted(e.id for e in QueueAdmin(q).entries("finished", specs=False))
    assert finished == ["todo/a.sh", "todo/b.sh"], out
    given = {n: (seen / f"{n}.given").read_text().split()[0].split(",") for n in ("a", "b")}
    assert sorted(given["a"] + given["b"]) == ["n1", "n2", "n3", "n4"]
    for name in ("a", "b"):
        line = (seen / f"{name}.line").read_text()
        assert line.startswith("mpirun.openmpi " if launcher == "mpirun" else launcher + " ")
        assert ("--overlap" in line) == (run_args == ("--srun",))
        ranks = {}
        for line in (seen / f"{name}.ranks").read_text().splitlines():
            # rank R of N node NODE cpus LIST
            words = line.split()
            assert words[2:4] == ["of", "4"], line
            ranks[int(words[1])] = (words[5], parse_cpu_list(words[7]))
        assert sorted(ranks) == [0, 1, 2, 3]
        by_node: dict[str, list[tuple[int, ...]]] = {}
        for node, cpus in ranks.values():
            by_node.setdefault(node, []).append(cpus)
        # Exactly its two nodes, two ranks on each, each rank on one core of its own.
        assert sorted(by_node) == sorted(given[name]), ranks
        assert all(sorted(c) == [(0,), (1,)] for c in by_node.values()), ranks


FAILING = """
    $METAQ_MPIRUN {program} 1 > {seen}/{name}.ranks
"""


def _program(request: pytest.FixtureRequest, launcher: str) -> Path:
    """The MPI program compiled for ``launcher``'s MPI: Open MPI's for ``mpirun``."""
    return request.getfixturevalue("rankinfo_openmpi" if launcher == "mpirun" else "rankinfo")


@pytest.mark.parametrize("launcher", ["srun", "mpirun"])
def test_an_mpi_program_exiting_on_one_rank_fails_its_task_and_the_runner_goes_on(
        slurm: SlurmCluster, request: pytest.FixtureRequest, tmp_path: Path,
        launcher: str) -> None:
    rankinfo = _program(request, launcher)
    q = _queue(tmp_path / "q", launcher)
    seen = tmp_path / "seen"
    seen.mkdir()
    # Rank 1 exits with code 3 while the others wait in a barrier for it.
    task(q, "bad.sh", FAILING.format(seen=seen, name="bad", program=rankinfo), NODES=2)
    task(q, "good.sh", f"$METAQ_MPIRUN {rankinfo} > {seen}/good.ranks", NODES=2)
    jobid = slurm.sbatch("-N", "4", "--exclusive", "-t", "5", "-o", tmp_path / "job.out",
                         JOBSCRIPT, "--launch-pause", "0", cwd=tmp_path, env=_env(q))
    end = slurm.wait(jobid, timeout=180)
    out = (tmp_path / "job.out").read_text()
    assert end.state == "COMPLETED", out
    admin = QueueAdmin(q)
    assert [e.id for e in admin.entries("failed", specs=False)] == ["todo/bad.sh"], out
    assert [e.id for e in admin.entries("finished", specs=False)] == ["todo/good.sh"], out
    ends = {e["task"]: e for e in _ends(q, jobid)}
    assert ends["todo/bad.sh"]["outcome"] == "failed" and ends["todo/bad.sh"]["exit_code"] != 0
    assert len((seen / "good.ranks").read_text().splitlines()) == 4


@pytest.mark.parametrize(("mpi", "said", "logged"), [
    ("launcher: jsrun", "names the MPI launcher 'jsrun', which is not installed",
     "metaq.yaml names the MPI launcher 'jsrun', which is not installed on the batch node"),
    # Open MPI's kind of line, given MPICH's launcher: Hydra would refuse its options.
    ("launcher: mpirun\n  executable: mpiexec.mpich",
     "but mpiexec.mpich here is MPICH's Hydra; name Open MPI's mpirun's program with "
     "mpi.executable", "names the MPI launcher 'mpirun', but mpiexec.mpich on the batch node "
     "is another MPI's launcher"),
], ids=["not-installed", "another-mpi-s"])
def test_a_launcher_that_cannot_serve_fails_the_task_with_one_sentence(
        slurm: SlurmCluster, tmp_path: Path, mpi: str, said: str, logged: str) -> None:
    if "jsrun" in mpi and shutil.which("jsrun") is not None:
        pytest.skip("jsrun is installed here")
    if "mpich" in mpi and shutil.which("mpiexec.mpich") is None:
        missing("mpiexec.mpich is not installed (apt-get install mpich)")
    q = make_queue(tmp_path / "q", SETTINGS + f"mpi:\n  {mpi}\n")
    task(q, "mpi.sh", "$METAQ_MPIRUN hostname")
    task(q, "plain.sh", "true")
    jobid = slurm.sbatch("-N", "1", "-t", "5", "-o", tmp_path / "job.out", JOBSCRIPT,
                         "--launch-pause", "0", cwd=tmp_path, env=_env(q))
    end = slurm.wait(jobid, timeout=120)
    out = (tmp_path / "job.out").read_text()
    assert end.state == "COMPLETED", out
    assert out.count(said) == 1, out
    admin = QueueAdmin(q)
    assert [e.id for e in admin.entries("finished", specs=False)] == ["todo/plain.sh"], out
    assert [e.id for e in admin.entries("failed", specs=False)] == ["todo/mpi.sh"], out
    logs = list((q.root / "jobs" / jobid / "logs").rglob("mpi.sh.log"))
    assert len(logs) == 1
    assert logged in logs[0].read_text()
