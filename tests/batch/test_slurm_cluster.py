"""The real local SLURM (tests/slurm/start.sh): the cluster itself, the project's job script,
the SLURM batch adapter and launching, each inside real jobs.

All of these skip, with the reason, when the cluster is not up.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from tests.conftest import REPO, SlurmCluster

pytestmark = pytest.mark.slurm

# Jobs run the checkout under test, whatever is installed.
JOB_ENV = {"PYTHONPATH": str(REPO)}


def executable(path: Path, body: str) -> Path:
    path.write_text(body)
    path.chmod(0o755)
    return path


def task_lines(log: Path) -> list[str]:
    """A task log without SLURM's own notices (such as "srun: Job step creation temporarily
    disabled, retrying", which depends on how fast the last job's nodes were cleaned up)."""
    return [
        line
        for line in log.read_text().splitlines()
        if not line.startswith(("srun:", "slurmstepd"))
    ]


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] != b"Z"


# --------------------------------------------------------------------------- the cluster


def test_a_two_node_job_runs_srun_on_two_nodes(slurm: SlurmCluster, tmp_path: Path) -> None:
    out, err = tmp_path / "job.out", tmp_path / "job.err"
    jobid = slurm.sbatch(
        "-N", "2", "-t", "1", "-o", out, "-e", err,
        "--wrap", "srun hostname; srun printenv SLURMD_NODENAME",
        cwd=tmp_path,
    )  # fmt: skip
    end = slurm.wait(jobid, timeout=60)
    assert (end.state, end.exit_code) == ("COMPLETED", 0)
    lines = out.read_text().split()
    assert lines[:2] == [os.uname().nodename.split(".")[0]] * 2
    # which two nodes SLURM picks depends on what earlier jobs still hold; two distinct ones
    names = lines[2:]
    assert len(names) == 2 and len(set(names)) == 2
    assert set(names) <= {"n1", "n2", "n3", "n4"}


def test_srun_nodelist_pins_a_step_to_its_nodes(slurm: SlurmCluster, tmp_path: Path) -> None:
    out, err = tmp_path / "job.out", tmp_path / "job.err"
    jobid = slurm.sbatch(
        "-N", "4", "-t", "1", "-o", out, "-e", err,
        "--wrap", "srun --nodelist=n2,n4 -N 2 printenv SLURMD_NODENAME",
        cwd=tmp_path,
    )  # fmt: skip
    assert slurm.wait(jobid, timeout=60).state == "COMPLETED"
    assert sorted(out.read_text().split()) == ["n2", "n4"]


def test_the_warning_signal_reaches_the_batch_script_before_the_limit(
    slurm: SlurmCluster, tmp_path: Path
) -> None:
    out, err = tmp_path / "job.out", tmp_path / "job.err"
    body = (
        "#!/bin/bash\n"
        "start=$(date +%s)\n"
        "trap 'echo USR1 after $(( $(date +%s) - start )) s; exit 0' USR1\n"
        "while :; do sleep 0.2; done\n"
    )
    job = executable(tmp_path / "job.sh", body)
    # One minute, warned 50 s before the end; SLURM checks about every 30 s.
    jobid = slurm.sbatch(
        "-N", "1", "-t", "1", "--signal=B:USR1@50", "-o", out, "-e", err, job, cwd=tmp_path
    )  # fmt: skip
    end = slurm.wait(jobid, timeout=120)
    text = out.read_text()
    # It ended by itself, not by TIMEOUT.
    assert end.state == "COMPLETED", f"{end} {text} {err.read_text()}"
    after = int(text.split()[2])
    # SLURM may warn up to a minute early (its documented resolution), never late.
    assert 0 <= after < 60


# ------------------------------------ metaq_py/share/jobscripts/slurm.sh

FAKE_METAQ = f"""#!{sys.executable}
# Stands in for `metaq`: records how it was started, then waits for the warning signal.
import json, os, signal, sys, time
record = os.environ["FAKE_METAQ_RECORD"]
started = time.time()

def warned(signum, frame):
    with open(record + ".signal", "w") as f:
        json.dump({{"signal": signum, "after": time.time() - started, "pid": os.getpid()}}, f)
    sys.exit(0)

signal.signal(signal.SIGUSR1, warned)
with open(record, "w") as f:
    json.dump({{"argv": sys.argv[1:], "cwd": os.getcwd(), "pid": os.getpid(),
               "ppid": os.getppid(), "job": os.environ.get("SLURM_JOB_ID")}}, f)
while True:
    time.sleep(0.2)
"""


def test_the_slurm_jobscript_runs_metaq_and_passes_it_the_warning(
    slurm: SlurmCluster, tmp_path: Path
) -> None:
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    executable(fake_bin / "metaq", FAKE_METAQ)
    record = tmp_path / "record.json"
    env = {
        **JOB_ENV,
        "PATH": f"{fake_bin}:{os.environ['PATH']}",
        "FAKE_METAQ_RECORD": str(record),
    }
    # The script's own --signal (120 s) exceeds this one-minute limit: the warning comes at
    # SLURM's first check, and command-line options override the script's #SBATCH lines.
    jobid = slurm.sbatch(
        "-N", "2", "-t", "1", "-o", tmp_path / "job.out", "-e", tmp_path / "job.err",
        REPO / "metaq_py" / "share" / "jobscripts" / "slurm.sh", "--linger", "--name", "two words",
        cwd=tmp_path, env=env,
    )  # fmt: skip
    end = slurm.wait(jobid, timeout=120)
    assert end.state == "COMPLETED", (tmp_path / "job.err").read_text()
    started = json.loads(record.read_text())
    assert started["argv"] == ["run", "--queue", "queue", "--linger", "--name", "two words"]
    assert started["cwd"] == str(tmp_path)
    assert started["job"] == jobid
    warned = json.loads(Path(f"{record}.signal").read_text())
    assert warned["signal"] == signal.SIGUSR1
    # exec: metaq is the batch shell itself, not a child that the signal would miss.
    assert warned["pid"] == started["pid"]
    assert warned["after"] < 60


# --------------------------------------------------------------------------- the batch adapter

REPORT_ALLOCATION = f"""#!{sys.executable}
import json, sys, time
from metaq_py.batch import detect_batch
batch = detect_batch()
alloc = batch.allocation()
print(json.dumps({{
    "system": alloc.system, "machine": alloc.machine, "jobid": alloc.jobid,
    "nodes": list(alloc.nodes), "gpus": list(alloc.gpu_ids), "end": alloc.end_time,
    "alive_self": batch.is_alive(alloc.jobid), "alive_done": batch.is_alive(sys.argv[1]),
    "alive_unknown": batch.is_alive("999999"),
}}))
"""


def test_the_slurm_adapter_inside_a_real_job(slurm: SlurmCluster, tmp_path: Path) -> None:
    done = slurm.sbatch("-N", "1", "-t", "1", "-o", "/dev/null", "--wrap", "true", cwd=tmp_path)
    assert slurm.wait(done, timeout=60).state == "COMPLETED"
    out, err = tmp_path / "job.out", tmp_path / "job.err"
    script = executable(tmp_path / "report.py", REPORT_ALLOCATION)
    jobid = slurm.sbatch(
        "-N", "3", "-t", "7", "-o", out, "-e", err, script, done, cwd=tmp_path, env=JOB_ENV
    )  # fmt: skip
    fields = slurm.wait_started(jobid, timeout=60)
    end = slurm.wait(jobid, timeout=60)
    assert end.state == "COMPLETED", err.read_text()
    report = json.loads(out.read_text())
    assert report["system"] == "slurm"
    assert report["machine"] == "metaqtest"
    assert report["jobid"] == jobid
    assert report["nodes"] == ["n1", "n2", "n3"]
    assert report["gpus"] == []
    # The real end: SLURM's own start time + the 7-minute limit. (SLURM's EndTime is that
    # while the job runs, and the actual end once it has ended, which this poll may see.)
    assert report["end"] == datetime.fromisoformat(fields["StartTime"]).timestamp() + 7 * 60
    assert (report["alive_self"], report["alive_done"], report["alive_unknown"]) == (
        True,
        False,
        False,
    )


# --------------------------------------------------------------------------- launching

PLACEMENT_TASK = """#!/bin/bash
echo "script on ${SLURMD_NODENAME:-batch}"
echo "steps on $(srun --nodelist="$METAQ_NODELIST" printenv SLURMD_NODENAME | sort | xargs)"
"""

LAUNCH_BOTH_WAYS = f"""#!{sys.executable}
import json, sys
from pathlib import Path
from metaq_py.launch import LaunchSpec, launch
out = Path(sys.argv[1])
status = {{}}
for mode, nodes in (("direct", ("n3", "n4")), ("wrapped", ("n2", "n3"))):
    spec = LaunchSpec(script=out / "task.sh", task=mode, nodes=nodes, log=out / f"{{mode}}.log",
                      rundir=out / mode, srun_wrap=mode == "wrapped")
    status[mode] = str(launch(spec).wait(60))
print(json.dumps(status))
"""


def test_tasks_land_on_their_own_nodes_directly_and_wrapped(
    slurm: SlurmCluster, tmp_path: Path
) -> None:
    executable(tmp_path / "task.sh", PLACEMENT_TASK)
    driver = executable(tmp_path / "driver.py", LAUNCH_BOTH_WAYS)
    out, err = tmp_path / "job.out", tmp_path / "job.err"
    jobid = slurm.sbatch(
        "-N", "4", "-t", "2", "-o", out, "-e", err, driver, tmp_path, cwd=tmp_path, env=JOB_ENV
    )  # fmt: skip
    assert slurm.wait(jobid, timeout=90).state == "COMPLETED", err.read_text()
    assert json.loads(out.read_text()) == {"direct": "exit code 0", "wrapped": "exit code 0"}
    # Directly, the script runs on the batch node and a bare srun reaches exactly its nodes
    # (not all four, as the job's SLURM_NNODES would make it).
    assert task_lines(tmp_path / "direct.log") == ["script on n1", "steps on n3 n4"]
    # Wrapped, the script itself runs on its first node, and its steps still reach both.
    assert task_lines(tmp_path / "wrapped.log") == ["script on n2", "steps on n2 n3"]


STOPPABLE_TASK = """#!/bin/bash
# Records where it runs; on SIGTERM writes that down and exits, unless told to ignore it.
if [ "$METAQ_TASK" = stubborn ]; then trap '' TERM; else trap 'echo got TERM; exit 0' TERM; fi
sleep 3600 &
echo "$SLURMD_NODENAME $$ $!" > "$METAQ_CHECKPOINT_FILE"
wait
"""

STOP_WRAPPED = f"""#!{sys.executable}
import json, sys, time
from pathlib import Path
from metaq_py.launch import LaunchSpec, launch
out = Path(sys.argv[1])
result = {{}}
for name in ("obedient", "stubborn"):
    spec = LaunchSpec(script=out / "task.sh", task=name, nodes=("n3",), log=out / f"{{name}}.log",
                      rundir=out / name, srun_wrap=True)
    proc = launch(spec)
    deadline = time.time() + 30
    while not spec.checkpoint_file.exists() and time.time() < deadline:
        time.sleep(0.05)
    result[name] = str(proc.terminate(2.0))
print(json.dumps(result))
"""


def test_stopping_a_wrapped_task_reaches_its_node(slurm: SlurmCluster, tmp_path: Path) -> None:
    executable(tmp_path / "task.sh", STOPPABLE_TASK)
    driver = executable(tmp_path / "driver.py", STOP_WRAPPED)
    out, err = tmp_path / "job.out", tmp_path / "job.err"
    jobid = slurm.sbatch(
        "-N", "4", "-t", "2", "-o", out, "-e", err, driver, tmp_path, cwd=tmp_path, env=JOB_ENV
    )  # fmt: skip
    assert slurm.wait(jobid, timeout=90).state == "COMPLETED", err.read_text()
    result = json.loads(out.read_text())
    # SIGTERM reaches the script on n3 (through scancel, as srun would turn it into a kill),
    # and the script exits cleanly.
    assert result["obedient"] == "exit code 0"
    log = (tmp_path / "obedient.log").read_text()
    assert "got TERM" in log
    assert "forcing job termination" not in log
    # One that ignores it is killed with its step after the grace period.
    assert result["stubborn"] == "killed by SIGKILL"
    for name in ("obedient", "stubborn"):
        node, *pids = (tmp_path / name / "checkpoint").read_text().split()
        assert node == "n3"
        deadline = time.monotonic() + 15
        while any(alive(int(p)) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(alive(int(p)) for p in pids), f"{name}'s processes outlived its step"
