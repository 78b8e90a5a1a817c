"""``$METAQ_MPIRUN``'s lines (:mod:`metaq_py.launch.binding`) and the rank binder
(:mod:`metaq_py.launch.rank`), run as real processes. The real MPI runs over srun and
mpiexec are in ``test_mpi_slurm.py``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from metaq_py.launch.binding import (
    MpiLayout,
    detect_launcher,
    mpirun_line,
    other_kind,
    rank_cpus,
    which_launcher,
)
from metaq_py.launch.spec import LaunchError, LaunchSpec
from metaq_py.ranges import machine_cpus
from tests.capability import missing

TWO_BY_TWO = MpiLayout(("n1", "n2"), 2, (0, 1))


def test_each_launcher_s_line_for_two_nodes_of_two_ranks() -> None:
    assert mpirun_line("srun", TWO_BY_TWO, args=("--mpi=pmi2",), python="py") == [
        "srun", "--mpi=pmi2", "--exact", "--nodelist=n1,n2", "--nodes=2", "--ntasks=4",
        "--ntasks-per-node=2", "--cpus-per-task=1", "--cpu-bind=mask_cpu:0x1,0x2",
        "--kill-on-bad-exit=1", "py", "-m", "metaq_py.launch.rank", "0,1"]
    assert mpirun_line("mpiexec", TWO_BY_TWO) == [
        "mpiexec", "-hosts", "n1,n2", "-n", "4", "-ppn", "2", "-bind-to", "user:0,1"]
    assert mpirun_line("mpirun", TWO_BY_TWO, python="py") == [
        "mpirun", "--mca", "ras", "^slurm,tm", "--mca", "plm_slurm_args", "--nodelist=n1,n2",
        "--host", "n1:2,n2:2", "-np", "4", "--map-by", "ppr:2:node", "--bind-to", "none",
        "py", "-m", "metaq_py.launch.rank", "0,1"]
    assert mpirun_line("aprun", TWO_BY_TWO) == [
        "aprun", "-L", "n1,n2", "-n", "4", "-N", "2", "-d", "1", "-cc", "0:1"]
    assert mpirun_line("jsrun", MpiLayout(("n1", "n2"), 2, (0, 1), gpus=2)) == [
        "jsrun", "--nrs", "4", "--rs_per_host", "2", "--tasks_per_rs", "1", "--cpu_per_rs",
        "1", "--gpu_per_rs", "1", "--bind", "packed:1"]


def test_a_launcher_installed_under_another_name_starts_its_line() -> None:
    line = mpirun_line("mpirun", TWO_BY_TWO, executable="/usr/bin/mpirun.openmpi",
                       args=("--mca", "btl", "self,vader,tcp"))
    assert line[:4] == ["/usr/bin/mpirun.openmpi", "--mca", "btl", "self,vader,tcp"]
    assert line[4:] == mpirun_line("mpirun", TWO_BY_TWO)[1:]
    assert mpirun_line("mpiexec", TWO_BY_TWO, executable="mpiexec.mpich", local=True,
                       args=("-v",))[:4] == ["mpiexec.mpich", "-launcher", "fork", "-v"]
    installed = {"/usr/bin/mpirun.openmpi", "mpirun"}
    def which(name: str) -> str | None:
        return name if name in installed else None
    assert which_launcher("mpirun", "/usr/bin/mpirun.openmpi", which=which) is None
    assert which_launcher("mpirun", "/opt/ompi/bin/mpirun", which=which) == (
        "metaq.yaml names the MPI launcher 'mpirun' as '/opt/ompi/bin/mpirun', which is not "
        "installed on this node (not an executable file)")
    assert which_launcher("mpirun", "mpirun.openmpi", which=which) == (
        "metaq.yaml names the MPI launcher 'mpirun' as 'mpirun.openmpi', which is not "
        "installed on this node (not on PATH)")


def test_a_rank_of_several_cores_and_a_step_inside_a_step() -> None:
    share = MpiLayout(("n3",), 2, (4, 5, 6, 7))
    line = mpirun_line("srun", share, in_step=True, python="py")
    assert "--overlap" in line and "--cpu-bind=mask_cpu:0x30,0xc0" in line
    assert line[-1] == "4+5,6+7" and "--cpus-per-task=2" in line
    assert mpirun_line("mpiexec", share)[-1] == "user:4+5,6+7"
    assert mpirun_line("mpirun", share)[-1] == "4+5,6+7"
    assert mpirun_line("aprun", share)[-1] == "4-5:6-7"


def test_an_unknown_launcher_is_one_sentence() -> None:
    with pytest.raises(LaunchError, match="'qrun' is not a launcher metaq knows"):
        mpirun_line("qrun", TWO_BY_TWO)


@given(st.lists(st.integers(0, 255), min_size=1, max_size=64, unique=True),
       st.integers(1, 80))
def test_ranks_get_disjoint_runs_of_cores_in_order(cpus: list[int], ranks: int) -> None:
    per = rank_cpus(cpus, ranks)
    assert len(per) == ranks
    if ranks > len(cpus):
        assert all(list(c) == cpus for c in per)
        return
    flat = [c for rank in per for c in rank]
    assert flat == cpus[:len(flat)] and len({len(c) for c in per}) == 1
    assert len(cpus) - len(flat) < ranks  # only a remainder too small for a rank is left


def test_the_launcher_is_detected_and_a_missing_one_is_named() -> None:
    installed = {"mpirun"}.__contains__
    def which(name: str) -> str | None:
        return f"/usr/bin/{name}" if installed(name) else None
    assert detect_launcher("pbs", which=which) == "mpirun"
    assert detect_launcher("slurm", which=lambda n: "/usr/bin/" + n) == "srun"
    assert detect_launcher("local", which=lambda n: None) is None
    assert which_launcher("mpirun", which=which) is None
    assert which_launcher("aprun", which=which) == (
        "metaq.yaml names the MPI launcher 'aprun', which is not installed on this node "
        "(not on PATH)")


def test_a_prefix_a_shell_would_split_is_refused(tmp_path) -> None:
    with pytest.raises(LaunchError, match="whose words a shell would split apart"):
        LaunchSpec(script=tmp_path / "s", task="t", nodes=("n1",), log=tmp_path / "l",
                   rundir=tmp_path / "r", mpirun=("srun", "/opt/my python"))


def _affinity_of(per: str, env: dict[str, str]) -> tuple[subprocess.CompletedProcess, str]:
    done = subprocess.run(
        [sys.executable, "-m", "metaq_py.launch.rank", per, sys.executable, "-c",
         "import os; print(sorted(os.sched_getaffinity(0)))"],
        env={**os.environ, **env}, capture_output=True, text=True, timeout=60, check=False)
    return done, done.stdout.strip()


@pytest.mark.skipif(len(machine_cpus()) < 2, reason="needs two CPUs to bind one of them")
@pytest.mark.parametrize("variable", ["SLURM_LOCALID", "MPI_LOCALRANKID",
                                      "OMPI_COMM_WORLD_LOCAL_RANK"])
def test_a_rank_binds_itself_to_its_local_rank_s_cores(variable: str) -> None:
    allowed = machine_cpus()
    for local in (0, 1):
        done, seen = _affinity_of("0,1", {variable: str(local)})
        assert done.returncode == 0 and done.stderr == "", done.stderr
        assert seen == str([allowed[local]])


@pytest.mark.skipif(len(machine_cpus()) < 2, reason="needs two CPUs to bind one of them")
def test_the_launcher_s_local_rank_wins_over_its_daemon_s_step() -> None:
    # Open MPI's orted, started by srun, hands its ranks its own SLURM_LOCALID (0 on every
    # node): the second rank of the node must still get the second core.
    done, seen = _affinity_of("0,1", {"SLURM_LOCALID": "0", "OMPI_COMM_WORLD_LOCAL_RANK": "1"})
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert seen == str([machine_cpus()[1]])


def test_a_rank_without_its_place_says_so_and_still_runs() -> None:
    env = {k: "" for k in ("SLURM_LOCALID", "MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK",
                           "PMI_LOCAL_RANK", "PALS_LOCAL_RANKID")}
    done, seen = _affinity_of("0", env)
    assert done.returncode == 0 and seen == str(list(machine_cpus()))
    assert "is not bound: no local rank in the environment" in done.stderr
    done, _ = _affinity_of("0,x", {"SLURM_LOCALID": "0"})
    assert "'0,x' is not a list of cores per rank" in done.stderr


def test_a_missing_launcher_s_prefix_fails_with_one_sentence() -> None:
    done = subprocess.run([sys.executable, "-m", "metaq_py.launch.rank", "--unavailable",
                           "jsrun", "./prop"], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 127 and done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert "names the MPI launcher 'jsrun', which is not installed" in done.stderr


def test_a_launcher_of_the_other_mpi_is_told_by_its_version() -> None:
    # What each one's --version prints (Debian's MPICH 4.0.2 and Open MPI 4.1.4 and 5.0).
    said = {"mpiexec.hydra": "HYDRA build details:\n    Version:  4.0.2\n",
            "mpirun.openmpi": "mpirun.openmpi (OpenRTE) 4.1.4\n\nReport bugs to ...\n",
            "mpirun5": "mpirun (Open MPI) 5.0.7\n", "mpiexec.intel": "Intel(R) MPI Library\n"}
    def version(program: str) -> str:
        return said.get(program, "")
    assert other_kind("mpirun", "mpirun.openmpi", version=version) is None
    assert other_kind("mpirun", "mpirun5", version=version) is None
    assert other_kind("mpiexec", "mpiexec.hydra", version=version) is None
    assert other_kind("mpirun", "mpiexec.hydra", version=version) == (
        "metaq.yaml names the MPI launcher 'mpirun' (Open MPI's mpirun), but mpiexec.hydra "
        "here is MPICH's Hydra; name Open MPI's mpirun's program with mpi.executable (on "
        "Debian: mpirun.openmpi)")
    assert "but mpirun.openmpi here is Open MPI's mpirun" in other_kind(
        "mpiexec", "mpirun.openmpi", version=version)
    # A launcher it cannot tell, or one that says nothing, is let be: only a sure mismatch.
    assert other_kind("mpiexec", "mpiexec.intel", version=version) is None
    assert other_kind("mpirun", "gone", version=version) is None
    assert other_kind("srun", "mpiexec.hydra", version=version) is None


@pytest.mark.parametrize(("launcher", "program", "other"), [
    ("mpirun", "mpiexec.mpich", "MPICH's Hydra"), ("mpiexec", "mpirun.openmpi", "Open MPI's")])
def test_the_installed_mpis_are_told_apart(launcher: str, program: str, other: str) -> None:
    for tool in ("mpiexec.mpich", "mpirun.openmpi"):
        if shutil.which(tool) is None:
            missing(f"{tool} is not installed (apt-get install mpich openmpi-bin)")
    assert other_kind(launcher, program) is not None
    assert other in other_kind(launcher, program)
    assert other_kind("mpiexec" if launcher == "mpirun" else "mpirun", program) is None


def test_a_launcher_of_the_other_mpi_fails_its_task_with_one_sentence() -> None:
    done = subprocess.run([sys.executable, "-m", "metaq_py.launch.rank", "--other-kind",
                           "mpirun", "/usr/bin/mpirun", "./prop"], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 127 and done.stdout == "" and done.stderr.count("\n") == 1
    assert ("names the MPI launcher 'mpirun', but /usr/bin/mpirun on the batch node is "
            "another MPI's launcher") in done.stderr
