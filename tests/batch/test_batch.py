"""The batch adapters against recorded job environments and fake SLURM and PBS commands.

The fakes are real executables on ``PATH`` (the ``fake_bin`` fixture) that print what the real
commands print, so the adapters run their true code paths: argument lists, exit codes, output
parsing. The real SLURM is exercised in ``test_slurm_cluster.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from metaq_py.batch import (
    Allocation,
    BatchError,
    BatchOverrides,
    LocalBatch,
    PbsBatch,
    SlurmBatch,
    commands,
    detect_batch,
    detect_system,
)
from metaq_py.batch.local import local_jobid
from metaq_py.batch.pbs import parse_qstat_full
from metaq_py.batch.slurm import parse_end_time, parse_time_left
from tests.conftest import FakeBin

NOW = 1_700_000_000.0


def clock() -> float:
    return NOW


def one_sentence(error: pytest.ExceptionInfo[BaseException], *needles: str) -> str:
    """The error's text, checked to be a single line naming each of ``needles``."""
    text = str(error.value)
    assert "\n" not in text, text
    for needle in needles:
        assert needle in text, f"{needle!r} not in {text!r}"
    return text


# --------------------------------------------------------------------------- detection


@pytest.mark.parametrize(
    ("env", "system", "adapter"),
    [
        ({"SLURM_JOB_ID": "12"}, "slurm", SlurmBatch),
        ({"PBS_JOBID": "12.server"}, "pbs", PbsBatch),
        ({}, "local", LocalBatch),
        # METAQ's misspelling is not a PBS job.
        ({"PBS_JOB_ID": "12.server"}, "local", LocalBatch),
        # A SLURM job with PBS compatibility variables on top is a SLURM job.
        ({"SLURM_JOB_ID": "12", "PBS_JOBID": "12"}, "slurm", SlurmBatch),
    ],
)
def test_detection_follows_the_environment(env: dict[str, str], system: str, adapter: type) -> None:
    assert detect_system(env) == system
    assert type(detect_batch(env=env, clock=clock)) is adapter


def test_a_forced_system_wins_over_detection() -> None:
    batch = detect_batch(
        env={"SLURM_JOB_ID": "12"}, overrides=BatchOverrides(system="local"), clock=clock
    )
    assert isinstance(batch, LocalBatch)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"system": "lsf"}, "unknown batch system 'lsf'"),
        ({"nodes": ()}, "empty name"),
        ({"nodes": ("a", "a")}, "names a node twice"),
        ({"nnodes": 0}, "at least 1"),
        ({"gpus_per_node": -1}, "0 or more"),
        ({"walltime": 0.0}, "must be positive"),
        ({"walltime": 60.0, "end_time": NOW}, "not both"),
    ],
)
def test_bad_overrides_are_refused_in_one_sentence(kwargs: dict, needle: str) -> None:
    with pytest.raises(BatchError) as err:
        BatchOverrides(**kwargs)
    one_sentence(err, needle)


# --------------------------------------------------------------------------- SLURM

SLURM_ENV = {
    "SLURM_JOB_ID": "4242",
    "SLURM_JOB_NODELIST": "nid[0001-0003]",
    "SLURM_CLUSTER_NAME": "perlmutter",
    "SLURM_GPUS_ON_NODE": "4",
    "CUDA_VISIBLE_DEVICES": "0,1,2,3",
    "SLURM_CPUS_ON_NODE": "128",
}


def slurm_fakes(fake_bin: FakeBin, *, end: str = "2030-01-02T03:04:05\n") -> None:
    fake_bin.command("scontrol", stdout="nid0001\nnid0002\nnid0003\n")
    fake_bin.command("squeue", stdout=end, when=["%e"])


def test_slurm_allocation_from_a_recorded_job(fake_bin: FakeBin) -> None:
    slurm_fakes(fake_bin)
    alloc = detect_batch(env=SLURM_ENV, clock=clock).allocation()
    assert alloc == Allocation(
        system="slurm",
        machine="perlmutter",
        jobid="4242",
        nodes=("nid0001", "nid0002", "nid0003"),
        gpu_ids=("0", "1", "2", "3"),
        end_time=datetime(2030, 1, 2, 3, 4, 5).timestamp(),
        cores_per_node=128,
    )
    assert alloc.gpus_per_node == 4
    assert alloc.time_left(alloc.end_time - 90) == 90
    assert fake_bin.calls("scontrol") == [["show", "hostnames", "nid[0001-0003]"]]
    assert fake_bin.calls("squeue") == [["-h", "-j", "4242", "-o", "%e"]]


def test_slurm_end_time_is_read_in_the_standard_format_whatever_the_user_set(
    fake_bin: FakeBin, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A user's SLURM_TIME_FORMAT=relative would make squeue print "Tomorr 03:04".
    monkeypatch.setenv("SLURM_TIME_FORMAT", "relative")
    fake_bin.script(
        "squeue",
        f"#!{sys.executable}\n"
        "import os\n"
        "fmt = os.environ.get('SLURM_TIME_FORMAT')\n"
        "print('2030-01-02T03:04:05' if fmt == 'standard' else 'Tomorr 03:04')\n",
    )
    batch = detect_batch(env=SLURM_ENV, clock=clock)
    assert batch.end_time() == datetime(2030, 1, 2, 3, 4, 5).timestamp()


@pytest.mark.parametrize(
    ("left", "seconds"),
    [("1-02:03:04", 93784.0), ("2:03:04", 7384.0), ("3:04", 184.0), ("UNLIMITED", None)],
)
def test_slurm_falls_back_on_the_time_left(
    fake_bin: FakeBin, left: str, seconds: float | None
) -> None:
    fake_bin.command("squeue", stdout="N/A\n", when=["%e"])
    fake_bin.command("squeue", stdout=f"{left}\n", when=["%L"])
    end = detect_batch(env=SLURM_ENV, clock=clock).end_time()
    assert end == (None if seconds is None else NOW + seconds)
    assert [call[-1] for call in fake_bin.calls("squeue")] == ["%e", "%L"]


def test_slurm_end_time_garbage_is_one_clear_sentence(fake_bin: FakeBin) -> None:
    fake_bin.command("squeue", stdout="<html>\n", when=["%e"])
    fake_bin.command("squeue", stdout="soon\n", when=["%L"])
    with pytest.raises(BatchError) as err:
        detect_batch(env=SLURM_ENV, clock=clock).end_time()
    one_sentence(err, "job 4242", "'<html>'", "'soon'", "squeue -h -j 4242 -o %L")


def test_slurm_end_time_with_no_line_for_the_job_is_an_error(fake_bin: FakeBin) -> None:
    fake_bin.command("squeue", stdout="", when=["%e"])
    with pytest.raises(BatchError) as err:
        detect_batch(env=SLURM_ENV, clock=clock).end_time()
    one_sentence(err, "printed nothing", "job 4242")


def test_a_failing_squeue_is_reported_with_its_command_and_message(fake_bin: FakeBin) -> None:
    fake_bin.command(
        "squeue",
        stderr="slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n",
        exit_code=1,
    )
    with pytest.raises(BatchError) as err:
        detect_batch(env=SLURM_ENV, clock=clock).end_time()
    one_sentence(
        err, "`squeue -h -j 4242 -o %e` failed with exit code 1", "Unable to contact slurm"
    )


def test_a_missing_command_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(BatchError) as err:
        detect_batch(env=SLURM_ENV, clock=clock).allocation()
    one_sentence(err, "`scontrol` is not on PATH")


def test_a_hanging_command_times_out(fake_bin: FakeBin, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(commands, "QUERY_TIMEOUT", 0.5)
    fake_bin.script("squeue", "#!/bin/sh\nexec sleep 30\n")
    started = time.monotonic()
    with pytest.raises(BatchError) as err:
        detect_batch(env=SLURM_ENV, clock=clock).end_time()
    assert time.monotonic() - started < 10
    one_sentence(err, "did not answer within 0.5 s")


def test_scontrol_garbage_is_refused(fake_bin: FakeBin) -> None:
    # What `scontrol show hostnames 'n[1-'` really prints (with exit code 0).
    fake_bin.command("scontrol", stdout="n]\n")
    with pytest.raises(BatchError) as err:
        detect_batch(env=SLURM_ENV, clock=clock).allocation()
    one_sentence(err, "'n]'", "not one host name per line")


def test_slurm_without_a_job_id_says_so() -> None:
    batch = detect_batch(env={}, overrides=BatchOverrides(system="slurm"), clock=clock)
    with pytest.raises(BatchError) as err:
        batch.allocation()
    one_sentence(err, "SLURM_JOB_ID is not set")


@pytest.mark.parametrize(
    ("gpu_env", "ids"),
    [
        ({"SLURM_GPUS_ON_NODE": "2", "CUDA_VISIBLE_DEVICES": "2,3"}, ("2", "3")),
        ({"SLURM_GPUS_ON_NODE": "2"}, ("0", "1")),
        # A CUDA_VISIBLE_DEVICES that disagrees with SLURM's count is not trusted.
        ({"SLURM_GPUS_ON_NODE": "2", "CUDA_VISIBLE_DEVICES": "0"}, ("0", "1")),
        ({"SLURM_JOB_GPUS": "4,5,6-7"}, ("0", "1", "2", "3")),
        ({"SLURM_GPUS_PER_NODE": "a100:4"}, ("0", "1", "2", "3")),
        ({"SLURM_GPUS_PER_NODE": "a100:1,v100:2"}, ("0", "1", "2")),
        ({}, ()),
    ],
)
def test_slurm_gpus(fake_bin: FakeBin, gpu_env: dict[str, str], ids: tuple[str, ...]) -> None:
    slurm_fakes(fake_bin)
    env = {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "nid[0001-0003]", **gpu_env}
    assert detect_batch(env=env, clock=clock).allocation().gpu_ids == ids


@pytest.mark.parametrize(
    ("gpu_env", "needle"),
    [
        ({"SLURM_GPUS_ON_NODE": "four"}, "SLURM_GPUS_ON_NODE is 'four'"),
        ({"SLURM_JOB_GPUS": "0,x"}, "SLURM_JOB_GPUS is '0,x'"),
        ({"SLURM_GPUS_PER_NODE": "a100:"}, "SLURM_GPUS_PER_NODE is 'a100:'"),
    ],
)
def test_slurm_bad_gpu_variables(fake_bin: FakeBin, gpu_env: dict[str, str], needle: str) -> None:
    slurm_fakes(fake_bin)
    env = {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "nid0001", **gpu_env}
    with pytest.raises(BatchError) as err:
        detect_batch(env=env, clock=clock).allocation()
    one_sentence(err, needle)


@pytest.mark.parametrize(
    ("reply", "alive"),
    [
        ({"stdout": "RUNNING\n"}, True),
        ({"stdout": "PENDING\n"}, True),
        ({"stdout": "COMPLETING\n"}, True),
        ({"stdout": "COMPLETED\n"}, False),
        ({"stdout": "TIMEOUT\n"}, False),
        ({"stdout": "CANCELLED\n"}, False),
        # What squeue 22.05 prints for a job that ended moments ago: nothing at all.
        ({"stdout": ""}, False),
        ({"stderr": "slurm_load_jobs error: Invalid job id specified\n", "exit_code": 1}, False),
    ],
)
def test_slurm_liveness(fake_bin: FakeBin, reply: dict, alive: bool) -> None:
    fake_bin.command("squeue", **reply)
    assert detect_batch(env=SLURM_ENV, clock=clock).is_alive("977") is alive
    assert fake_bin.calls("squeue") == [["-h", "-j", "977", "-o", "%T"]]


def test_slurm_liveness_never_guesses(fake_bin: FakeBin) -> None:
    batch = detect_batch(env=SLURM_ENV, clock=clock)
    fake_bin.command("squeue", stderr="Socket timed out on send/recv operation\n", exit_code=1)
    with pytest.raises(BatchError) as err:
        batch.is_alive("977")
    one_sentence(err, "Socket timed out")


def test_slurm_liveness_refuses_garbage(fake_bin: FakeBin) -> None:
    fake_bin.command("squeue", stdout="<b>busy</b>\n")
    with pytest.raises(BatchError) as err:
        detect_batch(env=SLURM_ENV, clock=clock).is_alive("977")
    one_sentence(err, "'<B>BUSY</B>'", "not a job state")


def test_slurm_liveness_checks_the_job_id_before_running_anything(fake_bin: FakeBin) -> None:
    fake_bin.command("squeue", stdout="RUNNING\n")
    with pytest.raises(BatchError) as err:
        detect_batch(env=SLURM_ENV, clock=clock).is_alive("--all")
    one_sentence(err, "'--all'", "not a SLURM job id")
    assert fake_bin.calls("squeue") == []


def test_an_overridden_job_id_is_checked_too(fake_bin: FakeBin) -> None:
    fake_bin.command("squeue", stdout="2030-01-02T03:04:05\n")
    batch = detect_batch(env=SLURM_ENV, overrides=BatchOverrides(jobid="-u root"), clock=clock)
    with pytest.raises(BatchError) as err:
        batch.end_time()
    one_sentence(err, "'-u root'", "not a SLURM job id")
    assert fake_bin.calls("squeue") == []


def test_slurm_time_parsers_directly() -> None:
    assert parse_end_time("2031-07-08T09:10:11") == datetime(2031, 7, 8, 9, 10, 11).timestamp()
    for no_date in ("N/A", "Unknown", "NONE", "", "Tomorr 03:04"):
        assert parse_end_time(no_date) is None
    assert parse_time_left("0:59") == 59.0
    with pytest.raises(BatchError):
        parse_time_left("INVALID")


# --------------------------------------------------------------------------- overrides


def test_overrides_replace_what_the_batch_system_would_say(fake_bin: FakeBin) -> None:
    fake_bin.command("scontrol", stdout="should not be asked\n")
    fake_bin.command("squeue", stdout="should not be asked\n")
    overrides = BatchOverrides(
        machine="frontier",
        jobid="99",
        nodes=("a", "b", "c"),
        nnodes=2,
        gpus_per_node=2,
        end_time=NOW + 600,
    )
    alloc = detect_batch(env=SLURM_ENV, overrides=overrides, clock=clock).allocation()
    assert alloc == Allocation(
        system="slurm",
        machine="frontier",
        jobid="99",
        nodes=("a", "b"),
        gpu_ids=("0", "1"),
        end_time=NOW + 600,
        cores_per_node=128,
    )
    assert fake_bin.calls("scontrol") == []
    assert fake_bin.calls("squeue") == []


def test_a_walltime_override_caps_the_allocation_but_never_extends_it(fake_bin: FakeBin) -> None:
    slurm_fakes(fake_bin, end=f"{datetime.fromtimestamp(NOW + 3600):%Y-%m-%dT%H:%M:%S}\n")
    short = detect_batch(env=SLURM_ENV, overrides=BatchOverrides(walltime=600), clock=clock)
    assert short.end_time() == NOW + 600
    long = detect_batch(env=SLURM_ENV, overrides=BatchOverrides(walltime=7200), clock=clock)
    assert long.end_time() == NOW + 3600


def test_asking_for_more_nodes_than_the_job_has_is_an_error(fake_bin: FakeBin) -> None:
    slurm_fakes(fake_bin)
    batch = detect_batch(env=SLURM_ENV, overrides=BatchOverrides(nnodes=5), clock=clock)
    with pytest.raises(BatchError) as err:
        batch.allocation()
    one_sentence(err, "asked to use 5 nodes", "slurm job 4242 has only 3")


# --------------------------------------------------------------------------- PBS

TORQUE_QSTAT = """\
Job Id: 4567.torque01.cluster.example
    Job_Name = metaq
    Job_Owner = alice@login1.cluster.example
    resources_used.walltime = 00:01:00
    job_state = R
    queue = batch
    Resource_List.nodes = 3:ppn=2
    Resource_List.walltime = 01:00:00
    Variable_List = PBS_O_HOME=/home/alice,PBS_O_LOGNAME=alice,
\tPBS_O_PATH=/usr/bin:/bin,PBS_O_SHELL=/bin/bash
    start_time = 1699999940
    Walltime.Remaining = 3540
"""

PBSPRO_QSTAT = """\
Job Id: 1234.pbs01
    Job_Name = metaq
    job_state = R
    queue = workq
    server = pbs01
    exec_host = node01/0*64+node02/0*64
    Resource_List.ncpus = 128
    Resource_List.ngpus = 8
    Resource_List.nodect = 2
    Resource_List.place = scatter:excl
    Resource_List.select = 2:ncpus=64:ngpus=4
    Resource_List.walltime = 02:00:00
    stime = Mon May  6 10:00:05 2024
    Variable_List = PBS_O_HOME=/home/bob,PBS_O_LANG=en_US.UTF-8,PBS_O_LOGNAME=bob,PBS_O_PA
\tTH=/usr/bin:/bin,PBS_O_MAIL=/var/spool/mail/bob,PBS_O_SHELL=/bin/bash,
\tPBS_O_WORKDIR=/home/bob/run
"""


def nodefile(tmp_path: Path, text: str) -> str:
    path = tmp_path / "nodefile"
    path.write_text(text)
    return str(path)


def test_torque_allocation_from_a_recorded_job(fake_bin: FakeBin, tmp_path: Path) -> None:
    fake_bin.command("qstat", stdout=TORQUE_QSTAT)
    env = {
        "PBS_JOBID": "4567.torque01.cluster.example",
        # One line per slot; hosts in the order PBS gave them.
        "PBS_NODEFILE": nodefile(tmp_path, "node03\nnode03\nnode01\nnode01\n\nnode02\nnode02\n"),
    }
    alloc = detect_batch(env=env, clock=clock).allocation()
    assert alloc == Allocation(
        system="pbs",
        machine="torque01",
        jobid="4567.torque01.cluster.example",
        nodes=("node03", "node01", "node02"),
        gpu_ids=(),
        end_time=NOW + 3540,
        # a Torque job says nothing of its cores: those this process may use
        cores_per_node=len(os.sched_getaffinity(0)),
    )
    assert ["-f", "4567.torque01.cluster.example"] in fake_bin.calls("qstat")


def test_pbspro_allocation_from_a_recorded_job(fake_bin: FakeBin, tmp_path: Path) -> None:
    fake_bin.command("qstat", stdout=PBSPRO_QSTAT)
    env = {"PBS_JOBID": "1234.pbs01", "PBS_NODEFILE": nodefile(tmp_path, "node01\nnode02\n")}
    alloc = detect_batch(env=env, clock=clock).allocation()
    assert alloc.nodes == ("node01", "node02")
    assert alloc.machine == "pbs01"
    assert alloc.gpu_ids == ("0", "1", "2", "3")  # ngpus=4 per select chunk
    assert alloc.end_time == datetime(2024, 5, 6, 10, 0, 5).timestamp() + 7200


def test_qstat_full_joins_continuation_lines() -> None:
    fields = parse_qstat_full(PBSPRO_QSTAT)
    assert fields["Job Id"] == "1234.pbs01"
    assert fields["stime"] == "Mon May  6 10:00:05 2024"
    assert "PBS_O_PATH=/usr/bin:/bin" in fields["Variable_List"]
    assert fields["Variable_List"].endswith("PBS_O_WORKDIR=/home/bob/run")
    # A continuation line holding "=" must not become an attribute of its own.
    assert not any(key.startswith("PBS_O") for key in fields)


def test_pbs_gpus_from_a_total_count(fake_bin: FakeBin, tmp_path: Path) -> None:
    fake_bin.command("qstat", stdout=PBSPRO_QSTAT.replace(":ngpus=4", ""))
    env = {"PBS_JOBID": "1234.pbs01", "PBS_NODEFILE": nodefile(tmp_path, "node01\nnode02\n")}
    assert detect_batch(env=env, clock=clock).allocation().gpus_per_node == 4  # 8 over 2 nodes


def test_pbs_gpus_from_torque_gpufile(fake_bin: FakeBin, tmp_path: Path) -> None:
    fake_bin.command("qstat", stdout=TORQUE_QSTAT)
    gpufile = tmp_path / "gpufile"
    gpufile.write_text("node01-gpu0\nnode01-gpu1\nnode02-gpu0\nnode02-gpu1\n")
    env = {
        "PBS_JOBID": "4567.torque01",
        "PBS_NODEFILE": nodefile(tmp_path, "node01\nnode02\n"),
        "PBS_GPUFILE": str(gpufile),
    }
    assert detect_batch(env=env, clock=clock).allocation().gpu_ids == ("0", "1")


def test_pbs_without_a_walltime_has_no_end(fake_bin: FakeBin, tmp_path: Path) -> None:
    no_limit = "\n".join(
        line
        for line in PBSPRO_QSTAT.splitlines()
        if "walltime" not in line and not line.startswith("\t")
    )
    fake_bin.command("qstat", stdout=no_limit)
    env = {"PBS_JOBID": "1234.pbs01", "PBS_NODEFILE": nodefile(tmp_path, "node01\n")}
    assert detect_batch(env=env, clock=clock).end_time() is None


@pytest.mark.parametrize(
    ("qstat", "needle"),
    [
        (PBSPRO_QSTAT.replace("02:00:00", "two hours"), "Resource_List.walltime = 'two hours'"),
        (PBSPRO_QSTAT.replace("Mon May  6", "yesterday"), "start time 'yesterday"),
        ("qstat: command output\n", "no job_state line"),
    ],
)
def test_pbs_end_time_garbage(fake_bin: FakeBin, tmp_path: Path, qstat: str, needle: str) -> None:
    fake_bin.command("qstat", stdout=qstat)
    env = {"PBS_JOBID": "1234.pbs01", "PBS_NODEFILE": nodefile(tmp_path, "node01\n")}
    with pytest.raises(BatchError) as err:
        detect_batch(env=env, clock=clock).end_time()
    one_sentence(err, needle)


@pytest.mark.parametrize(
    ("env_nodefile", "needle"),
    [
        (None, "PBS_NODEFILE is not set"),
        ("/nonexistent/nodefile", "PBS_NODEFILE /nonexistent/nodefile cannot be read"),
        ("", "names no host"),
        ("node 01\n", "'node 01', which is not a host name"),
    ],
)
def test_pbs_bad_nodefile(tmp_path: Path, env_nodefile: str | None, needle: str) -> None:
    env = {"PBS_JOBID": "1234.pbs01"}
    if env_nodefile is not None:
        env["PBS_NODEFILE"] = (
            env_nodefile if env_nodefile.startswith("/") else nodefile(tmp_path, env_nodefile)
        )
    with pytest.raises(BatchError) as err:
        detect_batch(env=env, overrides=BatchOverrides(system="pbs"), clock=clock).allocation()
    one_sentence(err, needle)


def test_pbs_reads_pbs_jobid_not_metaqs_misspelling(tmp_path: Path) -> None:
    env = {"PBS_JOB_ID": "1234.pbs01", "PBS_NODEFILE": nodefile(tmp_path, "node01\n")}
    batch = detect_batch(env=env, overrides=BatchOverrides(system="pbs"), clock=clock)
    with pytest.raises(BatchError) as err:
        batch.allocation()
    one_sentence(err, "PBS_JOBID is not set")


@pytest.mark.parametrize(
    ("reply", "alive"),
    [
        ({"stdout": PBSPRO_QSTAT}, True),
        ({"stdout": PBSPRO_QSTAT.replace("job_state = R", "job_state = Q")}, True),
        ({"stdout": PBSPRO_QSTAT.replace("job_state = R", "job_state = E")}, True),
        ({"stdout": TORQUE_QSTAT.replace("job_state = R", "job_state = C")}, False),
        ({"stdout": PBSPRO_QSTAT.replace("job_state = R", "job_state = F")}, False),
        ({"stderr": "qstat: Unknown Job Id 99.pbs01\n", "exit_code": 153}, False),
        ({"stderr": "qstat: Unknown Job Id Error 99.torque01\n", "exit_code": 153}, False),
        (
            {
                "stderr": "qstat: 99.pbs01 Job has finished, use -x or -H to obtain "
                "historical job information\n",
                "exit_code": 35,
            },
            False,
        ),
    ],
)
def test_pbs_liveness(fake_bin: FakeBin, reply: dict, alive: bool) -> None:
    fake_bin.command("qstat", **reply)
    batch = detect_batch(env={"PBS_JOBID": "1234.pbs01"}, clock=clock)
    assert batch.is_alive("99.pbs01") is alive
    assert fake_bin.calls("qstat") == [["-f", "99.pbs01"]]


@pytest.mark.parametrize(
    ("reply", "needle"),
    [
        (
            # PBS's error 15010 reaches the shell modulo 256.
            {
                "stderr": "Connection refused\nqstat: cannot connect to server pbs01\n",
                "exit_code": 15010 % 256,
            },
            "exit code 162: Connection refused",
        ),
        ({"stdout": PBSPRO_QSTAT.replace("job_state = R", "job_state = ??")}, "job_state '??'"),
    ],
)
def test_pbs_liveness_never_guesses(fake_bin: FakeBin, reply: dict, needle: str) -> None:
    fake_bin.command("qstat", **reply)
    with pytest.raises(BatchError) as err:
        detect_batch(env={"PBS_JOBID": "1234.pbs01"}, clock=clock).is_alive("99.pbs01")
    one_sentence(err, needle)


# --------------------------------------------------------------------------- local


def test_local_pretend_cluster() -> None:
    batch = detect_batch(env={}, overrides=BatchOverrides(nnodes=3, walltime=900), clock=clock)
    alloc = batch.allocation()
    assert alloc.system == "local"
    assert alloc.nodes == ("local0", "local1", "local2")
    assert alloc.gpu_ids == ()
    assert alloc.end_time == NOW + 900
    assert alloc.jobid.endswith(f"-{os.getpid()}")


def test_local_defaults_to_one_node_without_a_limit() -> None:
    alloc = detect_batch(env={}, clock=clock).allocation()
    assert alloc.nodes == ("local0",)
    assert alloc.end_time is None
    assert alloc.time_left(NOW) == float("inf")


def test_local_liveness_asks_the_process_table() -> None:
    batch = detect_batch(env={}, clock=clock)
    assert batch.is_alive(batch.jobid) is True
    gone = subprocess.Popen(["true"])
    gone.wait()
    host = batch.jobid.rsplit("-", 1)[0]
    assert batch.is_alive(local_jobid(host, gone.pid)) is False


def test_local_liveness_on_another_host_is_unknowable() -> None:
    batch = detect_batch(env={}, clock=clock)
    with pytest.raises(BatchError) as err:
        batch.is_alive("elsewhere-123")
    one_sentence(err, "ran on host elsewhere")
    with pytest.raises(BatchError) as err:
        batch.is_alive("no pid here")
    one_sentence(err, "not a local job id")
