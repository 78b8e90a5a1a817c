"""A task's checked bytes are what runs (issue 28, finding 3): from a sealed in-memory copy
on the batch node, and on another node (a wrapped SLURM step) only when the file read there
has the digest the runner checked."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from metaq_py.launch.checked import PROGRAM_FD, sealed, verified
from metaq_py.launch.spawn import spawn

SCRIPT = b"#!/bin/sh\necho ran \"$0\"\n"


def test_the_sealed_copy_runs_whatever_the_file_becomes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    fd = sealed(SCRIPT)
    script = tmp_path / "t.sh"
    script.write_bytes(b"#!/bin/sh\necho swapped\n")  # what the path holds at the start
    with open(out, "wb") as f:
        pid = spawn([str(script)], output=f.fileno(), env={"PATH": "/bin:/usr/bin"},
                    program=fd)
    os.close(fd)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert out.read_text() == f"ran /proc/self/fd/{PROGRAM_FD}\n"


def test_the_copy_is_sealed() -> None:
    fd = sealed(SCRIPT)
    try:
        with pytest.raises(OSError):
            os.write(os.open(f"/proc/self/fd/{fd}", os.O_WRONLY), b"x")
    finally:
        os.close(fd)


def test_a_file_changed_after_its_check_is_not_run_elsewhere(tmp_path: Path) -> None:
    script = tmp_path / "t.sh"
    script.write_bytes(SCRIPT)
    digest = hashlib.sha256(SCRIPT).hexdigest()
    os.close(verified(str(script), digest, limit=1 << 20))  # as checked: it runs
    script.write_bytes(SCRIPT + b"echo more\n")
    with pytest.raises(OSError, match="changed after the runner checked it"):
        verified(str(script), digest, limit=1 << 20)
    env = {**os.environ, "METAQ_NNODES": "1"}
    done = subprocess.run([sys.executable, "-m", "metaq_py.launch", "--sha256", digest,
                           str(tmp_path / "step"), str(script)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 127 and "changed after the runner checked it" in done.stderr
    assert "more" not in done.stdout


def test_the_wrapper_runs_the_checked_file(tmp_path: Path) -> None:
    script = tmp_path / "t.sh"
    script.write_bytes(SCRIPT)
    script.chmod(0o755)
    env = {**os.environ, "METAQ_NNODES": "1"}
    done = subprocess.run([sys.executable, "-m", "metaq_py.launch", "--sha256",
                           hashlib.sha256(SCRIPT).hexdigest(), str(tmp_path / "step"),
                           str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"ran /proc/self/fd/{PROGRAM_FD}\n"
