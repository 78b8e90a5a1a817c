"""Binding shares of a node to their cores: real processes read their own
``Cpus_allowed_list``; the CPU lists and masks are checked by hypothesis."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from metaq_py.launch import LaunchError, launch, task_command, task_environment
from metaq_py.launch.binding import cpu_mask, pin_tree, srun_binding
from metaq_py.launch.cgroup import runner_cgroup
from metaq_py.launch.command import gpu_variable
from metaq_py.ranges import cpu_list, machine_cpus, parse_cpu_list
from tests.capability import cgroup_problem
from tests.launch.test_launch import finished, script, spec_for
from tests.runner_helpers import wait_until

ALLOWED = f"""#!{sys.executable}
import os, sys
for line in open("/proc/self/status"):
    if line.startswith("Cpus_allowed_list:"):
        print(line.split(":", 1)[1].strip())
"""

CPUS = machine_cpus()
# How many CPUs this process may use is read from the kernel, not from machine_cpus() (the
# code under test): a machine_cpus() that found one CPU too few fails the test below.
needs_two = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2,
                               reason="this machine lets us use one CPU")


def test_the_cpus_this_process_may_use_are_the_machines_cpus() -> None:
    assert tuple(sorted(os.sched_getaffinity(0))) == CPUS


@given(st.sets(st.integers(0, 300), min_size=1))
def test_a_cpu_list_reads_back_as_the_same_cpus(cpus: set[int]) -> None:
    text = cpu_list(sorted(cpus))
    assert parse_cpu_list(text) == tuple(sorted(cpus))
    assert int(cpu_mask(sorted(cpus)), 16) == sum(1 << c for c in cpus)


@pytest.mark.parametrize("bad", ["", "a", "3-1", "1,,2", "-2", "0x3"])
def test_a_bad_cpu_list_is_one_sentence(bad: str) -> None:
    with pytest.raises(ValueError, match="in the CPU list"):
        parse_cpu_list(bad)


def test_the_kernel_list_form() -> None:
    assert parse_cpu_list("0-3,8,10-11") == (0, 1, 2, 3, 8, 10, 11)
    assert cpu_list((11, 0, 1, 2, 3, 8, 10)) == "0-3,8,10-11"
    assert cpu_mask((0, 2)) == "0x5" and srun_binding((4, 5)) == [
        "--cpus-per-task=2", "--cpu-bind=mask_cpu:0x30"]


FORKS = """
import os, sys, threading, time
threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
if os.fork() == 0:  # a child forked before the pin
    time.sleep(60)
    os._exit(0)
print("ready", flush=True)
sys.stdin.readline()  # pinned now
late = os.fork()
if late == 0:  # a child forked after it
    time.sleep(60)
    os._exit(0)
print(late, flush=True)
time.sleep(60)
"""


def _allowed(pid: int, tid: int | None = None) -> tuple[int, ...]:
    where = f"/proc/{pid}" if tid is None else f"/proc/{pid}/task/{tid}"
    for line in Path(where, "status").read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return parse_cpu_list(line.split(":", 1)[1])
    raise AssertionError(f"no Cpus_allowed_list for {where}")


@needs_two
def test_pinning_a_started_process_pins_its_threads_and_what_it_started() -> None:
    proc = subprocess.Popen([sys.executable, "-c", FORKS], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        assert proc.stdout.readline() == "ready\n"
        threads = [int(t) for t in os.listdir(f"/proc/{proc.pid}/task")]
        early = [int(c) for t in threads
                 for c in Path(f"/proc/{proc.pid}/task/{t}/children").read_text().split()]
        assert len(threads) == 2 and len(early) == 1
        assert _allowed(proc.pid) == CPUS and _allowed(early[0]) == CPUS  # not pinned yet
        assert pin_tree(proc.pid, [CPUS[1]]) is False  # it had a child: not alone
        proc.stdin.write("\n")
        proc.stdin.flush()
        late = int(proc.stdout.readline())
        assert [_allowed(proc.pid, t) for t in threads] == [(CPUS[1],)] * 2
        assert _allowed(early[0]) == (CPUS[1],)  # forked before the pin: pinned by it
        assert _allowed(late) == (CPUS[1],)  # forked after: inherits it
        assert os.sched_getaffinity(0) == set(CPUS)  # the caller is never moved
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()


def test_pinning_a_process_that_is_gone_does_nothing() -> None:
    proc = subprocess.Popen(["true"])
    proc.wait()
    # No such process any more: nothing to pin, no error, and nothing it can tell.
    assert pin_tree(proc.pid, [CPUS[0]]) is False


def test_pinning_says_whether_the_process_had_no_child_yet() -> None:
    lone = subprocess.Popen(["sleep", "60"])
    parent = subprocess.Popen(["/bin/sh", "-c", "sleep 60 & wait"], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while not Path(f"/proc/{parent.pid}/task/{parent.pid}/children").read_text().split():
            assert time.monotonic() < deadline, "the shell never started its child"
            time.sleep(0.01)
        assert pin_tree(lone.pid, [CPUS[0]]) is True
        assert pin_tree(parent.pid, [CPUS[0]]) is False
    finally:
        lone.kill()
        os.killpg(parent.pid, 9)
        lone.wait()
        parent.wait()


@needs_two
def test_two_bound_shares_run_on_their_own_cores(tmp_path: Path) -> None:
    """Pinned by the time their start returns, and so is all they run from then on. (The
    pin follows the spawn: the script's own first instructions may run before it, on a
    loaded node; see docs/model.md, "A bound share is pinned after its start".)"""
    go = tmp_path / "go"
    path = script(tmp_path, "allowed.py", ALLOWED.replace(
        "import os, sys\n", f"import os, sys, time\nwhile not os.path.exists({str(go)!r}):\n"
                            f"    time.sleep(0.01)\n"))
    procs = [launch(spec_for(tmp_path, path, task=f"todo/s{c}", nodes=("n1",), cores=(c,),
                             bind=True, log=tmp_path / f"s{c}.log",
                             rundir=tmp_path / f"run{c}"))
             for c in (0, 1)]
    try:
        assert [_allowed(proc.pid) for proc in procs] == [(CPUS[0],), (CPUS[1],)]
    finally:
        go.touch()
    if cgroup_problem() is None:  # read from the machine, not from the code under test
        assert runner_cgroup() is not None
        # Moved in, then pinned with no child yet: everything they make is born inside.
        assert all(proc.contained for proc in procs)
    seen = []
    for c, proc in zip((0, 1), procs, strict=True):
        assert finished(proc).ok
        seen.append(parse_cpu_list((tmp_path / f"s{c}.log").read_text()))
    assert seen == [(CPUS[0],), (CPUS[1],)]


def test_an_unbound_share_keeps_the_runners_cpus(tmp_path: Path) -> None:
    path = script(tmp_path, "allowed.py", ALLOWED)
    proc = launch(spec_for(tmp_path, path, nodes=("n1",), cores=(0,)))
    assert finished(proc).ok
    assert parse_cpu_list(proc.log.read_text()) == CPUS


def test_binding_to_cores_this_machine_lacks_is_refused(tmp_path: Path) -> None:
    path = script(tmp_path, "allowed.py", ALLOWED)
    with pytest.raises(LaunchError, match="this machine lets it use"):
        launch(spec_for(tmp_path, path, nodes=("n1",), cores=(len(CPUS) + 3,), bind=True))
    with pytest.raises(LaunchError, match="bound to its cores but was given none"):
        spec_for(tmp_path, path, bind=True)


def test_a_wrapped_share_asks_srun_for_its_cores(tmp_path: Path) -> None:
    path = script(tmp_path, "t.sh", "#!/bin/bash\n")
    spec = spec_for(tmp_path, path, nodes=("n2",), cores=(2, 3), srun_wrap=True)
    command = task_command(spec)
    assert command[command.index("--overlap") + 2:][:2] == [
        "--cpus-per-task=2", "--cpu-bind=mask_cpu:0xc"]
    env = task_environment(spec, {})
    assert (env["METAQ_CPUS"], env["METAQ_NCPUS"], env["METAQ_CPU_MASK"]) == ("2,3", "2", "0xc")


@needs_two
def test_the_step_entry_point_binds_a_share_where_slurm_did_not(tmp_path: Path) -> None:
    path = script(tmp_path, "allowed.py", ALLOWED)
    env = {**os.environ, "METAQ_NNODES": "1", "METAQ_CPUS": "1", "METAQ_TASK": "todo/a"}
    done = subprocess.run([sys.executable, "-m", "metaq_py.launch", str(tmp_path / "step"),
                           str(path)], env=env, capture_output=True, text=True, check=True)
    assert done.stderr == ""
    assert parse_cpu_list(done.stdout) == (CPUS[1],)
    env["METAQ_CPUS"] = str(len(CPUS) + 5)
    done = subprocess.run([sys.executable, "-m", "metaq_py.launch", str(tmp_path / "step"),
                           str(path)], env=env, capture_output=True, text=True, check=True)
    assert "the share todo/a is not bound" in done.stderr
    assert parse_cpu_list(done.stdout) == CPUS


def test_the_gpu_variable_fits_the_vendor() -> None:
    assert gpu_variable({}) == "CUDA_VISIBLE_DEVICES"
    assert gpu_variable({"ROCR_VISIBLE_DEVICES": "0,1"}) == "ROCR_VISIBLE_DEVICES"
    assert gpu_variable({"ZE_AFFINITY_MASK": "0"}) == "ZE_AFFINITY_MASK"


def test_json_of_the_environment_has_one_gpu_variable(tmp_path: Path) -> None:
    path = script(tmp_path, "t.sh", "#!/bin/bash\n")
    env = task_environment(spec_for(tmp_path, path, nodes=("n1",), gpus=("1",), cores=(0,)),
                           {"ZE_AFFINITY_MASK": "0,1"})
    assert env["ZE_AFFINITY_MASK"] == "1" and "CUDA_VISIBLE_DEVICES" not in env
    assert json.loads(json.dumps(env))["METAQ_CPU_MASK"] == "0x1"


SPAWNS_THREADS = """
import threading, time
while True:  # a new thread as fast as it can, each living a while
    threading.Thread(target=time.sleep, args=(5,), daemon=True).start()
"""


@needs_two
def test_a_script_making_threads_as_fast_as_it_can_is_pinned_and_let_go() -> None:
    # (the walk is bounded by PIN_MOST as well; on this machine the listing keeps up anyway)
    proc = subprocess.Popen([sys.executable, "-c", SPAWNS_THREADS], start_new_session=True)
    try:
        # well under way: many threads made already (each lives 5 s)
        assert wait_until(lambda: len(os.listdir(f"/proc/{proc.pid}/task")) > 50, 30)
        pinning = threading.Thread(target=pin_tree, args=(proc.pid, [CPUS[1]]), daemon=True)
        began = time.monotonic()
        pinning.start()
        pinning.join(timeout=30)
        assert not pinning.is_alive(), "pin_tree never returned"
        assert time.monotonic() - began < 30
        assert _allowed(proc.pid) == (CPUS[1],)
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()
