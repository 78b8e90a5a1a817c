"""A task's own cgroup, where the kernel lets the runner make one: stopping the task kills
every process it made, even one that left its session and cleared its environment, which the
sweep of metaq_py.launch.sweep cannot find."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from metaq_py.launch import launch
from metaq_py.launch.cgroup import cgroup_members, runner_cgroup
from metaq_py.launch.sweep import session_members
from tests.capability import cgroup_problem
from tests.launch.test_launch import all_dead, script, spec_for, wait_for_file

# Whether the machine gives this process a cgroup v2 folder it may write is read from the
# machine (tests/capability.py), never from runner_cgroup(): a runner that wrongly found none
# must fail these tests, not skip them. Without one, tasks are stopped by the session sweep.
pytestmark = pytest.mark.skipif(cgroup_problem() is not None, reason=str(cgroup_problem()))


@pytest.fixture(autouse=True)
def _the_runner_finds_it() -> None:
    assert runner_cgroup() is not None, "the machine allows a cgroup, the runner found none"

# A child that leaves the session *and* clears its environment, so it carries no mark: only
# the cgroup still knows it belongs to the task.
HIDES = f"""#!{sys.executable}
import os, subprocess
child = subprocess.Popen(["/usr/bin/env", "-i", "{sys.executable}", "-c",
                          "import os, time; os.setsid(); time.sleep(3600)"],
                         env={{}}, start_new_session=True)
with open(os.environ["METAQ_CHECKPOINT_FILE"], "w") as f:
    f.write(str(child.pid))
import time
time.sleep(3600)
"""


def _cgroup_of(pid: int) -> str:
    lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    return next(line[3:] for line in lines if line.startswith("0::"))


def test_stopping_a_task_kills_a_child_that_cleared_its_environment(tmp_path: Path) -> None:
    proc = launch(spec_for(tmp_path, script(tmp_path, "hide.py", HIDES)))
    spec = proc.spec
    child = int(wait_for_file(spec.checkpoint_file))
    try:
        assert proc.cgroup is not None and proc.cgroup.is_dir()
        assert _cgroup_of(child) == _cgroup_of(proc.pid)
        assert _cgroup_of(child).endswith(proc.cgroup.name)
        assert b"METAQ_TASK_MARK" not in Path(f"/proc/{child}/environ").read_bytes()
        proc.terminate(0.5)
        assert all_dead([child], timeout=5.0), "the hidden child outlived its task"
        assert not proc.cgroup.exists(), "the task's cgroup was not removed"
    finally:
        if os.path.exists(f"/proc/{child}"):
            all_dead([child], timeout=0.0)


def test_a_task_that_ends_by_itself_leaves_its_cgroup_empty_for_the_next(
        tmp_path: Path) -> None:
    proc = launch(spec_for(tmp_path, script(tmp_path, "ok.sh", "#!/bin/sh\ntrue\n")))
    status = proc.wait(10)
    assert status is not None and status.returncode == 0
    assert proc.cgroup is not None and cgroup_members(proc.cgroup) == []
    waits = launch(spec_for(tmp_path, script(tmp_path, "waits.sh", "#!/bin/sh\nexec sleep 60\n")))
    try:
        assert waits.cgroup == proc.cgroup  # kept, not made again
        assert cgroup_members(waits.cgroup) == [waits.pid]
        assert _cgroup_of(waits.pid).endswith(proc.cgroup.name)
    finally:
        waits.terminate(0.5)
    assert not waits.cgroup.exists()  # a stopped task's cgroup is removed, not kept


# A runner that starts a task, waits for it, prints the cgroup it had and exits.
RUNS_ONE = f"""
import sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
from pathlib import Path
from metaq_py.launch import launch
from tests.launch.test_launch import script, spec_for
tmp = Path(sys.argv[1])
proc = launch(spec_for(tmp, script(tmp, "one.sh", "#!/bin/sh\\ntrue\\n")))
assert proc.wait(10) is not None
print(proc.cgroup)
"""


def test_the_cgroups_kept_are_removed_when_the_runner_exits(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", RUNS_ONE, str(tmp_path)], capture_output=True,
                          text=True, timeout=60, check=True)
    kept = Path(done.stdout.strip())
    assert kept.name and kept.parent.name.startswith("metaq-")
    assert not kept.parent.exists(), "the runner's cgroups outlived it"


# Waits (forking nothing) until it is in its cgroup (moved there right after its start),
# then leaves one child in its session and one that left it (detached on purpose), and exits.
LEAVES = f"""#!{sys.executable}
import os, subprocess, time
while "/metaq-" not in open("/proc/self/cgroup").read():
    time.sleep(0.01)
stays = subprocess.Popen(["sleep", "3600"])
gone = subprocess.Popen(["sleep", "3600"], start_new_session=True)
with open(os.environ["METAQ_CHECKPOINT_FILE"], "w") as f:
    f.write(f"{{stays.pid}} {{gone.pid}}")
"""


def test_a_contained_task_is_swept_among_its_cgroup_alone(tmp_path: Path) -> None:
    proc = launch(spec_for(tmp_path, script(tmp_path, "leaves.sh", LEAVES)))
    status = proc.wait(10)
    assert status is not None and status.returncode == 0
    stays, detached = map(int, proc.spec.checkpoint_file.read_text().split())
    try:
        assert proc.contained  # no child yet when it was moved in: all it made is inside
        assert os.getsid(detached) == detached
        assert all_dead([stays], timeout=5.0), "the child left in its session outlived it"
        assert os.path.exists(f"/proc/{detached}"), "the detached child was killed too"
        assert proc.cgroup is not None
        assert _cgroup_of(detached).endswith(proc.cgroup.name)  # swept among its members
    finally:
        all_dead([detached], timeout=0.0)


def test_the_session_sweep_looks_only_among_the_pids_it_is_given() -> None:
    leader = subprocess.Popen(["/bin/sh", "-c", "sleep 3600 & wait"], start_new_session=True)
    try:
        deadline = time.monotonic() + 5
        while not session_members(leader.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        (child,) = session_members(leader.pid)
        assert session_members(leader.pid, among=[]) == []
        assert session_members(leader.pid, among=[child, leader.pid, os.getpid()]) == [child]
        mine = runner_cgroup()
        assert mine is not None and cgroup_members(mine) == []  # the runner's folder holds none
        assert cgroup_members(mine / "no-such-task") is None
    finally:
        os.killpg(leader.pid, 9)
        leader.wait()
