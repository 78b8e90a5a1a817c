"""Resource use of a task: the kernel's figures when the launcher reaps a real script, and a
SLURM step's from ``sacct`` output as sacct prints it."""

from __future__ import annotations

import queue
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from metaq_py.launch import TaskProcess, launch
from metaq_py.launch.step_usage import (
    StepUsage,
    parse_cpu_time,
    parse_sacct_usage,
    parse_size,
)
from metaq_py.launch.usage import Usage
from metaq_py.queue.logbook import USAGE_FIELDS
from tests.conftest import FakeBin
from tests.launch.test_launch import script, spec_for

# A shell (the script) waits for a Python child that burns CPU and holds 64 MiB resident:
# the figures are the child's, counted in the script's because it waited for it.
BURN = f"""#!/bin/sh
{sys.executable} -c '
import time
block = bytearray(64 * 1024 * 1024)
for i in range(0, len(block), 4096):
    block[i] = 1
end = time.process_time() + 0.4
while time.process_time() < end:
    pass
'
"""


def test_the_kernel_counts_the_cpu_time_and_peak_memory_of_the_tree(tmp_path: Path) -> None:
    ended: queue.Queue[TaskProcess] = queue.Queue()
    process = launch(spec_for(tmp_path, script(tmp_path, "burn.sh", BURN)), on_exit=ended.put)
    assert ended.get(timeout=30) is process
    status = process.status
    assert status is not None and status.ok
    used = status.usage
    assert used is not None and used.source == "wait4"
    assert used.user_seconds + used.system_seconds >= 0.35
    assert used.max_rss_bytes is not None and used.max_rss_bytes >= 64 * 1024 * 1024
    # every field but the peak of a cgroup that held a MEM (this task has none)
    assert set(used.fields()) == set(USAGE_FIELDS) - {"memory_peak_bytes"}


def test_a_quick_task_uses_little(tmp_path: Path) -> None:
    ended: queue.Queue[TaskProcess] = queue.Queue()
    process = launch(spec_for(tmp_path, script(tmp_path, "quick.sh", "#!/bin/sh\nexit 3\n")),
                     on_exit=ended.put)
    ended.get(timeout=30)
    status = process.status
    assert status is not None and status.exit_code == 3
    assert status.usage is not None and status.usage.cpu_seconds < 0.35


# What `sacct --jobs 4242.3 --noheader --parsable2 --format=JobID,UserCPU,SystemCPU,MaxRSS`
# prints: the step's line (other lines of the job, when asked by job, come before it).
SACCT = """\
4242|00:02:11|00:01.304|
4242.batch|00:00.120|00:00.051|6204K
4242.3|01:02:03|00:12.500|1.50G
4242.4|1-02:03:04|00:00:00|0
"""


def test_sacct_gives_a_steps_cpu_times_and_peak_memory() -> None:
    step = parse_sacct_usage(SACCT, "4242.3")
    assert step == Usage(user_seconds=3723.0, system_seconds=12.5,
                         max_rss_bytes=round(1.5 * 1024**3), source="sacct")
    long = parse_sacct_usage(SACCT, "4242.4")
    assert long is not None and long.user_seconds == 93784.0 and long.max_rss_bytes == 0
    assert parse_sacct_usage(SACCT, "4242.9") is None
    batch = parse_sacct_usage(SACCT, "4242.batch")
    assert batch is not None and batch.max_rss_bytes == 6204 * 1024


@given(st.integers(0, 30), st.integers(0, 23), st.integers(0, 59), st.integers(0, 59),
       st.integers(0, 999))
def test_cpu_times_read_back_in_every_form(d: int, h: int, m: int, s: int, ms: int) -> None:
    total = d * 86400 + h * 3600 + m * 60 + s
    assert parse_cpu_time(f"{d}-{h:02d}:{m:02d}:{s:02d}") == total
    assert parse_cpu_time(f"{h:02d}:{m:02d}:{s:02d}") == h * 3600 + m * 60 + s
    assert parse_cpu_time(f"{m:02d}:{s:02d}.{ms:03d}") == pytest.approx(m * 60 + s + ms / 1000)


@given(st.text(max_size=12))
def test_garbage_times_and_sizes_raise_one_sentence_or_read(text: str) -> None:
    for parse in (parse_cpu_time, parse_size):
        try:
            value = parse(text)
        except ValueError as e:
            said = str(e)
            assert said.startswith(repr(text.strip()) + " is not a sacct") and "\n" not in said
        else:
            assert value is None or value >= 0


def test_a_malformed_step_line_is_one_sentence() -> None:
    with pytest.raises(ValueError, match=r"step 7\.1 has 2 fields"):
        parse_sacct_usage("7.1|00:01.000\n", "7.1")
    with pytest.raises(ValueError, match="not a sacct CPU time"):
        parse_sacct_usage("7.1|soon|00:01.000|1K\n", "7.1")


def test_without_accounting_sacct_is_asked_once(fake_bin: FakeBin) -> None:
    fake_bin.command("sacct", stderr="Slurm accounting storage is disabled\n", exit_code=1)
    steps = StepUsage()
    assert steps.of("12.0") is None and steps.of("12.1") is None
    calls = (fake_bin.directory / ".sacct.calls").read_text().splitlines()
    assert len(calls) == 1 and "--format=JobID,UserCPU,SystemCPU,MaxRSS" in calls[0]


def test_a_recorded_step_is_read_from_sacct(fake_bin: FakeBin) -> None:
    fake_bin.command("sacct", stdout=SACCT, when=["4242.3"])
    fake_bin.command("sacct", stdout="", exit_code=0)
    steps = StepUsage()
    got = steps.of("4242.3")
    assert got is not None and got.cpu_seconds == 3735.5 and got.source == "sacct"
    assert steps.of("4242.7") is None, "not recorded (yet): no figures, and asked again later"
    assert len((fake_bin.directory / ".sacct.calls").read_text().splitlines()) == 2
