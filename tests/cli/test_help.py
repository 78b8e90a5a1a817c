"""``metaq --help``: every command's summary is one whole sentence, shown whole."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from metaq_py.cli import app


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
