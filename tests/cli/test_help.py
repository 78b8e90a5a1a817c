"""``metaq --help``: every command's summary is one whole sentence, shown whole."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest

from metaq_py.cli import COMMANDS, MODULES, app
from tests.imports import imported_by


def summaries() -> dict[str, str]:
    """Each command's name and the first paragraph of its docstring."""
    out = {}
    for command in app.registered_commands:
        assert command.callback is not None
        name = command.name or command.callback.__name__.rstrip("_").replace("_", "-")
        doc = (command.callback.__doc__ or "").strip()
        out[name] = doc.split("\n\n")[0]
    return out


@pytest.mark.parametrize(("name", "summary"), sorted(summaries().items()))
def test_a_commands_summary_is_one_line_and_a_whole_sentence(name: str, summary: str) -> None:
    assert "\n" not in summary, f"{name}: the first paragraph runs onto a second line"
    assert summary[:1].isupper(), summary
    assert summary.endswith(".") and summary.count(". ") == 0, summary


def test_the_command_list_shows_every_summary_whole() -> None:
    done = subprocess.run([sys.executable, "-m", "metaq_py", "--help"], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "COLUMNS": "300"})
    assert done.returncode == 0, done.stderr
    for summary in summaries().values():
        assert summary in done.stdout


def test_the_command_table_names_the_module_that_registers_each_command() -> None:
    registered = {
        (c.name or c.callback.__name__): c.callback.__module__.rsplit(".", 1)[-1]
        for c in app.registered_commands
        if c.callback is not None
    }
    groups = {
        g.name: g.typer_instance.registered_commands[0].callback.__module__.rsplit(".", 1)[-1]
        for g in app.registered_groups
        if g.typer_instance is not None and g.name is not None
    }
    assert {**registered, **groups} == COMMANDS
    assert set(COMMANDS.values()) == set(MODULES)


@pytest.mark.parametrize(("argv", "absent"), [
    (["status", "-q", "Q"], {"sim_commands", "experiment_commands", "alloc_commands",
                             "run_commands", "report_commands"}),
    (["simulate", "--help"], {"queue_commands", "run_commands", "alloc_commands"}),
])
def test_a_command_imports_only_its_own_module(
    tmp_path: Path, argv: list[str], absent: set[str]
) -> None:
    imported_by("init", "Q", cwd=tmp_path)
    imported = imported_by(*argv, cwd=tmp_path)
    assert f"metaq_py.cli.{COMMANDS[argv[0]]}" in imported
    assert imported.isdisjoint(f"metaq_py.cli.{m}" for m in absent)


WIDTH = 80


def _prose(help_text: str) -> list[list[str]]:
    """The paragraphs of a command's description in its ``--help``, as the lines shown: what
    comes between the usage line and the first panel."""
    lines = help_text.splitlines()
    start = next(i for i, line in enumerate(lines) if "Usage:" in line) + 1
    end = next(i for i, line in enumerate(lines) if line.startswith("╭"))
    paragraphs: list[list[str]] = [[]]
    for line in lines[start:end]:
        if line.strip():
            paragraphs[-1].append(line.strip())
        elif paragraphs[-1]:
            paragraphs.append([])
    return [p for p in paragraphs if p]


@pytest.mark.parametrize("argv", [[name] for name in sorted(summaries())]
                         + [["trace", "convert"]], ids=" ".join)
def test_no_help_text_is_wrapped_twice(argv: list[str]) -> None:
    """Each line of a description is as full as a greedy wrap at the terminal's width leaves
    it: no line ends where the next line's first word would still have fitted, as when the
    docstring's own line breaks are kept and then wrapped again."""
    from typer.testing import CliRunner

    done = CliRunner().invoke(app, [*argv, "--help"], env={"COLUMNS": str(WIDTH)})
    assert done.exit_code == 0, done.output
    text = done.output
    assert max(len(line) for line in text.splitlines()) <= WIDTH
    for paragraph in _prose(text):
        for line, after in itertools.pairwise(paragraph):
            assert len(line) + 1 + len(after.split()[0]) > WIDTH - 2, (line, after)


def test_the_twice_wrapped_check_sees_a_ragged_line() -> None:
    shown = "Usage: x\n\n This line ends early and\n the next one goes on.\n╭─ Options\n"
    [[line, after]] = _prose(shown)
    assert len(line) + 1 + len(after.split()[0]) <= WIDTH - 2
