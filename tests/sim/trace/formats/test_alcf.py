"""The ALCF DIM_JOB_COMPOSITE CSV reader."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from sim.trace.columns import TraceError
from sim.trace.formats.alcf import parse_alcf_csv, read_alcf_csv

HEADER = ("JOB_NAME,COBALT_JOBID,QUEUED_TIMESTAMP,START_TIMESTAMP,END_TIMESTAMP,"
          "USERNAME_GENID,PROJECT_NAME_GENID,QUEUE_NAME,WALLTIME_SECONDS,RUNTIME_SECONDS,"
          "NODES_USED,NODES_REQUESTED,EXIT_STATUS")
ROW = ('"run, a",4242,2022-01-01 00:00:00,2022-01-01 01:00:00,2022-01-01 03:00:30,'
       "77,1234,default,7200,7230.0,128,128,0")


def parse(text: str):
    return parse_alcf_csv(enumerate(text.splitlines(), start=1), source="djc.csv")


def test_a_row_maps_to_the_swf_fields() -> None:
    table = parse(HEADER + "\n" + ROW + "\n")
    job = table.job(0)
    assert job.id == 4242
    assert job.submit == 1640995200.0  # 2022-01-01 00:00:00 UTC
    assert job.wait == 3600.0
    assert job.runtime == 7230.0
    assert (job.nodes, job.requested_nodes, job.walltime) == (128, 128, 7200.0)
    assert (job.user, job.project, job.queue, job.status) == ("77", "1234", "default", 1)


def test_runtime_falls_back_to_runtime_seconds_and_blanks_are_unknown() -> None:
    row = 'x,1,2022-01-01 00:00:00,,,,,,3600,1800,,64,3'
    job = parse(HEADER + "\n" + row).job(0)
    assert job.runtime == 1800.0 and job.wait is None
    assert job.nodes is None and job.requested_nodes == 64 and job.size == 64
    assert job.project is None and job.status == 0


def test_quoted_newlines_keep_line_numbers_right() -> None:
    text = HEADER + '\n"two\nlines",1,2022-01-01 00:00:00,,,,,,3600,1800,1,1,0\n' + \
        "y,2,yesterday,,,,,,3600,1800,1,1,0\n"
    with pytest.raises(TraceError) as caught:
        parse(text)
    assert str(caught.value) == ("djc.csv, line 4: column QUEUED_TIMESTAMP should be a "
                                 "timestamp like '2022-01-01 07:14:14', found 'yesterday'.")


@pytest.mark.parametrize(("text", "message"), [
    ("A,B\n1,2\n", "djc.csv, line 1: the CSV header lacks the column(s) QUEUED_TIMESTAMP, "
                   "WALLTIME_SECONDS, NODES_USED or NODES_REQUESTED, END_TIMESTAMP or "
                   "RUNTIME_SECONDS."),
    (HEADER + "\n" + ROW + ",extra", "djc.csv, line 2: expected 13 comma-separated fields, "
                                     "found 14."),
    (HEADER + "\n" + ROW.replace(",7200,", ",two hours,"),
     "djc.csv, line 2: column WALLTIME_SECONDS should be a number, found 'two hours'."),
    ("", "djc.csv, line 1: the file is empty; expected an ALCF CSV header."),
])
def test_bad_input_names_file_and_line(text: str, message: str) -> None:
    with pytest.raises(TraceError) as caught:
        parse(text)
    assert str(caught.value) == message


def test_gzipped_csv_is_read(tmp_path: Path) -> None:
    path = tmp_path / "djc.csv.gz"
    path.write_bytes(gzip.compress((HEADER + "\n" + ROW + "\n").encode()))
    assert read_alcf_csv(path).job(0).id == 4242
