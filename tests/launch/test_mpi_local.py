"""``$METAQ_MPIRUN`` on a local pretend cluster, with real MPICH: the detected launcher is
Hydra's ``mpiexec`` started with ``-launcher fork``, and each pretend node's ranks are bound to
its cores. Also a node list the launcher rejects: ``srun`` given the pretend cluster's names,
which no SLURM knows, fails its task with the launcher's own sentence, and the runner goes on.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from metaq_py.queue.admin import QueueAdmin
from metaq_py.ranges import machine_cpus, parse_cpu_list
from tests.capability import missing
from tests.runner_helpers import SETTINGS, make_queue, runner, task

SOURCE = Path(__file__).parent / "mpi" / "rankinfo.c"


@pytest.fixture(scope="module")
def rankinfo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The MPI program, compiled."""
    for tool in ("mpicc", "mpiexec"):
        if shutil.which(tool) is None:
            missing(f"{tool} is not installed (apt-get install mpich libmpich-dev)")
    out = tmp_path_factory.mktemp("mpi") / "rankinfo"
    subprocess.run(["mpicc", "-O2", "-o", str(out), str(SOURCE)], check=True, timeout=120)
    return out


@pytest.fixture(autouse=True)
def _ucx_over_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pretend nodes are one machine: UCX over its shared-memory transports, as in
    ``test_mpi_slurm.py`` (over TCP, MPICH 4.0.2 can hang in ``MPI_Finalize``; see there)."""
    monkeypatch.setenv("UCX_TLS", "self,sm")
    monkeypatch.setenv("UCX_NET_DEVICES", "lo")


def test_a_local_mpi_task_gets_mpiexec_and_its_cores(rankinfo: Path, tmp_path: Path) -> None:
    if len(machine_cpus()) < 2:
        pytest.skip("needs two CPUs to bind two ranks apart")
    q = make_queue(tmp_path / "q")
    out = tmp_path / "ranks"
    task(q, "mpi.sh", f'echo "$METAQ_MPIRUN" > {out}.line; $METAQ_MPIRUN {rankinfo} > {out}',
         NODES=2)
    said: list[str] = []
    runner(q, nodes=2, cores=2, say=said.append).run()
    assert [e.id for e in QueueAdmin(q).entries("finished", specs=False)] == ["todo/mpi.sh"]
    assert out.with_suffix(".line").read_text().startswith("mpiexec -launcher fork -hosts ")
    cpus = sorted(parse_cpu_list(line.split()[-1]) for line in out.read_text().splitlines())
    allowed = machine_cpus()
    assert cpus == sorted([(allowed[0],), (allowed[1],)] * 2)


@pytest.mark.slurm
def test_a_node_list_the_launcher_rejects_fails_the_task_not_the_runner(
        slurm: object, rankinfo: Path, tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q", SETTINGS + "mpi:\n  launcher: srun\n")
    task(q, "mpi.sh", f"$METAQ_MPIRUN {rankinfo}", NODES=2)
    task(q, "plain.sh", "true")
    runner(q, nodes=2, cores=2).run()
    admin = QueueAdmin(q)
    assert [e.id for e in admin.entries("failed", specs=False)] == ["todo/mpi.sh"]
    assert [e.id for e in admin.entries("finished", specs=False)] == ["todo/plain.sh"]
    log = next((q.root / "jobs").rglob("mpi.sh.log")).read_text()
    assert "srun: error:" in log and "Invalid node name specified" in log, log
