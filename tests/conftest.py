"""Fixtures shared by the whole test suite.

``fake_bin``
    A directory put first on ``PATH`` in which a test creates fake batch-system commands
    (``squeue``, ``qstat``, ...), HyperQueue style: real executables that print recorded
    replies and log how they were called.
``slurm``
    The local four-node SLURM started by ``tests/slurm/start.sh`` (nodes ``n1``..``n4``,
    partition ``debug``), with helpers to submit jobs and wait for them. Tests using it skip,
    with the reason, when that cluster is not up; in CI (``CI=true``) they fail instead.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.capability import missing

REPO = Path(__file__).resolve().parent.parent

# --------------------------------------------------------------------------- the checkout's code

# Every process a test starts runs this checkout's code, never an installed copy: `python -m
# metaq_py`, the `metaq` console script, and batch jobs that inherit the environment (sbatch
# passes it on). PYTHONPATH puts the checkout before site-packages, and a `metaq` first on PATH
# runs the interpreter that runs the tests. Without this, a subprocess test passes against the
# installed package while the checkout is broken (tests/test_checkout.py checks it holds).
_SHIM = Path(os.environ.get("TMPDIR", "/tmp")) / f"metaq-test-bin-{os.getpid()}"
_SHIM.mkdir(exist_ok=True)
(_SHIM / "metaq").write_text(
    f'#!/bin/sh\nexec "{sys.executable}" -m metaq_py "$@"\n'
)
(_SHIM / "metaq").chmod(0o755)
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(REPO), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
)
os.environ["PATH"] = f"{_SHIM}{os.pathsep}{os.environ.get('PATH', '')}"
CHECKOUT_BIN = _SHIM
"""The folder, first on ``PATH``, whose ``metaq`` runs this checkout's code."""

# --------------------------------------------------------------------------- fake commands

_FAKE_TEMPLATE = """#!{python}
# Fake {name!r} written by the fake_bin fixture: logs its arguments, then answers with the
# first recorded reply whose `when` arguments all appear in its own.
import json, sys
here = {directory!r}
with open(here + "/.{name}.calls", "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
with open(here + "/.{name}.replies") as f:
    replies = json.load(f)
for reply in replies:
    if all(arg in sys.argv[1:] for arg in reply["when"]):
        sys.stdout.write(reply["stdout"])
        sys.stderr.write(reply["stderr"])
        sys.exit(reply["exit_code"])
sys.stderr.write("fake {name}: no reply recorded for " + repr(sys.argv[1:]) + "\\n")
sys.exit(99)
"""


@dataclass
class FakeBin:
    """Fake commands in :attr:`directory`, which is first on ``PATH`` during the test."""

    directory: Path

    def command(
        self,
        name: str,
        *,
        stdout: str = "",
        stderr: str = "",
        exit_code: int = 0,
        when: Sequence[str] = (),
    ) -> Path:
        """Record a reply of the fake command ``name`` (created on first use).

        The fake answers each call with the first reply, in recording order, whose ``when``
        arguments all appear among its own; a reply without ``when`` matches any call.
        """
        replies_file = self.directory / f".{name}.replies"
        replies = json.loads(replies_file.read_text()) if replies_file.exists() else []
        replies.append(
            {"when": list(when), "stdout": stdout, "stderr": stderr, "exit_code": exit_code}
        )
        replies_file.write_text(json.dumps(replies))
        path = self.directory / name
        if not path.exists():
            source = _FAKE_TEMPLATE.format(
                python=sys.executable, name=name, directory=str(self.directory)
            )
            path.write_text(source)
            path.chmod(0o755)
        return path

    def script(self, name: str, source: str) -> Path:
        """A fake command ``name`` with its own logic: ``source`` is a whole executable file."""
        path = self.directory / name
        path.write_text(source)
        path.chmod(0o755)
        return path

    def calls(self, name: str) -> list[list[str]]:
        """The argument lists the fake command ``name`` was called with, in order."""
        log = self.directory / f".{name}.calls"
        if not log.exists():
            return []
        return [json.loads(line) for line in log.read_text().splitlines()]


@pytest.fixture
def fake_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeBin:
    """An empty directory of fake commands, first on ``PATH`` for this test."""
    directory = tmp_path / "fake-bin"
    directory.mkdir()
    monkeypatch.setenv("PATH", f"{directory}{os.pathsep}{os.environ.get('PATH', '')}")
    return FakeBin(directory)


# --------------------------------------------------------------------------- local SLURM

SLURM_NODES = ("n1", "n2", "n3", "n4")
_READY = {"idle", "mix", "alloc", "comp"}
_START_HINT = "start it with: bash tests/slurm/install.sh && bash tests/slurm/start.sh"


@dataclass(frozen=True)
class JobEnd:
    """How a SLURM job ended: its final state (``COMPLETED``, ``TIMEOUT``, ...) and exit code."""

    state: str
    exit_code: int
    signal: int


SLURM_END_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "OUT_OF_MEMORY",
        "BOOT_FAIL",
        "DEADLINE",
    }
)
"""The job states SLURM documents as final. Any other state (PENDING, RUNNING, CONFIGURING,
COMPLETING, SIGNALING, STAGE_OUT, SUSPENDED, REQUEUED, RESIZING, ...) passes, so a wait that
took "anything but a few" as the end raced SLURM while it delivered ``--signal``."""


@dataclass(frozen=True)
class SlurmCluster:
    """The local test cluster, with helpers for submitting jobs and waiting for them."""

    nodes: tuple[str, ...] = SLURM_NODES
    partition: str = "debug"

    def sbatch(
        self,
        *args: str | os.PathLike[str],
        cwd: Path,
        env: dict[str, str] | None = None,
    ) -> str:
        """Submit a job (``sbatch --parsable ARGS`` in ``cwd``) and return its id.

        ``env`` adds variables to the environment sbatch passes on to the job.
        """
        done = subprocess.run(
            ["sbatch", "--parsable", *map(str, args)],
            cwd=cwd,
            env={**os.environ, **(env or {})},
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if done.returncode != 0:
            raise AssertionError(f"sbatch {list(map(str, args))} failed: {done.stderr.strip()}")
        return done.stdout.strip().split(";")[0]

    def job_fields(self, jobid: str) -> dict[str, str]:
        """``scontrol show job`` as a dict, or ``{}`` once SLURM has forgotten the job."""
        done = subprocess.run(
            ["scontrol", "show", "job", "-o", jobid],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if done.returncode != 0:
            return {}
        return dict(re.findall(r"(\w+)=(\S*)", done.stdout))

    def wait(self, jobid: str, *, timeout: float) -> JobEnd:
        """Wait until job ``jobid`` has ended (at most ``timeout`` seconds) and say how."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            fields = self.job_fields(jobid)
            state = fields.get("JobState", "")
            if not fields:
                raise AssertionError(f"SLURM forgot job {jobid} before its end was seen")
            if state in SLURM_END_STATES:
                code, _, sig = fields.get("ExitCode", "0:0").partition(":")
                return JobEnd(state, int(code), int(sig or 0))
            time.sleep(0.25)
        subprocess.run(["scancel", jobid], check=False)
        raise AssertionError(f"SLURM job {jobid} did not end within {timeout:g} s")

    def wait_started(self, jobid: str, *, timeout: float) -> dict[str, str]:
        """Wait until job ``jobid`` has started and return its ``scontrol show job`` fields.

        A short job may pass through RUNNING between two polls and be COMPLETING or COMPLETED
        when it is next seen, so any state past PENDING counts: ``StartTime`` is then set.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            fields = self.job_fields(jobid)
            if fields.get("JobState", "PENDING") not in {"PENDING", "REQUEUED"}:
                return fields
            time.sleep(0.1)
        subprocess.run(["scancel", jobid], check=False)
        raise AssertionError(f"SLURM job {jobid} did not start within {timeout:g} s")


def _slurm_problem() -> str | None:
    """Why the local SLURM cannot be used, or ``None`` when it is up."""
    for command in ("sbatch", "srun", "squeue", "scontrol", "sinfo"):
        if shutil.which(command) is None:
            return f"`{command}` is not installed; {_START_HINT}"
    try:
        ping = subprocess.run(
            ["scontrol", "ping"], capture_output=True, text=True, timeout=10, check=False
        )
        if "UP" not in ping.stdout:
            return f"slurmctld does not answer `scontrol ping`; {_START_HINT}"
        info = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%N %t"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"the SLURM controller does not answer within 10 s; {_START_HINT}"
    states = dict(line.split() for line in info.stdout.splitlines() if len(line.split()) == 2)
    unready = [n for n in SLURM_NODES if states.get(n, "missing").rstrip("*~#") not in _READY]
    if unready:
        shown = ", ".join(f"{n} {states.get(n, 'missing')}" for n in unready)
        return f"the local SLURM nodes are not ready ({shown}); {_START_HINT}"
    return None


@pytest.fixture(scope="session")
def slurm() -> SlurmCluster:
    """The local four-node SLURM; when it is not up, the test skips saying why, and fails in
    CI (``CI=true``), whose ``.ci/run`` starts it: a SLURM that did not start is a failure
    there, never a quiet skip (tests/capability.py)."""
    problem = _slurm_problem()
    if problem is not None:
        missing(f"local SLURM not available: {problem}")
    return SlurmCluster()
