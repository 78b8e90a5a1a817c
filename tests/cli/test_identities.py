"""One form for a task's identity everywhere people read it: an index of an array is
``todo/prop.sh[0]`` in ``metaq running`` and ``metaq status`` as in every other command, while
their ``--json`` keeps the identity of the index's file, ``todo/prop.sh/0``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.cli.test_queue import metaq
from tests.runner_helpers import wait_until


def test_running_and_status_name_a_running_index_as_people_write_it(tmp_path: Path) -> None:
    q = tmp_path / "q"
    assert metaq("init", str(q)).returncode == 0
    go = tmp_path / "go"
    task = tmp_path / "prop.sh"
    task.write_text(f"#!/bin/sh\n#METAQ MIN_WC_TIME 5:00\n"
                    f"while [ ! -e {go} ]; do sleep 0.05; done\n")
    task.chmod(0o755)
    assert metaq("submit", "--array", "0", str(task), "--queue", str(q)).returncode == 0
    run = subprocess.Popen([sys.executable, "-m", "metaq_py", "run", "--queue", str(q),
                            "--batch", "local", "--nodes", "1"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           env={**os.environ})
    try:
        def started() -> str:
            out = metaq("running", "--batch", "local", "--queue", str(q)).stdout
            return out if " on local" in out else ""
        assert wait_until(started, timeout=60)
        [line] = started().splitlines()
        assert line.startswith("todo/prop.sh[0]  on local0  job "), line
        [row] = json.loads(metaq("running", "--json", "--batch", "local", "--queue",
                                 str(q)).stdout)
        assert row["task"] == "todo/prop.sh/0"
        status = metaq("status", "--queue", str(q))
        assert status.returncode == 0, status.stderr
        running = status.stdout.split("running", 1)[1]
        assert "todo/prop.sh[0]" in running and "todo/prop.sh/0" not in running, \
            status.stdout
        [now] = json.loads(metaq("status", "--json", "--queue", str(q)).stdout)["running"]
        assert now["task"] == "todo/prop.sh/0"
    finally:
        go.touch()
        assert run.wait(timeout=60) == 0


def test_explain_advises_retrying_an_index_by_the_name_people_write(tmp_path: Path) -> None:
    q = tmp_path / "q"
    assert metaq("init", str(q)).returncode == 0
    task = tmp_path / "prop.sh"
    task.write_text('#!/bin/sh\n#METAQ MIN_WC_TIME 5:00\nexit "$METAQ_ARRAY_INDEX"\n')
    task.chmod(0o755)
    assert metaq("submit", "--array", "0-1", str(task), "--queue", str(q)).returncode == 0
    assert metaq("run", "--queue", str(q), "--batch", "local").returncode == 0
    told = metaq("explain", "prop.sh[1]", "--queue", str(q))
    assert told.returncode == 0, told.stderr
    assert told.stdout.splitlines()[0] == "todo/prop.sh[1]: failed"
    assert "'metaq retry todo/prop.sh[1]' sends it back to wait." in told.stdout
    assert "prop.sh/1" not in told.stdout
    again = metaq("retry", "todo/prop.sh[1]", "--queue", str(q))
    assert again.returncode == 0 and again.stdout.startswith("retry: todo/prop.sh[1] -> "), \
        again.stderr
