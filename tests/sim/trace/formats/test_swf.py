"""The SWF reader and writer: round trips of random records, and clear errors on bad input."""

from __future__ import annotations

import gzip
import io
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.trace.columns import JobTable, TraceError, TraceJob
from sim.trace.formats.swf import SwfHeader, parse_swf, read_swf, write_swf


def numbered(text: str) -> list[tuple[int, str]]:
    return list(enumerate(text.splitlines(), start=1))


def parse(text: str) -> tuple[SwfHeader, JobTable]:
    return parse_swf(numbered(text), source="t.swf")


RECORD = "7 100 5 3600 128 -1 -1 256 7200 -1 1 12 3 -1 2 -1 -1 0"

times = st.one_of(st.none(), st.integers(0, 10**10).map(float),
                  st.floats(0, 1e9, allow_nan=False, allow_infinity=False))
counts = st.one_of(st.none(), st.integers(0, 10**6))
labels = st.one_of(st.none(), st.integers(0, 10**6).map(str))
jobs = st.builds(
    TraceJob, id=st.integers(0, 10**9), submit=times, wait=times, runtime=times, nodes=counts,
    cpu_time=times, memory=times, requested_nodes=counts, walltime=times,
    requested_memory=times, status=st.one_of(st.none(), st.sampled_from([0, 1, 5])),
    user=labels, group=labels, executable=labels, queue=labels, partition=labels,
    preceding_job=counts, think_time=times, project=st.none(),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(jobs, max_size=20))
def test_random_records_round_trip_through_the_writer(records: list[TraceJob]) -> None:
    stream = io.StringIO()
    header = SwfHeader(max_nodes=4360, entries=(("MaxNodes", "4360"), ("Note", "x: y")))
    write_swf(JobTable.from_jobs(records), stream, header=header)
    parsed_header, table = parse(stream.getvalue())
    assert list(table) == records
    assert parsed_header.max_nodes == 4360
    assert parsed_header.entries == header.entries


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.sampled_from(list("0123456789 -.;:eaxN\t\n")), max_size=200))
def test_garbage_either_parses_or_raises_trace_error(text: str) -> None:
    try:
        _, table = parse(text)
    except TraceError as error:
        assert str(error).startswith("t.swf, line ")
        assert str(error).endswith(".")
    else:
        data_lines = [ln for ln in text.splitlines() if ln.strip() and ln.strip()[0] != ";"]
        assert len(table) == len(data_lines)


def test_header_is_parsed_and_unknown_values_become_none() -> None:
    header, table = parse("; UnixStartTime: 1000\n; MaxNodes: 4360\n; MaxProcs: 8720\n"
                          "; free text without a key\n\n" + RECORD + "\n")
    assert (header.unix_start_time, header.max_nodes, header.max_procs) == (1000, 4360, 8720)
    assert header.machine_nodes == 4360
    job = table.job(0)
    assert job == TraceJob(id=7, submit=100.0, wait=5.0, runtime=3600.0, nodes=128,
                           requested_nodes=256, walltime=7200.0, status=1, user="12",
                           group="3", queue="2", think_time=0.0)
    assert math.isnan(table.cpu_time[0])


def test_machine_nodes_falls_back_to_max_procs() -> None:
    header, _ = parse("; MaxProcs: 64\n")
    assert header.machine_nodes == 64


@pytest.mark.parametrize(("text", "message"), [
    (RECORD + "\n7 100 5", "t.swf, line 2: expected 18 fields in an SWF record, found 3."),
    (RECORD.replace("3600", "1h", 1),
     "t.swf, line 1: field 4 (run time) should be a number, found '1h'."),
    (RECORD.replace("3600", "nan", 1),
     "t.swf, line 1: field 4 (run time) should be a number, found 'nan'."),
    (RECORD.replace(" 128 ", " 12.5 ", 1),
     "t.swf, line 1: field 5 (allocated processors) should be a whole number, found '12.5'."),
    ("; MaxNodes: many\n",
     "t.swf, line 1: header entry MaxNodes should be a whole number, found 'many'."),
])
def test_bad_lines_get_one_sentence_naming_file_and_line(text: str, message: str) -> None:
    with pytest.raises(TraceError) as caught:
        parse(text)
    assert str(caught.value) == message


def test_gzip_is_read_directly_and_truncation_is_reported(tmp_path: Path) -> None:
    body = "; MaxNodes: 8\n" + "\n".join(
        f"{i} {i * 10} 0 50 4 -1 -1 4 60 -1 1 -1 -1 -1 -1 -1 -1 -1" for i in range(1, 3001))
    path = tmp_path / "t.swf.gz"
    path.write_bytes(gzip.compress(body.encode()))
    header, table = read_swf(path)
    assert header.max_nodes == 8 and len(table) == 3000
    cut = tmp_path / "cut.swf.gz"
    cut.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    with pytest.raises(TraceError) as caught:
        read_swf(cut)
    assert str(caught.value).startswith(f"{cut}, line ")
    assert "truncated or corrupt" in str(caught.value)


def test_writer_codes_text_labels_and_keeps_them_in_notes() -> None:
    table = JobTable.from_jobs([
        TraceJob(id=1, submit=0.0, runtime=5.0, nodes=1, walltime=9.0, queue="default",
                 project="proj-a"),
        TraceJob(id=2, submit=1.5, runtime=5.0, nodes=1, walltime=9.0, queue="debug"),
        TraceJob(id=3, submit=2.0, runtime=5.0, nodes=1, walltime=9.0, queue="default"),
    ])
    stream = io.StringIO()
    write_swf(table, stream)
    text = stream.getvalue()
    assert "; Note: queue 1 is 'default'" in text and "; Note: queue 2 is 'debug'" in text
    assert "; Note: project of job 1 is 'proj-a'" in text
    _, back = parse(text)
    assert list(back.queue) == ["1", "2", "1"]
    assert list(back.submit) == [0.0, 1.5, 2.0]
