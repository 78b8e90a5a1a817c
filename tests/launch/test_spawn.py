"""Starting a script with ``posix_spawn``: what it inherits and what it does not.

Each test starts a real program and reads what it saw from its own ``/proc`` entry or its
output, as a task would.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from metaq_py.launch import spawn as spawn_module
from metaq_py.launch.spawn import spawn

REPORT = f"""#!{sys.executable}
# Whether the descriptor named in its argument is open, its session, and what its stdin
# holds.
import os, sys
try:
    os.fstat(int(sys.argv[1]))
    print("open")
except (OSError, IndexError, ValueError):
    print("closed")
print(os.getsid(0))
print(repr(sys.stdin.read()))
"""


def run(tmp_path: Path, command: list[str], env: dict[str, str] | None = None) -> list[str]:
    """Start ``command`` with its output in a log, reap it, and return the log's lines."""
    log = tmp_path / "out.log"
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        pid = spawn(command, output=fd, env=env if env is not None else dict(os.environ))
    finally:
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return log.read_text().splitlines()


@pytest.fixture
def report(tmp_path: Path) -> Path:
    path = tmp_path / "report.sh"
    path.write_text(REPORT)
    path.chmod(0o755)
    return path


def test_the_script_gets_only_stdin_stdout_and_stderr(tmp_path: Path, report: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # An inheritable descriptor of the runner, as a library that ignores PEP 446 makes one,
    # made longer than SEAL_EVERY before the start.
    r, w = os.pipe()
    os.set_inheritable(r, True)
    monkeypatch.setattr(spawn_module, "_sealed_at", time.monotonic() - spawn_module.SEAL_EVERY)
    try:
        assert run(tmp_path, [str(report), str(r)])[0] == "closed"
        assert run(tmp_path, [str(report), "2"])[0] == "open"
        assert not os.get_inheritable(r)  # sealed in the runner: no later start gets it
    finally:
        os.close(r)
        os.close(w)


def test_the_script_leads_a_session_of_its_own(tmp_path: Path, report: Path) -> None:
    lines = run(tmp_path, [str(report)])
    assert int(lines[1]) not in (os.getsid(0), 0)


def test_ignored_signals_are_back_at_their_defaults(tmp_path: Path) -> None:
    assert signal.getsignal(signal.SIGPIPE) is signal.SIG_IGN  # as Python leaves it
    # A shell, not Python, which would ignore SIGPIPE again itself.
    line, = run(tmp_path, ["/bin/sh", "-c", "grep SigIgn /proc/$$/status"])
    ignored = int(line.split()[1], 16)
    assert not ignored & (1 << (signal.SIGPIPE - 1)), line
    assert not ignored & (1 << (signal.SIGXFSZ - 1)), line


def test_stdin_is_empty(tmp_path: Path, report: Path) -> None:
    assert run(tmp_path, [str(report)])[2] == "''"


def test_a_program_named_without_a_folder_is_found_on_path(tmp_path: Path) -> None:
    tool = tmp_path / "bin" / "fake-srun"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\necho wrapped \"$@\"\n")
    tool.chmod(0o755)
    env = {**os.environ, "PATH": f"{tool.parent}:{os.environ['PATH']}"}
    old = os.environ["PATH"]
    os.environ["PATH"] = env["PATH"]  # posix_spawnp looks on the runner's own PATH
    try:
        assert run(tmp_path, ["fake-srun", "a", "b"], env) == ["wrapped a b"]
    finally:
        os.environ["PATH"] = old


@pytest.mark.parametrize(("body", "error"), [
    (None, FileNotFoundError),  # no such file
    ("echo no interpreter line\n", OSError),  # ENOEXEC
])
def test_a_refused_start_raises_and_names_the_program(tmp_path: Path, body: str | None,
                                                       error: type[OSError]) -> None:
    path = tmp_path / "bad.sh"
    if body is not None:
        path.write_text(body)
        path.chmod(0o755)
    with pytest.raises(error) as caught:
        run(tmp_path, [str(path)])
    assert caught.value.filename == str(path)


def test_output_on_a_low_descriptor_still_reaches_the_script(tmp_path: Path) -> None:
    # A runner started with stdout and stderr closed opens its log as descriptor 1: the copy
    # onto 1 must not leave it closed in the script.
    log = tmp_path / "low.log"
    code = f"""
import os, sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
from metaq_py.launch import spawn as spawn_module
from metaq_py.launch.spawn import spawn
os.close(1); os.close(2)
fd = os.open({str(log)!r}, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
assert fd == 1, fd
pid = spawn(["/bin/sh", "-c", "echo out; echo err >&2"], output=fd, env=dict(os.environ))
_, status = os.waitpid(pid, 0)
os._exit(os.waitstatus_to_exitcode(status))
"""
    done = subprocess.run([sys.executable, "-c", code], timeout=60, check=False)
    assert done.returncode == 0
    assert log.read_text().split() == ["out", "err"]
