"""The README's first command, ``pip install . && metaq demo``, as a newcomer runs it: a real,
non-editable install into a fresh virtual environment, then ``metaq`` run from a folder far
from the checkout, with nothing of the checkout on ``PYTHONPATH`` or ``PATH``.

The install builds without build isolation and without the network: the venv sees this
interpreter's packages (typer, setuptools, wheel: the test extras), and ``METAQ_PURE=1``
skips the mypyc compile (``tests/test_build.py`` holds the compiled build to the source). The
build works on a copy of the sources, so the checkout gets no ``build/`` folder."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.alloc.fake_batch import FakeBatch
from tests.conftest import CHECKOUT_BIN, REPO, FakeBin

SOURCES = ("pyproject.toml", "setup.py", "README.md", "LICENSE", "metaq_py", "sim")
"""What ``pip install .`` needs of the checkout."""


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with metaq-py installed from a copy of this checkout, as a wheel."""
    top = tmp_path_factory.mktemp("install")
    src = top / "src"
    src.mkdir()
    for name in SOURCES:
        there = REPO / name
        if there.is_dir():
            shutil.copytree(there, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(there, src / name)
    env = _outside({"METAQ_PURE": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    where = top / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(where)],
                   check=True, env=env, timeout=300)
    pip = subprocess.run([str(where / "bin" / "python"), "-m", "pip", "install", "--quiet",
                          "--no-deps", "--no-build-isolation", "--no-index", str(src)],
                         capture_output=True, text=True, env=env, cwd=top, timeout=600)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    return where


def _outside(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This environment without the checkout: no PYTHONPATH, no checkout ``metaq`` on PATH."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p and Path(p) != CHECKOUT_BIN)
    return {**env, **(extra or {})}


def _metaq(venv: Path, *args: str, cwd: Path, env: dict[str, str] | None = None
           ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(venv / "bin" / "metaq"), *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env=_outside(env))


def test_the_installed_metaq_is_the_venvs_not_the_checkout(venv: Path, tmp_path: Path) -> None:
    done = _metaq(venv, "--version", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    where = Path(done.stdout.rsplit(" from ", 1)[1].strip())
    assert where.is_relative_to(venv) and where.name == "metaq_py", done.stdout
    assert (where / "share" / "queue" / "todo" / "hello.sh").stat().st_mode & 0o111


def test_metaq_demo_runs_from_any_folder_and_cleans_up(venv: Path, tmp_path: Path) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    elsewhere = tmp_path / "elsewhere"  # no queue here, and METAQ_QUEUE names none either
    elsewhere.mkdir()
    done = _metaq(venv, "demo", cwd=elsewhere,
                  env={"TMPDIR": str(scratch), "METAQ_QUEUE": str(tmp_path / "nowhere"),
                       "COLUMNS": "200"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"running a copy of {venv}" in done.stdout
    assert "stopped: nothing left to run" in done.stderr + done.stdout
    assert done.stdout.splitlines()[-1].startswith("removed ")
    assert list(scratch.iterdir()) == [] and list(elsewhere.iterdir()) == []


def test_metaq_demo_keep_leaves_the_run_to_look_at(venv: Path, tmp_path: Path) -> None:
    done = _metaq(venv, "demo", "--keep", "--nodes", "2", cwd=tmp_path,
                  env={"TMPDIR": str(tmp_path)})
    assert done.returncode == 0, done.stdout + done.stderr
    [kept] = tmp_path.glob("metaq-demo-*")
    assert done.stdout.splitlines()[-1].startswith(f"kept {kept}; events: ")
    assert len(list((kept / "queue" / "finished").rglob("*.sh"))) == 5  # all five ran well


def test_metaq_jobscript_prints_the_shipped_scripts(venv: Path, tmp_path: Path) -> None:
    for system in ("slurm", "pbs", "local"):
        done = _metaq(venv, "jobscript", system, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        shipped = REPO / "metaq_py" / "share" / "jobscripts" / f"{system}.sh"
        assert done.stdout == shipped.read_text()
        assert "metaq run" in done.stdout
    lsf = _metaq(venv, "jobscript", "lsf", cwd=tmp_path)
    assert lsf.returncode == 1 and lsf.stdout == ""
    assert lsf.stderr == ("metaq: there is no job script for 'lsf'; metaq-py has one for "
                          "slurm, pbs, local.\n")


def test_metaq_alloc_finds_its_own_job_script_without_a_setting(
        venv: Path, tmp_path: Path, fake_bin: FakeBin) -> None:
    FakeBatch(fake_bin, "slurm")
    q = tmp_path / "q"
    assert _metaq(venv, "init", str(q), cwd=tmp_path).returncode == 0
    task = q / "todo" / "t.sh"
    task.write_text("#!/bin/sh\n#METAQ MIN_WC_TIME 20m\ntrue\n")
    task.chmod(0o755)
    done = _metaq(venv, "alloc", "--dry-run", "--system", "slurm", "--queue", str(q),
                  cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    [line] = [x for x in done.stdout.splitlines() if x.startswith("would run: ")]
    script = Path(line.rsplit(" ", 1)[1])
    assert script.is_relative_to(venv) and script.name == "slurm.sh" and script.is_file()
