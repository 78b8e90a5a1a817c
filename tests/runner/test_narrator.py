"""The runner speaks: a line per start and end at ``-v`` (or METAQ's ``METAQ_VERBOSITY``),
and a closing summary that names the tasks that failed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from metaq_py.runner.events import FAILURES_NAMED, Narrator
from tests.cli.test_queue import metaq


def _campaign(tmp_path: Path) -> Path:
    q = tmp_path / "q"
    assert metaq("init", str(q)).returncode == 0
    for name, body in (("good.sh", "exit 0"), ("bad.sh", "exit 3")):
        task = tmp_path / name
        task.write_text(f"#!/bin/sh\n#METAQ MIN_WC_TIME 5:00\n#METAQ RETRIES 1\n{body}\n")
        task.chmod(0o755)
        assert metaq("submit", str(task), "--queue", str(q)).returncode == 0
    return q


def _lines(stderr: str) -> list[str]:
    return [line.removeprefix("metaq run: ") for line in stderr.splitlines()]


@pytest.mark.parametrize("how", [("-v",), ("--verbose",), "METAQ_VERBOSITY=1"])
def test_verbose_runner_says_each_start_and_end(tmp_path: Path, how: object) -> None:
    q = _campaign(tmp_path)
    flags = how if isinstance(how, tuple) else ()
    env = {**os.environ, "METAQ_VERBOSITY": "1"} if isinstance(how, str) else None
    ran = metaq("run", "--queue", str(q), "--batch", "local", *flags, env=env)
    assert ran.returncode == 0, ran.stderr
    lines = _lines(ran.stderr)
    assert "started todo/good.sh on local0 (attempt 1)" in lines
    assert "started todo/bad.sh on local0 (attempt 1)" in lines
    assert "started todo/bad.sh on local0 (attempt 2)" in lines
    ends = [line for line in lines if line.startswith(("todo/good.sh ", "todo/bad.sh "))]
    assert len(ends) == 3, lines
    assert any(e.startswith("todo/good.sh finished after ") and e.endswith(" s")
               for e in ends)
    assert any(e.startswith("todo/bad.sh failed (exit code 3) after ")
               and e.endswith("; it goes back to wait for a retry") for e in ends)
    assert lines[-2] == ("3 attempts ended: 1 finished, 1 failed, 1 failed and will be "
                         "retried. Failed: todo/bad.sh (exit code 3) ('metaq show <task>' "
                         "tells each attempt and where its output is)")


@pytest.mark.parametrize("env", [{}, {"METAQ_VERBOSITY": "0"}])
def test_a_quiet_runner_still_names_its_failures(tmp_path: Path, env: dict) -> None:
    q = _campaign(tmp_path)
    ran = metaq("run", "--queue", str(q), "--batch", "local", env={**os.environ, **env})
    assert ran.returncode == 0, ran.stderr
    lines = _lines(ran.stderr)
    assert not any(line.startswith(("started ", "todo/")) for line in lines), lines
    assert lines[-2].startswith("3 attempts ended: ") and \
        "Failed: todo/bad.sh (exit code 3)" in lines[-2]
    assert lines[-1] == "stopped: nothing left to run"


def test_the_runner_names_an_index_of_an_array_as_people_write_it(tmp_path: Path) -> None:
    """Its lines and summary say ``todo/prop.sh[1]``, as every command does; the event log
    keeps the identity of the index's file, ``todo/prop.sh/1``, for the readers of its
    format (docs/events.md)."""
    q = tmp_path / "q"
    assert metaq("init", str(q)).returncode == 0
    task = tmp_path / "prop.sh"
    task.write_text('#!/bin/sh\n#METAQ MIN_WC_TIME 5:00\nexit "$METAQ_ARRAY_INDEX"\n')
    task.chmod(0o755)
    assert metaq("submit", "--array", "0-1", str(task), "--queue", str(q)).returncode == 0
    ran = metaq("run", "--queue", str(q), "--batch", "local", "--jobid", "J1", "-v")
    assert ran.returncode == 0, ran.stderr
    lines = _lines(ran.stderr)
    assert "started todo/prop.sh[0] on local0 (attempt 1)" in lines
    assert any(line.startswith("todo/prop.sh[1] failed (exit code 1) after ")
               for line in lines), lines
    assert "Failed: todo/prop.sh[1] (exit code 1)" in lines[-2]
    assert "todo/prop.sh/" not in ran.stderr
    events = [json.loads(line) for line in
              (q / "jobs" / "J1" / "events.jsonl").read_text().splitlines()]
    assert sorted(e["task"] for e in events if e["event"] == "end") == \
        ["todo/prop.sh/0", "todo/prop.sh/1"]


def test_a_bad_verbosity_is_one_sentence(tmp_path: Path) -> None:
    q = _campaign(tmp_path)
    ran = metaq("run", "--queue", str(q), "--batch", "local",
                env={**os.environ, "METAQ_VERBOSITY": "loud"})
    assert ran.returncode == 1
    assert ran.stderr == "metaq: METAQ_VERBOSITY must be a whole number, not 'loud'\n"


def test_the_summary_names_a_few_failures_and_counts_the_rest() -> None:
    said: list[str] = []
    n = Narrator(said.append, verbose=False, named=str)
    assert n.summary() is None
    for i in range(FAILURES_NAMED + 2):
        n.heard({"time": 0.0, "event": "end", "task": f"todo/t{i}.sh", "outcome": "failed",
                 "exit_code": None, "signal": "SIGKILL", "seconds": 1.0})
    n.heard({"time": 0.0, "event": "end", "task": "todo/ok.sh", "outcome": "finished",
             "exit_code": 0, "signal": None, "seconds": 1.0})
    line = n.summary()
    assert said == [] and line is not None
    assert line.startswith(f"{FAILURES_NAMED + 3} attempts ended: 1 finished, "
                           f"{FAILURES_NAMED + 2} failed. Failed: todo/t0.sh (killed by "
                           f"SIGKILL); ")
    assert "todo/t4.sh (killed by SIGKILL); and 2 more" in line and "t5.sh" not in line
