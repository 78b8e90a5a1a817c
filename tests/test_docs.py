"""Docs that run: every example in README.md and docs/user-guide.md, as written, each on a
fresh queue on the local pretend cluster.

Each fenced block of those files is preceded by a marker, an HTML comment that says what the
block is and how it runs (no block goes without one, so a new example is a new test):

- ``<!-- doc: script -->``: a task script; written to a file as it is, it passes
  ``metaq check``.
- ``<!-- doc: shell [files=a.sh,b.sh] [setup="..."] [root=/project] [until-stopped] -->``:
  commands, run one after the other by ``bash -e`` in a fresh folder holding a queue
  ``queue`` (``METAQ_QUEUE`` unset) and, for ``files``, small task scripts of those names;
  ``setup`` is run first (what the example supposes was done before); absolute paths under
  ``root`` are taken to be under the test's folder; with ``until-stopped[=TEXT]``, a line
  that runs until Ctrl-C (``--watch``) is stopped once it has printed a line (one holding
  TEXT).
- ``<!-- doc: session ... -->``: as ``shell``, for lines written ``$ command`` with what it
  prints below (the printed lines are not run).
- ``<!-- doc: python [continues] -->``: run by Python in a fresh folder with a queue
  ``queue``; ``continues`` runs it after the block before it, in the same folder and namespace.
- ``<!-- doc: yaml -->``: ``metaq.yaml`` settings; a queue takes them (``metaq status``).
- ``<!-- doc: slurm [as shell] [here="-N 64=>-N 2|..."] -->``: commands that need a real
  batch system, run as ``shell`` blocks by ``tests/test_docs_slurm.py`` on the local SLURM,
  with the ``here`` replacements (sizes this four-node cluster has).
- ``<!-- doc: output run="..." [files=...] [setup="..."] [numbers] [host=NAME] [user=NAME]
  -->``: what a command prints: ``run`` is run by ``bash`` as ``shell`` blocks are (after
  ``setup``, beside ``files``), and what it prints, standard output then standard error, is
  the block (its ``$ command`` lines left out). Both are compared with the test's folder left
  out of paths and ISO 8601 times as ``<time>``; with ``numbers``, every number as ``0``
  (CPU times, process ids, Unix times); with ``host`` and ``user``, this machine's name and
  this user's as the block writes them.
- ``<!-- doc: output unchecked="REASON" -->``: what a command prints where it cannot be
  made here (a live allocation of the size shown, SLURM's own answer): the test skips it,
  saying REASON.
- ``<!-- doc: picture -->``, ``<!-- doc: synopsis -->``: a drawing of the folders, a
  command's synopsis: nothing to run.
- ``<!-- doc: install -->``: installs the package; ``tests/test_install.py`` runs it.
- ``<!-- doc: long -->``: runs for minutes or hours (a year of a machine's trace, the paper's
  whole study): checked as written instead, one command a line with flags its command has
  (the simulator's tests run such commands on small inputs).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.capability import missing
from tests.cli.test_queue import metaq

ROOT = Path(__file__).resolve().parents[1]
DOCS = (ROOT / "README.md", ROOT / "docs" / "user-guide.md")
KINDS = ("script", "shell", "session", "python", "yaml", "slurm", "output", "picture",
         "synopsis", "install", "long")
MARKER = re.compile(r"^<!-- doc: (\w+)(.*?) -->$")


@dataclass
class Block:
    """One fenced block of a doc, with its marker."""

    doc: Path
    line: int
    kind: str
    options: dict[str, str] = field(default_factory=dict)
    text: str = ""

    @property
    def id(self) -> str:
        return f"{self.doc.name}:{self.line}"


def blocks(doc: Path) -> list[Block]:
    """The fenced blocks of ``doc``, each with the marker on the line before it (a block
    without one has kind ``None`` and fails :func:`test_every_example_is_marked`)."""
    lines = doc.read_text().splitlines()
    out: list[Block] = []
    n = 0
    while n < len(lines):
        if lines[n].startswith("```"):
            marker = MARKER.match(lines[n - 1]) if n else None
            end = next(i for i in range(n + 1, len(lines)) if lines[i].startswith("```"))
            options: dict[str, str] = {}
            if marker:
                for word in shlex.split(marker.group(2)):
                    key, _, value = word.partition("=")
                    options[key] = value
            out.append(Block(doc, n + 1, marker.group(1) if marker else "", options,
                             "\n".join(lines[n + 1:end]) + "\n"))
            n = end
        n += 1
    return out


ALL = [b for doc in DOCS for b in blocks(doc)]


def of(*kinds: str) -> list[Block]:
    return [b for b in ALL if b.kind in kinds]


def test_every_example_is_marked() -> None:
    unmarked = [b.id for b in ALL if b.kind not in KINDS]
    assert not unmarked, f"these blocks have no <!-- doc: KIND --> marker: {unmarked}"
    assert len(of("script", "shell", "session", "python", "yaml")) >= 20


TASK = "#!/bin/sh\n#METAQ MIN_WC_TIME 1:00\necho \"$0 ran\"\n"


def scratch(tmp_path: Path, b: Block) -> dict[str, str]:
    """A fresh folder with a queue, the files ``b`` asks for, and the environment to run its
    commands in."""
    if "no-queue" not in b.options:
        assert metaq("init", str(tmp_path / "queue")).returncode == 0
    for name in filter(None, b.options.get("files", "").split(",")):
        (tmp_path / name).write_text(TASK + f"# {name}\n")  # each its own (submit refuses twins)
        (tmp_path / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("METAQ_QUEUE", "METAQ")}
    for name in [k for k in env if k.startswith(("SLURM_", "PBS_"))]:
        del env[name]  # the local pretend cluster, even inside a batch job
    return env


def _rooted(text: str, b: Block, tmp_path: Path) -> str:
    """``text`` with absolute paths under the block's ``root`` moved under ``tmp_path``, and
    the ``here`` replacements made (``-N 64=>-N 2|...``: a size this test cluster has)."""
    root = b.options.get("root")
    text = text.replace(root, str(tmp_path) + root) if root else text
    for pair in filter(None, b.options.get("here", "").split("|")):
        old, _, new = pair.partition("=>")
        text = text.replace(old, new)
    return text


def _commands(b: Block) -> list[str]:
    if b.kind == "session":
        return [line[2:] for line in b.text.splitlines() if line.startswith("$ ")]
    return [line for line in b.text.splitlines() if line.strip()]


@pytest.mark.parametrize("b", of("shell", "session"), ids=lambda b: b.id)
def test_commands_run_as_written(b: Block, tmp_path: Path) -> None:
    env = scratch(tmp_path, b)
    run_block(b, tmp_path, env)


def run_block(b: Block, tmp_path: Path, env: dict[str, str]) -> None:
    """Run the commands of ``b`` in ``tmp_path`` (made by :func:`scratch`), as a person
    types them, each to its end with exit status 0."""
    set_up(b, tmp_path, env)
    commands = [_rooted(c, b, tmp_path) for c in _commands(b)]
    cwd = ROOT if any("metaq_py/share" in c for c in commands) else tmp_path
    if "until-stopped" in b.options:
        for line in commands:
            if "--watch" in line:
                _until_stopped(line, cwd, env, b.options["until-stopped"])
                continue
            done = subprocess.run(["bash", "-ec", line], cwd=cwd, env=env,
                                  capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, f"{line!r} failed:\n{done.stdout}\n{done.stderr}"
        return
    # One shell for the block, as a person types it: what one line exports, the next sees.
    script = "\n".join(["set -e", *(f"echo '>>> {i}' >&2\n{c}" for i, c in
                                    enumerate(commands))])
    done = subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)
    failed = done.stderr.rpartition(">>> ")[2].split("\n", 1)[0]
    assert done.returncode == 0, (f"{commands[int(failed)]!r} failed:\n{done.stdout}\n"
                                  f"{done.stderr}")


def set_up(b: Block, tmp_path: Path, env: dict[str, str]) -> None:
    """Run the ``setup`` of ``b``: what its example supposes was done before."""
    setup = b.options.get("setup")
    if setup and "groupadd" in setup and os.geteuid() != 0:
        missing(f"{b.id} makes a group for its example, which only root may do")
    if setup:
        done = subprocess.run(["bash", "-ec", _rooted(setup, b, tmp_path)], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"setup: {done.stdout}\n{done.stderr}"


ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:\d\d|Z)?")


def normalised(text: str, b: Block, tmp_path: Path) -> str:
    """``text`` as :func:`test_output_is_what_its_command_prints` compares it (see the
    module text): no test folder, times as ``<time>``, and as the block's options say."""
    import getpass
    import socket

    text = text.replace(f"{tmp_path}/", "")
    if "host" in b.options:
        host = socket.gethostname().split(".")[0]
        text = re.sub(rf"\b{re.escape(host)}\b", b.options["host"], text)
    if "user" in b.options:
        text = re.sub(rf"\b{re.escape(getpass.getuser())}\b", b.options["user"], text)
    text = ISO_TIME.sub("<time>", text)
    if "numbers" in b.options:
        text = re.sub(r"\d+(?:\.\d+)?", "0", text)
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


@pytest.mark.parametrize("b", of("output"), ids=lambda b: b.id)
def test_output_is_what_its_command_prints(b: Block, tmp_path: Path) -> None:
    if "unchecked" in b.options:
        pytest.skip(f"{b.id} is not run: {b.options['unchecked']}")
    assert b.options.get("run"), f"{b.id}: an output block says run=\"...\" or unchecked=\"why\""
    env = scratch(tmp_path, b)
    set_up(b, tmp_path, env)
    done = subprocess.run(["bash", "-c", _rooted(b.options["run"], b, tmp_path)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    shown = "".join(line for line in b.text.splitlines(keepends=True)
                    if not line.startswith("$ "))
    assert normalised(done.stdout + done.stderr, b, tmp_path) == normalised(shown, b, tmp_path)


def _until_stopped(line: str, cwd: Path, env: dict[str, str], awaited: str) -> None:
    """Run ``line``, which runs until Ctrl-C, until it has printed a line holding
    ``awaited`` (any line, when empty); then Ctrl-C."""
    import signal

    proc = subprocess.Popen(["bash", "-c", f"exec {line}"], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        seen = []
        while not seen or awaited not in seen[-1]:
            seen.append(proc.stdout.readline())
            assert seen[-1] and not seen[-1].startswith("metaq: "), "".join(seen)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    assert proc.returncode in (0, 130, -signal.SIGINT), proc.returncode


@pytest.mark.parametrize("b", of("script"), ids=lambda b: b.id)
def test_task_scripts_pass_check(b: Block, tmp_path: Path) -> None:
    script = tmp_path / "task.sh"
    script.write_text(b.text)
    script.chmod(0o755)
    done = metaq("check", str(script))
    assert done.returncode == 0 and done.stdout.startswith(f"{script}: ok\n"), done.stderr


def _python_groups() -> list[list[Block]]:
    groups: list[list[Block]] = []
    for b in of("python"):
        if "continues" in b.options and groups:
            groups[-1].append(b)
        else:
            groups.append([b])
    return groups


@pytest.mark.parametrize("group", _python_groups(), ids=lambda g: "+".join(b.id for b in g))
def test_python_examples_run_in_order(group: list[Block], tmp_path: Path) -> None:
    env = scratch(tmp_path, group[0])
    program = "\n".join(b.text for b in group)
    done = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    listed = metaq("ls", "--json", "--queue", str(tmp_path / "queue"))
    assert listed.returncode == 0 and listed.stdout.strip() != "[]"


@pytest.mark.parametrize("b", of("yaml"), ids=lambda b: b.id)
def test_settings_are_taken(b: Block, tmp_path: Path) -> None:
    scratch(tmp_path, b)
    (tmp_path / "queue" / "metaq.yaml").write_text(b.text)
    done = metaq("status", "--queue", str(tmp_path / "queue"))
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("b", of("long"), ids=lambda b: b.id)
def test_long_examples_are_commands_metaq_takes(b: Block) -> None:
    """What is not run for its length is checked as written: each line is one command (an
    unquoted ``&`` would send it to the background), and every flag it gives is one of its
    subcommand's."""
    for line in _commands(b):
        words = shlex.split(line, comments=True)
        lexed = list(shlex.shlex(line.split("  #")[0], posix=True, punctuation_chars=True))
        assert not {"&", ";", "|", "&&", "||"} & set(lexed), f"{line!r} is not one command"
        assert words[0] == "metaq", line
        helped = metaq(words[1], "--help", env={**os.environ, "COLUMNS": "300"})
        assert helped.returncode == 0, helped.stderr
        for flag in (w.split("=")[0] for w in words[2:] if w.startswith("--")):
            assert flag in helped.stdout, f"{line!r}: metaq {words[1]} has no {flag}"
