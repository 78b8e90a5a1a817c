"""Every process a test starts runs the checkout under test, not an installed copy.

A subprocess test that ran the installed package would pass while the checkout is broken
(issue 35 found four). tests/conftest.py puts the checkout first on PYTHONPATH and a ``metaq``
that runs it first on PATH; these tests fail if either stops holding, from a folder outside the
checkout, as a batch job would run."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import CHECKOUT_BIN, REPO


def _loaded_from(line: str) -> Path:
    assert line.startswith("metaq-py "), line
    return Path(line.rsplit(" from ", 1)[1].strip())


def test_python_m_in_a_foreign_folder_runs_the_checkout(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "metaq_py", "--version"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, check=True)
    assert _loaded_from(done.stdout) == REPO / "metaq_py"


def test_the_metaq_command_on_path_runs_the_checkout(tmp_path: Path) -> None:
    metaq = shutil.which("metaq")
    assert metaq is not None and Path(metaq).parent == CHECKOUT_BIN
    done = subprocess.run(["metaq", "--version"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, check=True)
    assert _loaded_from(done.stdout) == REPO / "metaq_py"


def test_a_login_shell_path_still_finds_the_checkout(tmp_path: Path) -> None:
    # What a job script's `exec metaq run` sees: PATH as inherited, through /bin/sh.
    done = subprocess.run(["sh", "-c", "cd / && metaq --version"], capture_output=True,
                          text=True, timeout=60, check=True)
    assert _loaded_from(done.stdout) == REPO / "metaq_py"
