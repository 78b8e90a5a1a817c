"""PBS Professional / OpenPBS accounting logs, written as the server writes them: Q, S, R, D
and E records, a running job, a job deleted while queued, a requeued job, an array."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from sim.engine.core import simulate
from sim.trace.loader import TraceError, detect_format, load_trace

T0 = 1709287200  # 03/01/2024 10:00:00 UTC

SAMPLES = Path(__file__).parents[1] / "samples"
LOG = (SAMPLES / "pbs_20240301").read_text()
"""A day of a PBS Pro server's accounting file (server_priv/accounting/20240301), kept as a
file because its records are as long as the server writes them."""


def write(tmp_path: Path, text: str, name: str = "20240301") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_end_records_are_the_jobs_and_the_rest_is_counted(tmp_path: Path) -> None:
    path = write(tmp_path, LOG)
    assert detect_format(path) == "pbs"
    trace = load_trace(path, nodes=8)
    assert trace.format == "pbs" and trace.unit == "nodes"
    assert trace.notes == (
        "skipped 1 job-array summary records (their subjobs are the jobs)",
        "counted 1 earlier runs of requeued jobs (their E record is the last run)",
        "found 1 jobs still running when the log ends (no E record)",
        "found 1 jobs deleted while queued (no E record)",
    )
    jobs = {j.id: j for j in trace}
    first = jobs[2001]
    assert (first.submit, first.wait, first.runtime, first.nodes) == (T0, 5, 3600, 2)
    assert (first.walltime, first.status, first.project, first.queue) == (
        7200, 1, "proj1", "workq")
    # the requeued job: its last run, from its first qtime
    requeued = jobs[2004]
    assert (requeued.submit, requeued.wait, requeued.runtime) == (T0 + 240, 1260, 7200)
    assert requeued.project is None  # PBS's default project is no project
    # the array subjob: no nodect, one chunk in its select; failed with status 1
    (subjob,) = [j for j in trace if j.id not in (2001, 2004)]
    assert (subjob.nodes, subjob.runtime, subjob.status) == (1, 300, 0)
    assert trace.report.renumbered_ids == 1


def test_processors_come_from_ncpus(tmp_path: Path) -> None:
    trace = load_trace(write(tmp_path, LOG), unit="processors", procs=256)
    assert sorted(int(j.nodes) for j in trace) == [8, 32, 128]


def test_a_schedule_from_pbs_gzipped(tmp_path: Path) -> None:
    path = tmp_path / "20240301.gz"
    path.write_bytes(gzip.compress(LOG.encode()))
    # On 2 nodes: 2001 (2 nodes) runs 0-3600; 2004 (1 node) waits for it; the subjob (1
    # node, submitted 300) starts with it at 3600, as both fit.
    trace = load_trace(path, nodes=2)
    starts = {o.id: o.start - T0 for o in simulate(trace, policy="easy").outcomes}
    assert starts[2001] == 0 and starts[2004] == 3600
    assert sorted(starts.values()) == [0, 3600, 3600]


def test_bad_records_are_one_sentence(tmp_path: Path) -> None:
    bad = write(tmp_path, LOG.replace("Resource_List.walltime=02:00:00 session=4242",
                                      "Resource_List.walltime=2h session=4242"))
    with pytest.raises(TraceError, match=r"line 10: Resource_List.walltime should be a "
                                         r"duration like 01:00:00, found '2h'"):
        load_trace(bad)
    garbage = write(tmp_path, LOG + "not a record\n", "x")
    with pytest.raises(TraceError, match=r"line 15: expected a PBS accounting record"):
        load_trace(garbage)
