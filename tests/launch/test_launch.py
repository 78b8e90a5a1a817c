"""Launching real task processes: environment, hostfile, logs, exits, signals, stray children.

Every test starts real scripts and checks what they saw and what they left behind. Launching
under ``srun`` for real is in ``test_slurm_cluster.py``.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from metaq_py.launch import (
    ExitStatus,
    LaunchError,
    LaunchSpec,
    TaskProcess,
    launch,
    task_command,
    terminate_all,
)
from metaq_py.launch import tee as tee_module

DUMP_ENV = f"""#!{sys.executable}
import json, os
print(json.dumps(dict(os.environ)))
"""


def script(directory: Path, name: str, body: str) -> Path:
    """An executable task script in ``directory``."""
    path = directory / name
    path.write_text(body)
    path.chmod(0o755)
    return path


def spec_for(tmp_path: Path, path: Path, **kwargs: object) -> LaunchSpec:
    defaults: dict[str, object] = {
        "script": path,
        "task": f"todo/{path.name}",
        "nodes": ("n1", "n2"),
        "log": tmp_path / "logs" / f"{path.name}.log",
        "rundir": tmp_path / "runs" / path.name,
    }
    defaults.update(kwargs)
    return LaunchSpec(**defaults)  # type: ignore[arg-type]


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie nobody reaped counts as dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] != b"Z"


def all_dead(pids: list[int], timeout: float = 5.0) -> bool:
    """Whether every one of ``pids`` is gone within ``timeout``; kills survivors either way,
    so that a failing test leaves nothing running."""
    deadline = time.monotonic() + timeout
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    survivors = [p for p in pids if alive(p)]
    for pid in survivors:
        os.kill(pid, signal.SIGKILL)
    return not survivors


def wait_for_file(path: Path, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text()
        time.sleep(0.02)
    raise AssertionError(f"{path} did not appear within {timeout:g} s")


def finished(proc: TaskProcess, timeout: float = 20.0) -> ExitStatus:
    status = proc.wait(timeout)
    assert status is not None, f"{proc} still running after {timeout:g} s"
    return status


# --------------------------------------------------------------------------- environment


def test_the_task_sees_its_nodes_gpus_and_identity(tmp_path: Path) -> None:
    path = script(tmp_path, "dump.py", DUMP_ENV)
    spec = spec_for(
        tmp_path,
        path,
        task="todo/physics/dump.py",
        nodes=("nid001", "nid007", "nid003"),
        gpus=("2", "3"),
        attempt=3,
        resume=True,
        env={"PROJECT_SETTING": "x y", "METAQ_TASK": "an attempt to override"},
    )
    base = {"PATH": os.environ["PATH"], "CUDA_VISIBLE_DEVICES": "0,1,2,3", "HOME": "/home/u"}
    status = finished(launch(spec, base_env=base))
    assert status.ok
    env = json.loads(spec.log.read_text())
    assert env["METAQ_TASK"] == "todo/physics/dump.py"
    assert env["METAQ_NODELIST"] == "nid001,nid007,nid003"
    assert env["METAQ_NNODES"] == "3"
    assert env["METAQ_ATTEMPT"] == "3"
    assert env["METAQ_RESUME"] == "1"
    assert env["CUDA_VISIBLE_DEVICES"] == "2,3"
    assert env["METAQ_HOSTFILE"] == str(spec.hostfile.resolve())
    assert env["METAQ_CHECKPOINT_FILE"] == str(spec.checkpoint_file.resolve())
    assert env["METAQ_RESIZE_FILE"] == str(spec.resize_file.resolve())
    assert env["METAQ_LOG"] == str(spec.log.resolve())
    assert env["PROJECT_SETTING"] == "x y"
    assert env["HOME"] == "/home/u"
    assert spec.hostfile.read_text() == "nid001\nnid007\nnid003\n"


def test_a_shared_hostfile_is_named_and_left_alone(tmp_path: Path) -> None:
    path = script(tmp_path, "dump.py", DUMP_ENV)
    shared = tmp_path / "hostfiles" / "n1-n2"
    shared.parent.mkdir()
    shared.write_text("n1\nn2\n")
    spec = spec_for(tmp_path, path, shared_hostfile=shared)
    assert finished(launch(spec)).ok
    env = json.loads(spec.log.read_text())
    assert env["METAQ_HOSTFILE"] == str(shared.resolve()) == str(spec.hostfile.resolve())
    assert not (spec.rundir / "hostfile").exists()  # nothing written for this task
    assert spec.rundir.is_dir()  # its run folder is still its own


@pytest.mark.parametrize(
    ("gpus", "expected"),
    [(None, "0,1,2,3"), ((), ""), (("1",), "1")],
)
def test_gpus_none_keeps_the_batch_setting_and_a_tuple_sets_it(
    tmp_path: Path, gpus: tuple[str, ...] | None, expected: str
) -> None:
    path = script(tmp_path, "dump.py", DUMP_ENV)
    spec = spec_for(tmp_path, path, gpus=gpus)
    base = {"PATH": os.environ["PATH"], "CUDA_VISIBLE_DEVICES": "0,1,2,3"}
    finished(launch(spec, base_env=base))
    assert json.loads(spec.log.read_text())["CUDA_VISIBLE_DEVICES"] == expected


def test_inside_slurm_srun_counts_describe_the_task_not_the_job(tmp_path: Path) -> None:
    path = script(tmp_path, "dump.py", DUMP_ENV)
    spec = spec_for(tmp_path, path, nodes=("n3", "n4"))
    base = {
        "PATH": os.environ["PATH"],
        "SLURM_JOB_ID": "77",
        "SLURM_NNODES": "4",
        "SLURM_JOB_NUM_NODES": "4",
        "SLURM_NTASKS": "8",
        "SLURM_NPROCS": "8",
        "SLURM_NTASKS_PER_NODE": "2",
        "SLURM_JOB_NODELIST": "n[1-4]",
    }
    finished(launch(spec, base_env=base))
    env = json.loads(spec.log.read_text())
    assert env["SLURM_NNODES"] == env["SLURM_JOB_NUM_NODES"] == "2"
    assert "SLURM_NTASKS" not in env and "SLURM_NPROCS" not in env
    # What the user asked per node, and the job's identity, stay.
    assert env["SLURM_NTASKS_PER_NODE"] == "2"
    assert env["SLURM_JOB_NODELIST"] == "n[1-4]"


def test_outside_slurm_slurm_variables_are_left_alone(tmp_path: Path) -> None:
    path = script(tmp_path, "dump.py", DUMP_ENV)
    spec = spec_for(tmp_path, path)
    finished(launch(spec, base_env={"PATH": os.environ["PATH"], "SLURM_NTASKS": "8"}))
    assert json.loads(spec.log.read_text())["SLURM_NTASKS"] == "8"


def test_task_starts_in_the_runners_directory_with_no_stdin(tmp_path: Path) -> None:
    path = script(tmp_path, "where.sh", "#!/bin/bash\npwd\ncat\necho done\n")
    spec = spec_for(tmp_path, path)
    assert finished(launch(spec)).ok
    assert spec.log.read_text() == f"{os.getcwd()}\ndone\n"


def test_the_wrapped_command_line(tmp_path: Path) -> None:
    path = script(tmp_path, "t.sh", "#!/bin/bash\n")
    spec = spec_for(
        tmp_path, path, nodes=("n2", "n3"), srun_wrap=True, srun_args=("--mem-per-cpu=1G",)
    )
    assert task_command(spec, srun="/opt/slurm/bin/srun") == [
        "/opt/slurm/bin/srun",
        "--nodelist=n2",
        "--nodes=1",
        "--ntasks=1",
        "--exact",
        "--overlap",
        "--job-name=todo/t.sh",
        "--mem-per-cpu=1G",
        sys.executable,
        "-m",
        "metaq_py.launch",
        str(spec.step_file.resolve()),
        str(path.resolve()),
    ]
    assert task_command(replace(spec, srun_wrap=False)) == [str(path.resolve())]


def test_the_step_entry_point_fixes_srun_counts_then_becomes_the_script(tmp_path: Path) -> None:
    # What `python -m metaq_py.launch SCRIPT` does inside a one-task, one-node step.
    path = script(tmp_path, "dump.py", DUMP_ENV)
    step_env = {
        **os.environ,
        "METAQ_NNODES": "3",
        "SLURM_NNODES": "1",
        "SLURM_JOB_NUM_NODES": "4",
        "SLURM_NTASKS": "1",
        "SLURM_NPROCS": "1",
        "SLURM_STEP_ID": "0",
    }
    step_env["SLURM_JOB_ID"] = "77"
    step_file = tmp_path / "step"
    done = subprocess.run(
        [sys.executable, "-m", "metaq_py.launch", str(step_file), str(path)],
        env=step_env, capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    assert done.stderr == ""
    assert step_file.read_text() == "77.0\n"
    env = json.loads(done.stdout)
    assert env["SLURM_NNODES"] == env["SLURM_JOB_NUM_NODES"] == "3"
    assert "SLURM_NTASKS" not in env and "SLURM_NPROCS" not in env
    assert env["SLURM_STEP_ID"] == "0"


def test_the_step_entry_point_says_what_failed(tmp_path: Path) -> None:
    missing = tmp_path / "gone.sh"
    env = {**os.environ, "METAQ_NNODES": "1", "SLURMD_NODENAME": "n7"}
    done = subprocess.run(
        [sys.executable, "-m", "metaq_py.launch", str(tmp_path / "step"), str(missing)],
        env=env, capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 127
    assert done.stderr == f"metaq: cannot run {missing} on n7: No such file or directory\n"


# --------------------------------------------------------------------------- output


def test_output_goes_to_the_log_and_the_log_directive_alike(tmp_path: Path) -> None:
    path = script(
        tmp_path,
        "chatty.sh",
        "#!/bin/bash\nfor i in 1 2 3; do echo out $i; echo err $i >&2; done\n",
    )
    tee = tmp_path / "user.log"
    spec = spec_for(tmp_path, path, tee=tee)
    proc = launch(spec)
    assert finished(proc).ok
    text = spec.log.read_text()
    assert text == "out 1\nerr 1\nout 2\nerr 2\nout 3\nerr 3\n"
    assert tee.read_text() == text
    assert proc.output_errors == ()
    # A resumed attempt adds to both files rather than wiping the first attempt's output.
    assert finished(launch(replace(spec, attempt=2))).ok
    assert spec.log.read_text() == text * 2
    assert tee.read_text() == text * 2


def test_a_lot_of_output_arrives_whole_in_both_files(tmp_path: Path) -> None:
    size = 128 * 1024 * 1024
    path = script(tmp_path, "flood.sh", f"#!/bin/bash\nhead -c {size} /dev/urandom\necho end\n")
    tee = tmp_path / "user.log"
    spec = spec_for(tmp_path, path, tee=tee)
    started = time.monotonic()
    assert finished(launch(spec), timeout=60).ok
    elapsed = time.monotonic() - started
    assert spec.log.stat().st_size == tee.stat().st_size == size + 4
    with spec.log.open("rb") as a, tee.open("rb") as b:
        while chunk := a.read(1 << 22):
            assert chunk == b.read(1 << 22)
    assert elapsed < 30, f"copying {size >> 20} MiB took {elapsed:.1f} s"


def test_a_full_disk_under_the_log_directive_does_not_block_the_task(tmp_path: Path) -> None:
    # /dev/full fails every write with ENOSPC, like a file system that has filled up.
    path = script(tmp_path, "writer.sh", "#!/bin/bash\nhead -c 5000000 /dev/zero\necho fine\n")
    spec = spec_for(tmp_path, path, tee=Path("/dev/full"))
    proc = launch(spec)
    assert finished(proc).ok
    assert spec.log.stat().st_size == 5_000_000 + 5
    assert proc.output_errors == (
        "writing the output to /dev/full failed: No space left on device",
    )


# --------------------------------------------------------------------------- exits


def test_a_non_zero_exit_is_reported(tmp_path: Path) -> None:
    proc = launch(spec_for(tmp_path, script(tmp_path, "fail.sh", "#!/bin/bash\nexit 3\n")))
    status = finished(proc)
    assert (status.returncode, status.exit_code, status.signal, status.ok) == (3, 3, None, False)
    assert str(status) == "exit code 3"
    assert proc.returncode == 3
    assert proc.ended_at is not None and proc.ended_at >= proc.started_at


def test_death_by_signal_is_reported(tmp_path: Path) -> None:
    body = f"#!{sys.executable}\nimport os, signal\nos.kill(os.getpid(), signal.SIGUSR2)\n"
    status = finished(launch(spec_for(tmp_path, script(tmp_path, "die.py", body))))
    assert status.returncode == -signal.SIGUSR2
    assert status.exit_code is None
    assert status.signal is signal.SIGUSR2
    assert str(status) == "killed by SIGUSR2"


def test_exits_reach_an_event_queue_once_each_and_promptly(tmp_path: Path) -> None:
    """Each exit arrives once, when it happens: the tasks are let go one at a time, last
    started first, and each exit is the next event."""
    events: queue.Queue[TaskProcess] = queue.Queue()
    procs = [
        launch(
            spec_for(tmp_path, script(tmp_path, f"t{i}.sh", f"#!/bin/bash\n"
                                      f"while [ ! -e {tmp_path}/go{i} ]; do sleep 0.01; done\n")),
            on_exit=events.put,
        )
        for i in range(4)
    ]
    seen = []
    for proc in reversed(procs):
        assert events.empty()  # nothing ends before it is let go
        (tmp_path / f"go{procs.index(proc)}").touch()
        ended = events.get(timeout=30)
        # When the event arrives the task is completely over.
        assert ended.status is not None and ended.status.ok
        seen.append(ended)
    assert [p.spec.task for p in seen] == [p.spec.task for p in reversed(procs)]
    assert events.empty()
    assert sorted(p.pid for p in seen) == sorted(p.pid for p in procs)


def test_a_failing_exit_callback_does_not_lose_the_status(tmp_path: Path) -> None:
    def broken(_: TaskProcess) -> None:
        raise RuntimeError("callback bug")

    proc = launch(spec_for(tmp_path, script(tmp_path, "ok.sh", "#!/bin/bash\n")), on_exit=broken)
    assert finished(proc).ok


# --------------------------------------------------------------------------- signals


def test_a_signal_reaches_the_script_and_is_recorded(tmp_path: Path) -> None:
    body = (
        "#!/bin/bash\n"
        "trap 'echo got USR1; exit 0' USR1\n"
        'echo ready > "$METAQ_CHECKPOINT_FILE"\n'
        "while :; do sleep 0.05; done\n"
    )
    spec = spec_for(tmp_path, script(tmp_path, "trap.sh", body))
    proc = launch(spec)
    wait_for_file(spec.checkpoint_file)
    assert proc.send_signal(signal.SIGUSR1)
    assert finished(proc).ok
    assert "got USR1" in spec.log.read_text()
    assert proc.sent_signals == [signal.SIGUSR1]
    assert proc.send_signal(signal.SIGUSR1) is False
    assert proc.kill() is False


STUBBORN = f"""#!{sys.executable}
# Ignores SIGTERM, forks a grandchild that ignores it too, and records both pids.
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = os.fork()
if child == 0:
    time.sleep(3600)
    os._exit(0)
with open(os.environ["METAQ_CHECKPOINT_FILE"], "w") as f:
    f.write(f"{{os.getpid()}} {{child}}")
time.sleep(3600)
"""


def test_terminate_kills_the_whole_group_after_the_grace(tmp_path: Path) -> None:
    spec = spec_for(tmp_path, script(tmp_path, "stubborn.py", STUBBORN))
    proc = launch(spec)
    pids = [int(p) for p in wait_for_file(spec.checkpoint_file).split()]
    assert all(alive(p) for p in pids)
    started = time.monotonic()
    status = proc.terminate(0.5)
    elapsed = time.monotonic() - started
    assert status.signal is signal.SIGKILL
    assert 0.5 <= elapsed < 5
    assert proc.sent_signals == [signal.SIGTERM, signal.SIGKILL]
    assert all_dead(pids), "a process of the task outlived it"


def test_terminate_returns_at_once_when_the_task_obeys(tmp_path: Path) -> None:
    body = "#!/bin/bash\ntrap 'exit 0' TERM\ntouch \"$METAQ_CHECKPOINT_FILE\"\nsleep 3600 & wait\n"
    spec = spec_for(tmp_path, script(tmp_path, "obey.sh", body))
    proc = launch(spec)
    deadline = time.monotonic() + 10
    while not spec.checkpoint_file.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    started = time.monotonic()
    assert proc.terminate(30).ok
    assert time.monotonic() - started < 5


def test_terminate_all_shares_one_grace_period(tmp_path: Path) -> None:
    specs = [spec_for(tmp_path, script(tmp_path, f"s{i}.py", STUBBORN)) for i in range(3)]
    procs = [launch(s) for s in specs]
    for s in specs:
        wait_for_file(s.checkpoint_file)
    started = time.monotonic()
    terminate_all(procs, grace=0.6)
    elapsed = time.monotonic() - started
    assert all(p.status is not None and p.status.signal is signal.SIGKILL for p in procs)
    assert elapsed < 0.6 * 3, f"grace periods ran one after another ({elapsed:.1f} s)"


LEAVES_CHILDREN = f"""#!{sys.executable}
# Exits at once, leaving behind one child in its process group and one that left the group.
import os, time
pids = []
for leave_group in (False, True):
    child = os.fork()
    if child == 0:
        if leave_group:
            os.setpgid(0, 0)
        time.sleep(3600)
        os._exit(0)
    pids.append(child)
with open(os.environ["METAQ_CHECKPOINT_FILE"], "w") as f:
    f.write(" ".join(map(str, pids)))
print("leaving")
"""


def test_processes_left_behind_die_with_the_task(tmp_path: Path) -> None:
    spec = spec_for(tmp_path, script(tmp_path, "leaves.py", LEAVES_CHILDREN), tee=tmp_path / "u")
    proc = launch(spec)
    status = finished(proc, timeout=10)
    assert status.ok
    pids = [int(p) for p in spec.checkpoint_file.read_text().split()]
    assert all_dead(pids), "a process the task left behind is still running"
    assert spec.log.read_text() == "leaving\n"


ESCAPES = f"""#!{sys.executable}
# A child leaves the task's session altogether and keeps the output pipe open.
import os, time
child = os.fork()
if child == 0:
    os.setsid()
    time.sleep(3600)
    os._exit(0)
with open(os.environ["METAQ_CHECKPOINT_FILE"], "w") as f:
    f.write(str(child))
print("parent done", flush=True)
"""


def test_an_escaped_process_cannot_hold_up_the_end_of_a_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tee_module, "DRAIN_SECONDS", 0.3)
    spec = spec_for(tmp_path, script(tmp_path, "escape.py", ESCAPES), tee=tmp_path / "u")
    proc = launch(spec)
    try:
        started = time.monotonic()
        assert finished(proc, timeout=10).ok
        assert time.monotonic() - started < 5
        assert spec.log.read_text() == "parent done\n"
        assert len(proc.output_errors) == 1
        assert "outside the task's session" in proc.output_errors[0]
    finally:
        escaped = int(wait_for_file(spec.checkpoint_file))
        os.kill(escaped, signal.SIGKILL)


# --------------------------------------------------------------------------- bad input


def test_scripts_that_cannot_start_are_one_clear_sentence(tmp_path: Path) -> None:
    plain = tmp_path / "plain.sh"
    plain.write_text("#!/bin/bash\n")
    no_shebang = script(tmp_path, "noshebang.sh", "echo hi\n")
    cases = [
        (spec_for(tmp_path, tmp_path / "missing.sh"), "missing.sh does not exist"),
        (spec_for(tmp_path, plain), "is not executable (chmod +x it)"),
        (spec_for(tmp_path, tmp_path), "is not a regular file"),
        (spec_for(tmp_path, no_shebang), "has no #! line"),
        (
            spec_for(tmp_path, no_shebang, tee=tmp_path / "nowhere" / "x.log"),
            "directory of its LOG file",
        ),
    ]
    for spec, needle in cases:
        with pytest.raises(LaunchError) as err:
            launch(spec)
        text = str(err.value)
        assert needle in text and "\n" not in text, text
        assert spec.task in text


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"nodes": ()}, "was given no nodes"),
        ({"nodes": ("n1", "n1")}, "same node twice"),
        ({"nodes": ("n1,n2",)}, "'n1,n2', which is not a host"),
        ({"gpus": ("0,1",)}, "GPU id '0,1'"),
        ({"attempt": 0}, "attempts count from 1"),
        ({"task": ""}, "empty task id"),
        ({"env": {"A=B": "1"}}, "environment variable 'A=B'"),
    ],
)
def test_bad_specs_are_refused(tmp_path: Path, kwargs: dict, needle: str) -> None:
    with pytest.raises(LaunchError) as err:
        spec_for(tmp_path, tmp_path / "t.sh", **kwargs)
    assert needle in str(err.value)


def test_a_failed_start_leaves_no_open_files(tmp_path: Path) -> None:
    no_shebang = script(tmp_path, "noshebang.sh", "echo hi\n")
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        with pytest.raises(LaunchError):
            launch(spec_for(tmp_path, no_shebang, tee=tmp_path / "u.log"))
    assert len(os.listdir("/proc/self/fd")) == before


def test_a_share_sees_its_cores_and_its_gpus_under_the_nodes_variable(
        tmp_path: Path) -> None:
    path = script(tmp_path, "dump.py", DUMP_ENV)
    spec = spec_for(tmp_path, path, gpus=("2",), cores=(4, 5), nodes=("n1",))
    finished(launch(spec, base_env={"PATH": os.environ["PATH"], "CUDA_VISIBLE_DEVICES": "0,1"}))
    env = json.loads(spec.log.read_text())
    assert (env["CUDA_VISIBLE_DEVICES"], env["METAQ_CPUS"], env["METAQ_NCPUS"]) == \
        ("2", "4,5", "2")
    amd = spec_for(tmp_path, path, gpus=("3",), cores=(0,), nodes=("n1",),
                   log=tmp_path / "amd.log")
    finished(launch(amd, base_env={"PATH": os.environ["PATH"], "ROCR_VISIBLE_DEVICES": "0,1"}))
    env = json.loads(amd.log.read_text())
    assert env["ROCR_VISIBLE_DEVICES"] == "3" and "CUDA_VISIBLE_DEVICES" not in env, \
        "AMD nodes: one variable only, or HIP applies the ids twice"


def test_whole_node_tasks_get_no_cores_variable(tmp_path: Path) -> None:
    path = script(tmp_path, "dump.py", DUMP_ENV)
    spec = spec_for(tmp_path, path)
    finished(launch(spec, base_env={"PATH": os.environ["PATH"]}))
    assert "METAQ_CPUS" not in json.loads(spec.log.read_text())


@pytest.mark.parametrize("cores", [(), (-1,), (True,), (0, 1, "two")])
def test_bad_cores_are_refused(tmp_path: Path, cores: tuple) -> None:
    with pytest.raises(LaunchError, match="core ids of 0 or more"):
        spec_for(tmp_path, tmp_path / "x", cores=cores, nodes=("n1",))
    with pytest.raises(LaunchError, match="needs one node"):
        spec_for(tmp_path, tmp_path / "x", cores=(0,))
