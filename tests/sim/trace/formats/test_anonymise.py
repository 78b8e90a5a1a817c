"""``metaq trace convert`` anonymises by default, as the Parallel Workloads Archive does: no
user, group, account, queue or partition name of the input appears in the SWF it writes;
``--keep-names`` keeps them."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from metaq_py.cli import app
from sim.trace.columns import TEXT_COLUMNS, JobTable
from sim.trace.formats.anonymise import anonymise
from sim.trace.formats.pbs import parse_pbs
from sim.trace.formats.sacct import parse_sacct
from sim.trace.formats.textio import numbered_lines

SAMPLES = Path(__file__).parents[1] / "samples"
def read_sacct(path: str) -> tuple[JobTable, tuple[str, ...]]:
    return parse_sacct(numbered_lines(path), source=path)


def read_pbs(path: str) -> tuple[JobTable, tuple[str, ...]]:
    return parse_pbs(numbered_lines(path), source=path)


SITE_LOGS = [("sacct.txt", read_sacct), ("sacct_array_het.txt", read_sacct),
             ("pbs_20240301", read_pbs)]


def names_in(table: JobTable) -> set[str]:
    """Every identity label the reader found in a log."""
    return {str(v) for c in TEXT_COLUMNS for v in getattr(table, c) if v is not None}


@pytest.mark.parametrize(("sample", "read"), SITE_LOGS)
def test_no_name_of_the_input_appears_in_the_output(tmp_path: Path, sample: str,
                                                    read: object) -> None:
    source = tmp_path / f"site-{sample}"  # a name of its own, to find it in the output
    source.write_text((SAMPLES / sample).read_text())
    table, _ = read(str(source))  # type: ignore[operator]
    names = names_in(table)
    assert {"alice", "proj1"} <= names or {"alice"} <= names  # the log does hold names
    target = tmp_path / "out.swf"
    result = CliRunner().invoke(app, ["trace", "convert", str(source), str(target),
                                      "--nodes", "64"])
    assert result.exit_code == 0, result.output
    text = target.read_text()
    words = set(re.findall(r"[\w.-]+", text))
    assert not names & words, f"names left in the output: {names & words}"
    assert source.name not in text
    assert "anonymised" in text
    kept = tmp_path / "kept.swf"
    result = CliRunner().invoke(app, ["trace", "convert", str(source), str(kept),
                                      "--nodes", "64", "--keep-names"])
    assert result.exit_code == 0, result.output
    assert "'alice'" in kept.read_text() and source.name in kept.read_text()


def test_labels_are_numbered_by_first_appearance_column_by_column() -> None:
    table = JobTable.from_columns(user=["bob", "al", None, "bob"], queue=["q", "q", "r", None],
                                  submit=[1.0, 2.0, 3.0, 4.0])
    out = anonymise(table)
    assert list(out.user) == ["1", "2", None, "1"]
    assert list(out.queue) == ["1", "1", "2", None]
    assert np.array_equal(out.submit, table.submit)
