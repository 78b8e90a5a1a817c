"""The batch scripts in ``share/jobscripts/``, run for real with a fake ``metaq`` on ``PATH``.

Each must hand its queue and extra arguments to ``metaq run`` untouched, and ``exec`` it so that
the batch system's signals reach metaq itself. Under real SLURM, ``slurm.sh`` is also tested
in ``test_slurm_cluster.py``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

JOBSCRIPTS = REPO / "metaq_py" / "share" / "jobscripts"

FAKE_METAQ = f"""#!{sys.executable}
import json, os, sys
print(json.dumps({{"argv": sys.argv[1:], "cwd": os.getcwd(), "pid": os.getpid()}}))
"""


def run_jobscript(name: str, tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> dict:
    """Run ``share/jobscripts/NAME`` with bash in ``tmp_path``; what the fake metaq saw."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "metaq"
    fake.write_text(FAKE_METAQ)
    fake.chmod(0o755)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("METAQ_", "PBS_"))}
    full_env = {**clean, "PATH": f"{bin_dir}:{os.environ['PATH']}", **(env or {})}
    proc = subprocess.Popen(
        ["bash", str(JOBSCRIPTS / name), *args],
        cwd=tmp_path,
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    seen = json.loads(out)
    # exec: metaq *is* the batch shell, so signals sent to the script's pid reach it.
    assert seen["pid"] == proc.pid
    return seen


def directives(name: str, prefix: str) -> list[str]:
    return [
        line.split(None, 1)[1].split("#")[0].strip()
        for line in (JOBSCRIPTS / name).read_text().splitlines()
        if line.startswith(prefix + " ")
    ]


def option_names(options: list[str]) -> list[str]:
    return [re.split(r"[= ]", option, maxsplit=1)[0] for option in options]


def test_slurm_sh_passes_the_queue_and_arguments_through(tmp_path: Path) -> None:
    seen = run_jobscript("slurm.sh", tmp_path, "--linger", "--name", "two words")
    assert seen["argv"] == ["run", "--queue", "queue", "--linger", "--name", "two words"]
    assert seen["cwd"] == str(tmp_path)
    seen = run_jobscript("slurm.sh", tmp_path, env={"METAQ_QUEUE": "/lus/q"})
    assert seen["argv"] == ["run", "--queue", "/lus/q"]


def test_slurm_sh_asks_for_a_warning_signal_and_names_each_option_once() -> None:
    options = directives("slurm.sh", "#SBATCH")
    assert "--signal=B:USR1@120" in options
    names = option_names(options)
    assert len(names) == len(set(names)), f"an option is given twice: {names}"
    assert "--nodes" in names and "--time" in names


def test_pbs_sh_runs_where_qsub_was_run_with_extra_arguments(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    seen = run_jobscript(
        "pbs.sh",
        tmp_path,
        env={"PBS_O_WORKDIR": str(work), "METAQ_ARGS": "--linger  --name *", "PBS_JOBID": "1.s"},
    )
    # Split at spaces, but never globbed: the `*` stays a `*`.
    assert seen["argv"] == ["run", "--queue", "queue", "--linger", "--name", "*"]
    assert seen["cwd"] == str(work)


def test_pbs_sh_without_extra_arguments(tmp_path: Path) -> None:
    seen = run_jobscript("pbs.sh", tmp_path, env={"METAQ_QUEUE": "/lus/q"})
    assert seen["argv"] == ["run", "--queue", "/lus/q"]


def test_pbs_sh_uses_the_real_variable_names_and_each_option_once() -> None:
    text = (JOBSCRIPTS / "pbs.sh").read_text()
    assert "PBS_JOB_ID" not in text  # METAQ's misspelling of PBS_JOBID
    names = option_names(directives("pbs.sh", "#PBS"))
    resources = [o.split("=")[0] for o in directives("pbs.sh", "#PBS") if o.startswith("-l ")]
    single = [n for n in names if n != "-l"]
    assert len(single) == len(set(single)), f"an option is given twice: {names}"
    assert len(resources) == len(set(resources)), f"a resource is asked twice: {resources}"


@pytest.mark.parametrize(
    ("env", "args", "argv"),
    [
        ({}, (), ["run", "--queue", "queue", "--nodes", "4"]),
        (
            {"METAQ_NODES": "2", "METAQ_QUEUE": "q2"},
            ("--walltime", "30m"),
            ["run", "--queue", "q2", "--nodes", "2", "--walltime", "30m"],
        ),
    ],
)
def test_local_sh(tmp_path: Path, env: dict[str, str], args: tuple[str, ...], argv: list) -> None:
    assert run_jobscript("local.sh", tmp_path, *args, env=env)["argv"] == argv
