"""Where is my output, and what happened: every attempt of a task in ``metaq show``, the
nodes of a running task in ``metaq running``, retries counted as "retry 1 of 2"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.cli.test_queue import metaq
from tests.runner_helpers import wait_until


def _queue(tmp_path: Path) -> Path:
    q = tmp_path / "q"
    assert metaq("init", str(q)).returncode == 0
    return q


def test_show_lists_every_attempt_with_its_nodes_outcome_and_output(tmp_path: Path) -> None:
    q = _queue(tmp_path)
    task = tmp_path / "solve.sh"
    task.write_text('#!/bin/sh\n#METAQ MIN_WC_TIME 5:00\n#METAQ RETRIES 2\n#METAQ NODES 2\n'
                    'echo "try $METAQ_ATTEMPT"\nexit 3\n')
    task.chmod(0o755)
    assert metaq("submit", str(task), "--queue", str(q)).returncode == 0
    ran = metaq("run", "--queue", str(q), "--batch", "local", "--nodes", "2")
    assert ran.returncode == 0, ran.stderr
    shown = metaq("show", "solve.sh", "--queue", str(q))
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.split("attempts:\n", 1)[1].splitlines()
    tries = [line for line in lines if not line.startswith("     output: ")]
    outputs = [line.split("output: ", 1)[1] for line in lines if "output: " in line]
    assert len(tries) == 3, shown.stdout
    for n, line in enumerate(tries, start=1):
        assert line.startswith(f"  {n}. "), line
        assert "on local0, local1 (2 nodes)" in line, line
        assert "exit code 3, after " in line and line.split("after ")[1].split()[1] == "s"
    assert tries[0].endswith("(first attempt)") and "failed (retried)" in tries[0]
    assert tries[1].endswith("(retry 1 of 2)") and tries[2].endswith("(retry 2 of 2)")
    assert ": failed, exit code 3" in tries[2]
    # The output of every attempt is where show says it is.
    assert len(outputs) == 3 and len(set(outputs)) == 1
    assert Path(outputs[0]).read_text() == "try 1\ntry 2\ntry 3\n"
    data = json.loads(metaq("show", "solve.sh", "--json", "--queue", str(q)).stdout)
    assert [a["attempt"] for a in data["attempts"]] == [1, 2, 3]
    assert [a["outcome"] for a in data["attempts"]] == ["retry", "retry", "failed"]
    assert all(a["hosts"] == ["local0", "local1"] and a["exit_code"] == 3
               for a in data["attempts"])


def test_show_names_a_log_of_the_tasks_own_as_well(tmp_path: Path) -> None:
    q = _queue(tmp_path)
    task = tmp_path / "ok.sh"
    log = tmp_path / "mine" / "ok.out"
    task.write_text(f"#!/bin/sh\n#METAQ MIN_WC_TIME 5:00\n#METAQ LOG {log}\necho done\n")
    task.chmod(0o755)
    assert metaq("submit", str(task), "--queue", str(q)).returncode == 0
    assert metaq("run", "--queue", str(q), "--batch", "local").returncode == 0
    data = json.loads(metaq("show", "ok.sh", "--json", "--queue", str(q)).stdout)
    [attempt] = data["attempts"]
    assert attempt["outcome"] == "finished" and attempt["exit_code"] == 0
    assert str(log) in attempt["output"] and len(attempt["output"]) == 2
    assert log.read_text() == "done\n"


def test_running_names_the_nodes_a_task_runs_on(tmp_path: Path) -> None:
    q = _queue(tmp_path)
    go = tmp_path / "go"
    task = tmp_path / "wait.sh"
    task.write_text(f"#!/bin/sh\n#METAQ MIN_WC_TIME 5:00\n#METAQ NODES 2\n"
                    f"while [ ! -e {go} ]; do sleep 0.05; done\n")
    task.chmod(0o755)
    assert metaq("submit", str(task), "--queue", str(q)).returncode == 0
    run = subprocess.Popen([sys.executable, "-m", "metaq_py", "run", "--queue", str(q),
                            "--batch", "local", "--nodes", "3"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           env={**os.environ})
    try:
        def started() -> str:
            out = metaq("running", "--batch", "local", "--queue", str(q)).stdout
            return out if " on local" in out else ""
        assert wait_until(started, timeout=60)
        [line] = started().splitlines()
        assert line.startswith("todo/wait.sh  on local0,local1  job "), line
        [row] = json.loads(metaq("running", "--json", "--batch", "local", "--queue",
                                 str(q)).stdout)
        assert row["nodes"] == ["local0", "local1"]
    finally:
        go.touch()
        assert run.wait(timeout=60) == 0


def test_the_advice_for_a_rejected_task_names_where_its_file_is_now(tmp_path: Path) -> None:
    q = _queue(tmp_path)
    bad = q / "todo" / "bad.sh"
    bad.write_text("#!/bin/sh\n#METAQ NODES two\necho fixed\n")
    bad.chmod(0o755)
    os.utime(bad, (bad.stat().st_atime - 600, bad.stat().st_mtime - 600))  # settled
    assert metaq("run", "--queue", str(q), "--batch", "local").returncode == 0
    now = q / "rejected" / "todo" / "bad.sh"
    assert now.is_file() and not bad.exists()
    told = metaq("explain", "bad.sh", "--queue", str(q)).stdout
    assert f"The file is now at {now}: fix it there" in told.replace("\n", " "), told
    shown = metaq("show", "bad.sh", "--queue", str(q)).stdout
    assert f"to run it: fix the file where it is now, {now}, then 'metaq retry " \
           f"todo/bad.sh'" in shown, shown
    # The advice works as written.
    now.write_text(now.read_text().replace("NODES two", "NODES 1"))
    assert metaq("retry", "todo/bad.sh", "--queue", str(q)).returncode == 0
    assert metaq("run", "--queue", str(q), "--batch", "local").returncode == 0
    assert (q / "finished" / "todo" / "bad.sh").is_file()
