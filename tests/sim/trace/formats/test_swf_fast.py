"""The fast SWF path (numpy's C parser) reads exactly what the line-by-line parser reads, and
hands everything else to it, so errors still name their line."""

from __future__ import annotations

import gzip
import io
import math
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.trace.columns import COLUMNS, JobTable, TraceError
from sim.trace.formats.swf import SwfHeader, fast_swf, parse_swf, read_swf, write_swf
from tests.sim.trace.formats.test_swf import jobs


def same_tables(a: JobTable, b: JobTable) -> bool:
    for name in COLUMNS:
        x, y = getattr(a, name), getattr(b, name)
        if x.dtype != y.dtype or len(x) != len(y):
            return False
        for u, v in zip(x.tolist(), y.tolist(), strict=True):
            both_nan = isinstance(u, float) and isinstance(v, float) and math.isnan(u) \
                and math.isnan(v)
            if not both_nan and u != v:
                return False
    return True


def slow(text: str) -> tuple[SwfHeader, JobTable]:
    return parse_swf(enumerate(text.splitlines(), start=1), source="t.swf")


@settings(max_examples=80, deadline=None)
@given(st.lists(jobs, max_size=25), st.booleans())
def test_fast_and_slow_read_the_same_records(records, zipped: bool) -> None:
    stream = io.StringIO()
    header = SwfHeader(max_nodes=64, max_procs=256, entries=(
        ("MaxNodes", "64"), ("MaxProcs", "256"), ("TimeZoneString", "UTC")))
    write_swf(JobTable.from_jobs(records), stream, header=header)
    text = stream.getvalue()
    data = gzip.compress(text.encode()) if zipped else text.encode()
    fast = fast_swf(data, source="t.swf")
    assert fast is not None
    expected = slow(text)
    assert fast[0] == expected[0]
    assert same_tables(fast[1], expected[1])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.sampled_from(list("0123456789 -.;:eaxN\t\n\r")), max_size=200))
def test_read_swf_on_any_text_agrees_with_the_line_parser(text: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.swf"
        path.write_bytes(text.encode())
        try:
            expected = parse_swf(
                enumerate(io.StringIO(text, newline=None).read().split("\n"), start=1),
                source=str(path))
        except TraceError as error:
            try:
                read_swf(path)
            except TraceError as again:
                assert str(again) == str(error)
            else:
                raise AssertionError(f"read_swf accepted what parse_swf refuses: {error}")
            return
        got = read_swf(path)
        assert got[0] == expected[0] and same_tables(got[1], expected[1])


def test_comments_between_records_and_a_semicolon_inside_one(tmp_path: Path) -> None:
    record = "1 0 -1 10 4 -1 -1 4 20 -1 1 3 -1 -1 2 -1 -1 -1"
    text = f"; MaxProcs: 8\n{record}\n; Note: a comment in the middle\n{record}\n"
    header, table = fast_swf(text.encode(), source="t") or (None, None)
    assert header is not None and table is not None and len(table) == 2
    assert header.entries[-1] == ("Note", "a comment in the middle")
    assert list(table.user) == ["3", "3"] and np.all(table.nodes == 4)
    assert fast_swf(f"{record} ; trailing\n".encode(), source="t") is None
    bad = tmp_path / "bad.swf"
    bad.write_text(f"{record}\n{record} ; trailing\n")
    try:
        read_swf(bad)
    except TraceError as error:
        assert str(error).startswith(f"{bad}, line 2: expected 18 fields")
    else:
        raise AssertionError("a record with a ';' inside was accepted")
