"""One flag names the scheduler in ``metaq run``, ``simulate`` and ``experiment``:
``--scheduler``. The old names (``--mechanism``, ``--policy``, ``--policies``) are still
accepted, and an old and a new name that disagree are one clear sentence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from metaq_py.cli import app
from tests.runner_helpers import events, make_queue, of, task

cli = CliRunner()


@pytest.mark.parametrize("flag", ["--scheduler", "--mechanism"])
def test_run_takes_the_scheduler_by_its_name_and_by_its_old_name(tmp_path: Path,
                                                                 flag: str) -> None:
    q = make_queue(tmp_path / "q")
    task(q, "a.sh", "true")
    done = cli.invoke(app, ["run", "-q", str(q.root), "--batch", "local", "--nodes", "2",
                            "--jobid", "J1", flag, "N&PAA"])
    assert done.exit_code == 0, done.output
    [start] = of(events(q), "runner-start")
    assert start["mechanism"] == "N&PAA"


@pytest.mark.parametrize("flag", ["--scheduler", "--policy"])
def test_simulate_takes_the_scheduler_by_its_name_and_by_its_old_name(
        tmp_path: Path, flag: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METAQ_CACHE_DIR", str(tmp_path / "cache"))
    done = cli.invoke(app, ["simulate", "--jobs", "200", "--nodes", "256", "--workload", "w3",
                            flag, "cua&spaa", "--out", str(tmp_path / "out"), "--no-plots"])
    assert done.exit_code == 0, done.output
    doc = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert doc["run"]["policy"] == "CUA&SPAA"


@pytest.mark.parametrize("flag", ["--scheduler", "--policies"])
def test_experiment_takes_the_schedulers_by_their_name_and_by_the_old_name(flag: str) -> None:
    done = cli.invoke(app, ["experiment", "--synthetic", "--jobs", "60", flag, "fifo"])
    assert done.exit_code == 2
    assert "unknown policy 'fifo'" in done.output


@pytest.mark.parametrize(("command", "old"), [
    (["run", "--batch", "local", "--nodes", "1"], "--mechanism"),
    (["simulate", "--jobs", "50", "--no-plots"], "--policy"),
    (["experiment", "--synthetic", "--jobs", "60"], "--policies"),
])
def test_an_old_and_a_new_name_that_disagree_are_one_sentence(
        tmp_path: Path, command: list[str], old: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    if command[0] == "run":
        make_queue(tmp_path / "queue")
    done = cli.invoke(app, [*command, "--scheduler", "easy", old, "conservative"])
    assert done.exit_code != 0
    assert f"--scheduler 'easy' and {old} 'conservative' disagree" in done.output
