"""What ``metaq`` prints into a pipe, a file or a cron mail is whole: no table is cut at 80
columns (rich's width when there is no terminal), however long the names in it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

PROJECT = "a_project_name_long_enough_to_be_cut_in_eighty_columns"
FOLDER = "campaign/ensemble_b64_m0.0123/stream_7"
NAME = "propagator_with_a_long_name.sh"


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A queue whose two tasks with long names have run, in a real local batch job."""
    top = tmp_path_factory.mktemp("pipes")
    q = top / "q"
    assert _piped(f"metaq init {q}").returncode == 0
    for i in (1, 2):
        script = top / f"{i}_{NAME}"
        script.write_text(f"#!/bin/sh\n#METAQ MIN_WC_TIME 1m\n#METAQ PROJECT {PROJECT}\n"
                          f"true  # {i}\n")  # each its own: submit refuses a twin
        script.chmod(0o755)
        done = _piped(f"metaq submit {script} --folder {FOLDER} -q {q}")
        assert done.returncode == 0, done.stderr
    done = _piped(f"metaq run --batch local --nodes 2 -q {q}")
    assert done.returncode == 0, done.stderr
    return q


def _piped(command: str) -> subprocess.CompletedProcess[str]:
    """``command | cat`` in a shell, as a person or cron runs it: no terminal, no COLUMNS."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return subprocess.run(["bash", "-o", "pipefail", "-c", f"{command} | cat"],
                          capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.parametrize("args", [["report"], ["report", f"1_{NAME}"], ["status"],
                                  ["ls", "finished"]], ids=" ".join)
def test_piped_tables_keep_every_cell_whole(ran: Path, args: list[str]) -> None:
    done = _piped(f"metaq {' '.join(args)} -q {ran}")
    assert done.returncode == 0, done.stderr
    assert "…" not in done.stdout, done.stdout
    whole = PROJECT if args in (["report"], ["status"]) else f"todo/{FOLDER}/1_{NAME}"
    assert whole in done.stdout, done.stdout
    assert max(len(line) for line in done.stdout.splitlines()) > 80


def test_a_columns_setting_is_still_obeyed_in_a_pipe(ran: Path) -> None:
    done = _piped(f"COLUMNS=60 metaq status -q {ran}")
    assert done.returncode == 0, done.stderr
    assert max(len(line) for line in done.stdout.splitlines()) <= 60


def test_counts_take_the_number_of_their_noun(ran: Path) -> None:
    done = _piped(f"metaq report -q {ran}")
    assert "usage per project, all time (1 batch job)" in done.stdout, done.stdout
    assert "(2 runs)" in done.stdout
