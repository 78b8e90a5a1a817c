"""Real accounting: a mix of jobs run on the local SLURM (completed, failed, cancelled, timed
out, an array and a two-node job), read back from slurmdbd with the documented ``sacct``
command, loaded as a trace and replayed by ``metaq simulate``.

Skips, with the reason, when the cluster or its accounting (tests/slurm/start.sh starts
slurmdbd) is not up.
"""

from __future__ import annotations

import csv
import subprocess
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from metaq_py.cli import app
from sim.trace.formats.sacct import DEFAULT_COLUMNS
from sim.trace.loader import detect_format, load_trace
from tests.conftest import SlurmCluster

pytestmark = pytest.mark.slurm

DOCUMENTED = ["sacct", "--parsable2", "--allusers", "--duplicates", "-o",
              ",".join(DEFAULT_COLUMNS)]
"""The command :mod:`sim.trace.formats.sacct` documents (our jobs picked with ``-j``)."""
FINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")


def sacct(*args: str) -> str:
    done = subprocess.run([*DOCUMENTED, *args], capture_output=True, text=True, timeout=60,
                          check=False)
    if done.returncode != 0:
        pytest.skip(f"sacct does not answer (is slurmdbd up?): {done.stderr.strip()}")
    return done.stdout


def states(ids: list[str]) -> dict[str, str]:
    """Each job's state as the accounting has it (array members under their own raw ids)."""
    rows = csv.DictReader(sacct("-X", "-j", ",".join(ids)).splitlines(), delimiter="|")
    return {r["JobIDRaw"]: r["State"] for r in rows}


def wait_recorded(ids: list[str], members: int, timeout: float) -> dict[str, str]:
    """Wait until slurmdbd holds every job (``members`` rows in all) in a final state."""
    deadline = time.monotonic() + timeout
    seen: dict[str, str] = {}
    while time.monotonic() < deadline:
        seen = states(ids)
        if len(seen) == members and all(s.startswith(FINAL) for s in seen.values()):
            return seen
        time.sleep(1)
    raise AssertionError(f"the accounting did not record every job's end in {timeout:g} s: "
                         f"{seen}")


def ran_for(slurm: SlurmCluster, jobid: str, *, seconds: int, timeout: float) -> None:
    """Wait until SLURM says job ``jobid`` has run ``seconds`` (its ``RunTime``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = slurm.job_fields(jobid).get("RunTime", "00:00:00")
        if run.count(":") == 2 and int(run.rsplit(":", 1)[1]) + 60 * int(
                run.split(":")[-2]) >= seconds:
            return
        time.sleep(0.25)
    raise AssertionError(f"job {jobid} did not run {seconds} s within {timeout:g} s")


def test_real_sacct_output_is_read_and_replayed(slurm: SlurmCluster, tmp_path: Path) -> None:
    sacct("-X", "-j", "1")  # skips here when the accounting is off
    submit = {"cwd": tmp_path}
    quiet = ("-o", "/dev/null", "-e", "/dev/null")
    completed = slurm.sbatch("-N", "1", "-n", "1", "-t", "1", *quiet, "--wrap", "sleep 2",
                             **submit)
    # each job runs a second or more: SLURM counts whole seconds, and a run of 0 s is one
    # that cleaning drops (rule 2)
    failed = slurm.sbatch("-N", "1", "-n", "1", "-t", "1", *quiet, "--wrap", "sleep 2; exit 3",
                          **submit)
    timed_out = slurm.sbatch("-N", "1", "-n", "1", "-t", "0:10", *quiet, "--wrap",
                             "sleep 300", **submit)
    cancelled = slurm.sbatch("-N", "1", "-n", "1", "-t", "5", *quiet, "--wrap", "sleep 300",
                             **submit)
    array = slurm.sbatch("-N", "1", "-n", "1", "-t", "1", "--array=1-3", *quiet, "--wrap",
                         "sleep 1", **submit)
    wide = slurm.sbatch("-N", "2", "-t", "1", *quiet, "--wrap", "srun sleep 2", **submit)
    ran_for(slurm, cancelled, seconds=2, timeout=120)
    subprocess.run(["scancel", cancelled], check=True, timeout=30)
    ids = [completed, failed, timed_out, cancelled, array, wide]
    recorded = wait_recorded(ids, members=8, timeout=300)
    assert recorded[completed] == "COMPLETED" and recorded[failed] == "FAILED"
    assert recorded[timed_out] == "TIMEOUT" and recorded[cancelled].startswith("CANCELLED")

    log = tmp_path / "sacct.txt"
    log.write_text(sacct("-j", ",".join(ids)))
    assert log.read_text().splitlines()[0] == "|".join(DEFAULT_COLUMNS)
    assert any(".batch|" in line for line in log.read_text().splitlines())  # real steps
    assert detect_format(log) == "sacct"
    trace = load_trace(log, nodes=4, cache=False)
    assert trace.report.dropped == 0, trace.report.lines()
    assert len(trace) == 8
    assert any(n.startswith("skipped ") and "job-step lines" in n for n in trace.notes)
    jobs = {j.id: j for j in trace}
    assert (jobs[int(completed)].status, jobs[int(completed)].nodes) == (1, 1)
    assert jobs[int(failed)].status == 0
    assert jobs[int(cancelled)].status == 5
    late = jobs[int(timed_out)]
    assert late.status == 0 and late.walltime == 60 and late.runtime == 60  # capped there
    assert jobs[int(wide)].nodes == 2
    assert sum(1 for j in trace if j.status == 1) == 5  # completed, wide and the array's 3
    assert all(j.wait is not None and j.wait >= 0 for j in trace)

    out = tmp_path / "sim"
    result = CliRunner().invoke(app, ["simulate", "--trace", str(log), "--nodes", "4",
                                      "--out", str(out), "--no-plots", "--no-cache"])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader((out / "jobs.csv").open()))
    assert len(rows) == 8 and all(r["end"] for r in rows)
    compared = CliRunner().invoke(app, ["simulate", "--trace", str(log), "--nodes", "4",
                                        "--compare-recorded", "--out", str(tmp_path / "cmp"),
                                        "--no-plots", "--no-cache"])
    assert compared.exit_code == 0, compared.output
    assert "8 jobs (hours" in compared.output
