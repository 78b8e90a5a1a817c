"""Submitting allocations and listing a queue's allocations, through fake sbatch, squeue, qsub
and qstat on ``PATH`` that print what the real ones print."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from metaq_py.batch import BatchError
from metaq_py.batch.submit import (
    AllocRequest,
    BatchJob,
    _pbs_time,
    _slurm_time,
    alloc_name,
    list_allocations,
    shown,
    submit,
    submit_command,
)
from tests.conftest import FakeBin


def request(system: str = "slurm", **kw: object) -> AllocRequest:
    values: dict = {"system": system, "jobscript": Path("/site/slurm.sh"),
                    "queue": Path("/lus/proj/queue"), "name": "metaq-0123abcd", "nodes": 4,
                    "walltime": 5400.0, "output": Path("/lus/proj/queue/alloc")}
    values.update(kw)
    return AllocRequest(**values)


def test_the_sbatch_command_line_is_exact() -> None:
    argv, env = submit_command(request(account="lqcd", partition="regular", qos="debug",
                                       flags=("--constraint=gpu", "--gpus-per-node=4")))
    assert argv == ("sbatch", "--parsable", "--job-name=metaq-0123abcd", "--nodes=4",
                    "--time=01:30:00", "--output=/lus/proj/queue/alloc/slurm-%j.out",
                    "--account=lqcd", "--partition=regular", "--qos=debug",
                    "--constraint=gpu", "--gpus-per-node=4", "/site/slurm.sh")
    assert env == {"METAQ_QUEUE": "/lus/proj/queue"}
    assert shown(argv, env).startswith("METAQ_QUEUE=/lus/proj/queue sbatch --parsable ")


def test_the_qsub_command_line_is_exact() -> None:
    argv, env = submit_command(request("pbs", walltime=100_000.0, account="lqcd",
                                       partition="prod", flags=("-l", "filesystems=home")))
    assert argv == ("qsub", "-N", "metaq-0123abcd", "-l", "select=4", "-l", "walltime=27:46:40",
                    "-v", "METAQ_QUEUE=/lus/proj/queue", "-o", "/lus/proj/queue/alloc/",
                    "-A", "lqcd", "-q", "prod", "-l", "filesystems=home", "/site/slurm.sh")
    assert env == {}


@pytest.mark.parametrize(("kw", "needle"), [
    ({"qos": "debug"}, "PBS has no QOS"),
    ({"queue": Path("/lus/a,b/queue")}, "has a comma"),
])
def test_what_qsub_cannot_take_is_refused_in_one_sentence(kw: dict, needle: str) -> None:
    with pytest.raises(BatchError) as err:
        submit_command(request("pbs", **kw))
    assert needle in str(err.value) and "\n" not in str(err.value)


@given(st.integers(0, 40 * 86400))
def test_walltimes_are_written_as_the_batch_systems_read_them(seconds: int) -> None:
    days, _, clock = _slurm_time(seconds).rpartition("-")
    h, m, s = map(int, clock.split(":"))
    assert int(days or 0) * 86400 + h * 3600 + m * 60 + s == seconds and h < 24
    h, m, s = map(int, _pbs_time(seconds).split(":"))
    assert h * 3600 + m * 60 + s == seconds and m < 60 and s < 60


def test_the_job_name_marks_one_queue(tmp_path: Path) -> None:
    a, b = alloc_name(tmp_path / "a"), alloc_name(tmp_path / "b")
    assert a != b and len(a) == 14 and a.startswith("metaq-")
    assert alloc_name(tmp_path / "a") == a


def test_sbatch_gives_the_job_id(fake_bin: FakeBin) -> None:
    fake_bin.command("sbatch", stdout="4242;perlmutter\n")
    assert submit(request()) == "4242"
    assert fake_bin.calls("sbatch")[0][-1] == "/site/slurm.sh"


def test_qsub_gives_the_job_id(fake_bin: FakeBin) -> None:
    fake_bin.command("qsub", stdout="1234.pbs01\n")
    assert submit(request("pbs")) == "1234.pbs01"


def test_a_refused_submission_is_one_sentence_with_the_command(fake_bin: FakeBin) -> None:
    fake_bin.command("sbatch", stderr="sbatch: error: Invalid account or account/partition "
                                      "combination specified\n", exit_code=1)
    with pytest.raises(BatchError) as err:
        submit(request())
    text = str(err.value)
    assert "\n" not in text and "`sbatch --parsable" in text and "Invalid account" in text


def test_an_unreadable_reply_is_an_error(fake_bin: FakeBin) -> None:
    fake_bin.command("sbatch", stdout="Submitted batch job\n")
    with pytest.raises(BatchError, match="not the id of the job it submitted"):
        submit(request())


def test_squeue_lists_the_queues_allocations(fake_bin: FakeBin) -> None:
    fake_bin.command("squeue", stdout="11 RUNNING\n12 PENDING\n13 COMPLETED\n14 COMPLETING\n")
    jobs = list_allocations("slurm", "metaq-0123abcd")
    assert jobs == [BatchJob("11", "RUNNING", False), BatchJob("12", "PENDING", True),
                    BatchJob("14", "COMPLETING", False)]
    assert fake_bin.calls("squeue") == [["-h", "--name=metaq-0123abcd", "-o", "%i %T"]]


def test_squeue_nonsense_is_an_error(fake_bin: FakeBin) -> None:
    fake_bin.command("squeue", stdout="11 running fine\n")
    with pytest.raises(BatchError, match="not a job id and a state"):
        list_allocations("slurm", "metaq-0123abcd")


QSTAT = """\
Job id            Name             User              Time Use S Queue
----------------  ---------------- ----------------  -------- - -----
101.pbs01         metaq-0123abcd   alice             00:10:00 R workq
102.pbs01         metaq-0123abcd   bob                      0 Q workq
103.pbs01         other            alice                    0 Q workq
104.pbs01         metaq-0123abcd   alice             00:00:01 F workq
"""


def test_qstat_lists_the_queues_allocations_of_every_user(fake_bin: FakeBin) -> None:
    fake_bin.command("qstat", stdout=QSTAT)
    assert list_allocations("pbs", "metaq-0123abcd") == [
        BatchJob("101.pbs01", "R", False), BatchJob("102.pbs01", "Q", True)]


def test_a_failing_qstat_is_an_error(fake_bin: FakeBin) -> None:
    fake_bin.command("qstat", stderr="qstat: cannot connect to server pbs01\n", exit_code=2)
    with pytest.raises(BatchError, match="cannot connect to server"):
        list_allocations("pbs", "metaq-0123abcd")
