"""``metaq report`` on named tasks: an array as one row (``metaq report run.sh``), some of its
indices (``run.sh[0-3]``), one row per index with ``--each``, and one plain task; from the
event logs of a real ``metaq run``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from metaq_py.report.joblog import read_job_logs
from metaq_py.report.task_use import Named, task_use
from tests.cli.test_queue import metaq
from tests.job_logs import end, write_log

T0 = 1_750_000_000.0

ARRAY = f"""#!/bin/sh
#METAQ MIN_WC_TIME 1m
#METAQ RETRIES 0
#METAQ PROJECT lattice
#METAQ GPUS 1
{sys.executable} -c 'import time; end = time.process_time() + 0.05
while time.process_time() < end: pass'
exit $((METAQ_ARRAY_INDEX % 2))
"""


def _ends(q: Path) -> dict[str, dict]:
    return {e["task"]: e for log in read_job_logs(q) for e in log.events if e["event"] == "end"}


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A queue where the array run.sh[0-5] ran (its odd indices failed) beside a plain task."""
    tmp = tmp_path_factory.mktemp("array-report")
    q = tmp / "q"
    assert metaq("init", str(q)).returncode == 0
    run = tmp / "run.sh"
    run.write_text(ARRAY)
    run.chmod(0o755)
    sub = metaq("submit", "--queue", str(q), "--array", "0-5", str(run))
    assert sub.returncode == 0, sub.stderr
    solo = tmp / "solo.sh"
    solo.write_text("#!/bin/sh\n#METAQ MIN_WC_TIME 1m\nexit 0\n")
    solo.chmod(0o755)
    assert metaq("submit", "--queue", str(q), str(solo)).returncode == 0
    done = metaq("run", "--queue", str(q), "--batch", "local", "--nodes", "2",
                 "--gpus-per-node", "1", "--cores-per-node", "1", "--launch-pause", "0")
    assert done.returncode == 0, done.stderr
    assert len(_ends(q)) == 7
    return q


def test_an_array_is_one_row(ran: Path) -> None:
    out = metaq("report", "run.sh", "--json", "--queue", str(ran))
    assert out.returncode == 0, out.stderr
    (row,) = json.loads(out.stdout)["tasks"]
    ends = [e for t, e in _ends(ran).items() if t.startswith("todo/run.sh/")]
    assert (row["name"], row["tasks"], row["runs"]) == ("todo/run.sh", 6, 6)
    assert (row["finished"], row["failed"]) == (3, 3)
    assert row["node_hours"] == pytest.approx(sum(e["node_seconds"] for e in ends) / 3600)
    assert row["gpu_hours"] == pytest.approx(sum(e["gpu_seconds"] for e in ends) / 3600)
    assert row["gpu_hours"] > 0
    cpu = sum(e["cpu_user_seconds"] + e["cpu_system_seconds"] for e in ends)
    assert row["cpu_efficiency"] == pytest.approx(cpu / sum(e["core_seconds"] for e in ends))
    assert "members" not in row


def test_some_indices_and_each(ran: Path) -> None:
    out = metaq("report", "run.sh[0-3]", "--each", "--json", "--queue", str(ran))
    assert out.returncode == 0, out.stderr
    (row,) = json.loads(out.stdout)["tasks"]
    assert (row["name"], row["tasks"], row["finished"], row["failed"]) == \
        ("todo/run.sh[0-3]", 4, 2, 2)
    members = {m["name"]: m for m in row["members"]}
    assert sorted(members) == [f"todo/run.sh/{i}" for i in range(4)]
    for i in range(4):
        m, e = members[f"todo/run.sh/{i}"], _ends(ran)[f"todo/run.sh/{i}"]
        assert (m["finished"], m["failed"]) == ((1, 0) if i % 2 == 0 else (0, 1))
        assert m["node_hours"] == pytest.approx(e["node_seconds"] / 3600)


def test_the_table_names_the_array_and_a_plain_task(ran: Path) -> None:
    out = metaq("report", "run.sh", "solo.sh", "--each", "--queue", str(ran))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    array = next(line for line in lines if "todo/run.sh " in line)
    assert array.split("│")[2:5] == [" 6 ", " 3 ", " 3 "] or \
        [c.strip() for c in array.split("│")[2:5]] == ["6", "3", "3"]
    assert sum("todo/run.sh/" in line for line in lines) == 6
    assert any("todo/solo.sh" in line for line in lines)
    assert "CPU efficiency" in out.stdout


def test_bad_names_are_one_sentence(ran: Path) -> None:
    missing = metaq("report", "run.sh[9]", "--queue", str(ran))
    assert missing.returncode == 1
    assert "the array todo/run.sh has no index 9 (its indices are 0-5)" in missing.stderr
    nothing = metaq("report", "nope.sh", "--queue", str(ran))
    assert nothing.returncode == 1 and nothing.stderr.count("\n") == 1
    lonely = metaq("report", "--each", "--queue", str(ran))
    assert lonely.returncode == 1 and "--each lists the indices of an array" in lonely.stderr


def test_the_last_outcome_counts_once_per_task(tmp_path: Path) -> None:
    write_log(tmp_path, "1", [
        end(T0 + 10, "todo/a.sh/0", ["n"], seconds=10, outcome="failed"),
        end(T0 + 20, "todo/a.sh/1", ["n"], seconds=10, outcome="requeued"),
    ])
    write_log(tmp_path, "2", [
        end(T0 + 50, "todo/a.sh/0", ["n"], seconds=30, outcome="finished"),
        end(T0 + 60, "todo/b.sh", ["n"], seconds=30, outcome="finished"),
    ])
    named = [Named("todo/a.sh", ("todo/a.sh/0", "todo/a.sh/1", "todo/a.sh/2"), array=True)]
    (row,) = task_use(read_job_logs(tmp_path), named)
    assert (row.tasks, row.runs, row.finished, row.failed) == (3, 3, 1, 0)
    assert row.node_hours == pytest.approx(50 / 3600)
    (later,) = task_use(read_job_logs(tmp_path), named, since=T0 + 30)
    assert (later.runs, later.finished) == (1, 1)
