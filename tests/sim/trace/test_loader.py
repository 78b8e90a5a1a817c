"""load_trace: format detection, cleaning applied the same way to every format, and the real
Theta 2022 trace when it is available."""

from __future__ import annotations

import gzip
import time
from pathlib import Path

import numpy as np
import pytest

from sim.trace.loader import TraceError, detect_format, load_trace
from tests.sim_traces import real_trace

SWF = """; UnixStartTime: 0
; MaxNodes: 16
3 300 0 100 4 -1 -1 4 50 -1 1 -1 -1 -1 -1 -1 -1 -1
1 100 0 100 0 -1 -1 4 200 -1 1 -1 -1 -1 -1 -1 -1 -1
2 200 0 -1 4 -1 -1 4 200 -1 5 -1 -1 -1 -1 -1 -1 -1
4 250 0 100 32 -1 -1 32 200 -1 1 -1 -1 -1 -1 -1 -1 -1
"""
CSV = """COBALT_JOBID,QUEUED_TIMESTAMP,START_TIMESTAMP,END_TIMESTAMP,WALLTIME_SECONDS,NODES_USED
3,1970-01-01 00:05:00,1970-01-01 00:05:00,1970-01-01 00:06:40,50,4
1,1970-01-01 00:01:40,1970-01-01 00:01:40,1970-01-01 00:03:20,200,0
2,1970-01-01 00:03:20,,,200,4
4,1970-01-01 00:04:10,1970-01-01 00:04:10,1970-01-01 00:05:50,200,32
"""


def test_both_formats_are_detected_and_cleaned_identically(tmp_path: Path) -> None:
    swf = tmp_path / "t.swf"
    swf.write_text(SWF)
    csv = tmp_path / "t.csv.gz"
    csv.write_bytes(gzip.compress(CSV.encode()))
    assert detect_format(swf) == "swf" and detect_format(csv) == "alcf-csv"
    a = load_trace(swf)
    b = load_trace(csv, nodes=16)
    for trace in (a, b):
        assert trace.nodes == 16 and len(trace) == 1
        assert trace.report.lines() == [
            "dropped 1 jobs with unknown runtime",
            "dropped 1 jobs with size <= 0",
            "dropped 1 jobs larger than the machine (16 nodes)",
            "capped 1 runtimes at their requested walltime",
        ]
        assert trace.jobs.job(0).runtime == 50.0
    assert a.header is not None and a.header.max_nodes == 16 and b.header is None


def test_machine_size_defaults_to_largest_job_without_a_header(tmp_path: Path) -> None:
    path = tmp_path / "t.swf"
    path.write_text(SWF.split("\n", 2)[2])
    trace = load_trace(path)
    assert trace.nodes == 32 and trace.report.oversize_dropped == 0


def test_unrecognised_content_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("\nhello world\n")
    with pytest.raises(TraceError, match=r"notes.txt, line 2: this is neither an SWF record"):
        load_trace(path)
    empty = tmp_path / "empty.swf"
    empty.write_text("")
    with pytest.raises(TraceError, match="the file is empty"):
        load_trace(empty)




def test_theta_2022_loads_fast_and_matches_its_provenance() -> None:
    path = real_trace("theta_2022.swf.gz")
    started = time.perf_counter()
    trace = load_trace(path)
    elapsed = time.perf_counter() - started
    assert elapsed < 1.5  # "well under a second" on an idle machine; slack for shared cores
    assert len(trace) == 23_911 and trace.nodes == 4360
    assert trace.header is not None and trace.header.max_nodes == 4360
    assert trace.report.records == 23_911 and trace.report.dropped == 0
    assert trace.report.capped_runtime == 6264
    assert trace.report.lines() == ["capped 6264 runtimes at their requested walltime"]
    assert np.all(trace.jobs.runtime <= trace.jobs.walltime)
    assert int(trace.jobs.nodes.min()) == 128 and int(trace.jobs.nodes.max()) == 4048
    assert 0.74 < trace.offered_load() < 0.77
