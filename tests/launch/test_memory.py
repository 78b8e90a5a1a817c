"""A task's ``MEM``: held by its cgroup's ``memory.max`` where the machine gives the runner the
memory controller, and an OOM kill told apart from any other end, with the peak memory.

Real processes that allocate: a small Python loop that fills 1 MiB pieces (``b"x" * n``
touches every page, so the resident set grows), up to a bound so that a machine without a
limit never runs short. Which tests run is read from the machine (tests/capability.py), never
from metaq_py.launch.cgroup: with the memory controller the cgroup decides, without it the
fallback does (a SIGKILL the runner did not send, with the peak at MEM)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from metaq_py.launch import launch
from metaq_py.launch.cgroup import memory_problem
from metaq_py.launch.memory import out_of_memory
from metaq_py.launch.usage import peak_rss_self
from tests.capability import memory_cgroup_problem
from tests.launch.test_launch import finished, script, spec_for, wait_for_file

MIB = 1 << 20

# Fills ``upto`` MiB, one piece at a time, then ends as ``then`` says: "exit" (0), or "kill"
# (its own SIGKILL, what the node's OOM killer sends: the fallback's case).
HOG = f"""#!{sys.executable}
import os, signal, sys
upto, then = int(sys.argv[1]) if len(sys.argv) > 1 else {{upto}}, "{{then}}"
pieces = []
for _ in range(upto):
    pieces.append(b"x" * (1 << 20))
if then == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
"""

_NO_MEMORY = memory_cgroup_problem()


def _hog(tmp_path: Path, name: str, upto: int, then: str) -> Path:
    return script(tmp_path, name, HOG.format(upto=upto, then=then))


def test_the_runner_sees_the_memory_controller_as_the_machine_gives_it() -> None:
    assert (memory_problem() is None) == (_NO_MEMORY is None), (memory_problem(), _NO_MEMORY)


@pytest.mark.skipif(_NO_MEMORY is not None, reason=str(_NO_MEMORY))
def test_a_task_past_its_mem_is_killed_by_its_cgroup_as_oom(tmp_path: Path) -> None:
    mem = 64 * MIB
    proc = launch(spec_for(tmp_path, _hog(tmp_path, "hog.py", 512, "exit"), mem=mem))
    status = finished(proc, 60.0)
    assert status.oom and status.returncode == -signal.SIGKILL, status
    assert "OOM killer" in str(status)
    used = status.usage
    assert used is not None and used.memory_peak_bytes is not None
    assert mem // 2 <= used.memory_peak_bytes <= mem, used
    assert proc.limited and proc.cgroup is not None and not proc.cgroup.exists(), \
        "a cgroup held to a MEM is the task's own, removed after it"


@pytest.mark.skipif(_NO_MEMORY is not None, reason=str(_NO_MEMORY))
def test_a_task_within_its_mem_finishes_with_its_peak(tmp_path: Path) -> None:
    proc = launch(spec_for(tmp_path, _hog(tmp_path, "fits.py", 16, "exit"), mem=256 * MIB))
    status = finished(proc, 60.0)
    assert status.ok and not status.oom
    used = status.usage
    assert used is not None and used.memory_peak_bytes is not None
    assert 16 * MIB <= used.memory_peak_bytes <= 256 * MIB


@pytest.mark.skipif(_NO_MEMORY is None, reason="the memory controller is given here: its "
                                               "cgroup decides, as the tests above check")
def test_without_the_memory_controller_a_sigkill_at_mem_is_oom(tmp_path: Path) -> None:
    mem = 64 * MIB
    # Past its MEM and past the runner's own peak (this process's), which a script's peak
    # starts from at its exec: only a peak above that is the task's own.
    upto = peak_rss_self() // MIB + 96
    proc = launch(spec_for(tmp_path, _hog(tmp_path, "hog.py", upto, "kill"), mem=mem))
    status = finished(proc, 60.0)
    assert status.returncode == -signal.SIGKILL and status.oom, status
    used = status.usage
    assert used is not None and used.max_rss_bytes is not None and used.max_rss_bytes >= mem
    assert used.memory_peak_bytes is None and not proc.limited


@pytest.mark.skipif(_NO_MEMORY is None, reason="the memory controller is given here: its "
                                               "cgroup decides")
def test_without_the_memory_controller_a_sigkill_below_mem_is_no_oom(tmp_path: Path) -> None:
    proc = launch(spec_for(tmp_path, _hog(tmp_path, "small.py", 8, "kill"), mem=256 * MIB))
    status = finished(proc, 60.0)
    assert status.returncode == -signal.SIGKILL and not status.oom
    assert str(status) == "killed by SIGKILL"


@pytest.mark.skipif(_NO_MEMORY is None, reason="the memory controller is given here: its "
                                               "cgroup decides")
def test_a_peak_that_may_be_the_runners_is_no_oom(tmp_path: Path) -> None:
    """A shell that kills itself at once, its MEM below the runner's own peak: wait4 reports
    the peak the script started from at its exec (the runner's memory, which posix_spawn
    shares), which is no sign that the task passed its MEM. (In CI's whole suite, pytest's
    350 MB made every such kill an oom.)"""
    mem = 16 * MIB
    assert peak_rss_self() > mem  # a Python runner always is
    quick = script(tmp_path, "quick.sh", "#!/bin/sh\nkill -9 $$\n")
    status = finished(launch(spec_for(tmp_path, quick, mem=mem)), 60.0)
    assert status.returncode == -signal.SIGKILL and not status.oom, status
    assert status.usage is not None and status.usage.max_rss_bytes is not None


def test_a_kill_by_the_runner_is_never_oom(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    # past its MEM where no cgroup holds it to it (the fallback's case), within it where one
    # does (the cgroup would kill it first)
    size = 80 if _NO_MEMORY is not None else 8
    hang = script(tmp_path, "hang.py", f"#!{sys.executable}\n"
                                       f"import time\nx = b'x' * ({size} << 20)\n"
                                       f"open({str(ready)!r}, 'w').write('ready')\n"
                                       "time.sleep(3600)\n")
    proc = launch(spec_for(tmp_path, hang, mem=64 * MIB))
    wait_for_file(ready, 30.0)
    proc.kill()
    status = finished(proc)
    assert status.returncode == -signal.SIGKILL and not status.oom


def test_the_fallback_rule() -> None:
    kill = -signal.SIGKILL
    assert out_of_memory(kill, mem=100, oom_kills=None, max_rss=100, runner_killed=False)
    assert out_of_memory(137, mem=100, oom_kills=None, max_rss=100, runner_killed=False)
    assert not out_of_memory(1, mem=100, oom_kills=None, max_rss=100, runner_killed=False)
    assert not out_of_memory(kill, mem=100, oom_kills=None, max_rss=99, runner_killed=False)
    assert not out_of_memory(kill, mem=100, oom_kills=None, max_rss=200, runner_killed=True)
    assert not out_of_memory(kill, mem=None, oom_kills=None, max_rss=200, runner_killed=False)
    assert not out_of_memory(-signal.SIGTERM, mem=100, oom_kills=None, max_rss=200,
                             runner_killed=False)
    # a cgroup that held the task decides alone, whatever the resident set says
    assert out_of_memory(kill, mem=100, oom_kills=1, max_rss=10, runner_killed=False)
    assert not out_of_memory(kill, mem=100, oom_kills=0, max_rss=200, runner_killed=False)
    assert not out_of_memory(0, mem=100, oom_kills=3, max_rss=200, runner_killed=False)


# memory.events and memory.peak as the kernel writes them (Documentation/admin-guide/
# cgroup-v2.rst: flat keyed "key value" lines; a single value), read from a folder standing for
# a task's cgroup after its processes are gone.
EVENTS = "low 0\nhigh 0\nmax 1283\noom 2\noom_kill 1\noom_group_kill 1\n"


def test_the_oom_kills_and_the_peak_are_read_as_the_kernel_writes_them(tmp_path: Path) -> None:
    from metaq_py.launch.memory import memory_end

    (tmp_path / "memory.events").write_text(EVENTS)
    (tmp_path / "memory.peak").write_text("67108864\n")
    ended = memory_end(tmp_path)
    assert (ended.oom_kills, ended.peak) == (1, 64 * MIB)
    (tmp_path / "memory.events").write_text(EVENTS.replace("oom_kill 1", "oom_kill 0"))
    (tmp_path / "memory.peak").unlink()  # before Linux 5.19
    ended = memory_end(tmp_path)
    assert (ended.oom_kills, ended.peak) == (0, None)


def test_a_cgroup_without_memory_max_is_not_limited(tmp_path: Path) -> None:
    from metaq_py.launch.memory import limit_memory

    assert not limit_memory(tmp_path, 64 * MIB), "no memory controller: no file to write"
    for name in ("memory.max", "memory.swap.max", "memory.oom.group"):
        (tmp_path / name).write_text("max\n")
    assert limit_memory(tmp_path, 64 * MIB)
    assert [(tmp_path / n).read_text() for n in ("memory.max", "memory.swap.max",
                                                 "memory.oom.group")] == \
        [str(64 * MIB), "0", "1"]
