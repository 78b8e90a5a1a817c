"""SLURM ``sacct --parsable2`` output, written as sacct prints it: steps, arrays, het jobs,
requeued runs, running and pending jobs, Unknown/None times, UNLIMITED limits."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.engine.core import simulate
from sim.trace.loader import TraceError, detect_format, load_trace

HEADER = "JobIDRaw|Submit|Start|End|Elapsed|Timelimit|NNodes|AllocCPUS|State|Account|User|" \
         "Partition\n"
SAMPLES = Path(__file__).parents[1] / "samples"
BODY = (SAMPLES / "sacct_noheader.txt").read_text()
"""``sacct --parsable2 --allusers --duplicates --noheader -o JobIDRaw,Submit,Start,End,Elapsed,
Timelimit,NNodes,AllocCPUS,State,Account,User,Partition`` (``sacct.txt`` is the same with its
header)."""
ARRAY_AND_HET = (SAMPLES / "sacct_array_het.txt").read_text()
"""The same columns with ``JobID`` instead of ``JobIDRaw``: array members and a het job."""
T0 = 1709287200.0  # 2024-03-01T10:00:00 read as UTC
SAMPLE = HEADER + BODY


def write(tmp_path: Path, text: str, name: str = "sacct.txt") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_documented_command_output_is_read_and_counted(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER + BODY)
    assert detect_format(path) == "sacct"
    trace = load_trace(path, nodes=16)
    assert trace.format == "sacct" and trace.unit == "nodes" and trace.nodes == 16
    assert trace.notes == (
        "skipped 6 job-step lines (such as 123.batch), which are parts of jobs",
        "folded 1 earlier runs of requeued jobs into their last run",
        "found 1 jobs still running when the log was written (no runtime yet)",
        "found 3 jobs that never started (pending, or cancelled while pending)",
    )
    assert trace.report.records == 9 and trace.report.no_runtime == 4
    jobs = {int(j.id): j for j in trace}
    assert sorted(jobs) == [1001, 1002, 1006, 1007, 1008]
    assert (jobs[1001].submit, jobs[1001].runtime, jobs[1001].nodes) == (T0, 3600, 2)
    assert jobs[1001].walltime == 7200 and jobs[1001].project == "proj1"
    assert jobs[1001].queue == "normal" and jobs[1001].user == "alice"
    assert jobs[1002].runtime == jobs[1002].walltime == 26 * 3600 and jobs[1002].status == 0
    # the requeued job is its last run, submitted when the user first submitted it
    assert (jobs[1007].submit, jobs[1007].runtime, jobs[1007].wait) == (
        T0 + 600, 7200, 35 * 60)  # submitted 10:10, last run started 10:45
    assert jobs[1008].status == 5 and jobs[1008].runtime == 1800  # cancelled while running
    # Partition_Limit: no walltime asked; the debug queue asked for none, so the trace's
    # largest request applies
    assert jobs[1006].walltime == 26 * 3600
    assert "gave 1 jobs with no requested walltime their queue's limit as walltime" in \
        trace.report.lines()


def test_noheader_output_reads_the_same(tmp_path: Path) -> None:
    with_header = load_trace(SAMPLES / "sacct.txt", nodes=16)
    assert (SAMPLES / "sacct.txt").read_text() == HEADER + BODY
    without = load_trace(write(tmp_path, BODY, "b.txt"), nodes=16)
    assert detect_format(tmp_path / "b.txt") == "sacct"
    assert [j for j in with_header] == [j for j in without]


def test_processors_are_alloc_cpus(tmp_path: Path) -> None:
    trace = load_trace(write(tmp_path, HEADER + BODY), unit="processors", procs=512)
    assert trace.unit == "processors"
    assert {int(j.id): j.nodes for j in trace} == {1001: 64, 1002: 128, 1006: 32, 1007: 64,
                                                   1008: 32}


def test_array_members_and_het_jobs(tmp_path: Path) -> None:
    trace = load_trace(write(tmp_path, ARRAY_AND_HET), nodes=8)
    assert trace.notes == (
        "skipped 2 job-step lines (such as 123.batch), which are parts of jobs",
        "merged 1 heterogeneous-job components into their jobs",
        "found 1 jobs that never started (pending, or cancelled while pending)",
    )
    by_size = sorted((j.nodes, j.runtime) for j in trace)
    assert by_size == [(1, 300.0), (1, 600.0), (5, 1800.0)]  # the het job: 2 + 3 nodes
    assert trace.report.renumbered_ids == 2  # array members have no numeric id
    assert 2020 in {int(j.id) for j in trace}


def test_a_schedule_from_sacct(tmp_path: Path) -> None:
    # On 4 nodes, EASY on requested walltimes. 10:00 1001 (2 nodes, asks 2 h, runs 1 h)
    # starts. 10:05 1002 (4 nodes) is the head, its shadow 1001's requested end, 12:00.
    # 1006 (asks the 26 h limit) and 1007 (asks 4 h) would outlive it; 1008 (1 node, asks
    # 1 h) backfills at 10:11. 11:00 1001 ends and 1002 starts, for 26 h; 1006 and 1007
    # start together when it ends.
    trace = load_trace(write(tmp_path, HEADER + BODY), nodes=4)
    starts = {o.id: o.start - T0 for o in simulate(trace, policy="easy").outcomes}
    assert starts == {1001: 0, 1008: 660, 1002: 3600, 1006: 3600 + 26 * 3600,
                      1007: 3600 + 26 * 3600}


def test_bad_sacct_lines_are_one_sentence(tmp_path: Path) -> None:
    bad = write(tmp_path, HEADER + "1|2024-03-01T10:00:00|x|y|00:01:00|01:00:00|1|1|"
                "COMPLETED|a|b|c\n")
    with pytest.raises(TraceError, match=r"line 2: column Start should be a time, found 'x'"):
        load_trace(bad)
    short = write(tmp_path, HEADER + "1|2024-03-01T10:00:00|x\n" + SAMPLE.splitlines()[1] + "\n",
                  "short.txt")
    with pytest.raises(TraceError, match=r"line 2: expected 12 '\|'-separated fields as in the "
                                         r"header, found 3"):
        load_trace(short)


def test_a_dump_cut_mid_line_skips_its_last_line_and_says_so(tmp_path: Path) -> None:
    whole = SAMPLE.rstrip("\n")
    cut = write(tmp_path, whole[:whole.rindex("|2024-03-01T10:") + 8], "cut.txt")
    lines = whole.count("\n") + 1
    trace = load_trace(cut, nodes=64)
    assert trace.notes[0] == (f"the dump ends cut short: its last line (line {lines}) has 2 of "
                              "12 fields, and was skipped (1 line)")
    from sim.trace.formats.sacct import parse_sacct
    from sim.trace.formats.textio import numbered_lines

    def read(path: Path) -> int:
        return len(parse_sacct(numbered_lines(path), source=str(path))[0])

    assert read(cut) == read(write(tmp_path, whole + "\n", "all.txt")) - 1


def test_a_changed_field_order_without_header_says_what_order_is_needed(
        tmp_path: Path) -> None:
    rows = [line.split("|") for line in SAMPLE.splitlines()[1:] if line]
    swapped = ["|".join([r[0], r[8], *r[1:8], *r[9:]]) for r in rows]  # State moved forward
    path = write(tmp_path, "\n".join(swapped) + "\n", "swapped.txt")
    with pytest.raises(TraceError, match=r"line 1: column Submit should be a time, found "
                                         r"'COMPLETED' \(without a header the columns must be "
                                         r"JobIDRaw\|Submit\|"):
        load_trace(path)
    headed = write(tmp_path, "|".join(["JobIDRaw", "State", *HEADER.strip().split("|")[1:8],
                                       *HEADER.strip().split("|")[9:]]) + "\n"
                   + "\n".join(swapped) + "\n", "headed.txt")
    assert len(load_trace(headed, nodes=64)) == len(load_trace(write(tmp_path, SAMPLE,
                                                                     "plain.txt"), nodes=64))
