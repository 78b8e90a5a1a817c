"""The same jobs written as SWF, as sacct output and as a PBS accounting log give the same
trace and the same schedule; and ``metaq trace convert`` writes SWF that reads back the same."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from metaq_py.cli import app
from sim.engine.core import simulate
from sim.trace.loader import load_trace

T0 = 1_709_287_200
NODES = 8
Job = tuple[int, int, int, int]  # submit offset, runtime, nodes, walltime


def hms(seconds: int) -> str:
    days, rest = divmod(seconds, 86400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


def iso(epoch: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch))


def as_swf(jobs: list[Job]) -> str:
    lines = [f"; MaxNodes: {NODES}", f"; MaxProcs: {NODES}"]
    for i, (s, r, n, w) in enumerate(jobs, start=1):
        lines.append(f"{i} {T0 + s} 0 {r} {n} -1 -1 {n} {w} -1 1 -1 -1 -1 -1 -1 -1 -1")
    return "\n".join(lines) + "\n"


def as_sacct(jobs: list[Job]) -> str:
    lines = ["JobIDRaw|Submit|Start|End|Elapsed|Timelimit|NNodes|AllocCPUS|State|Account|"
             "User|Partition"]
    for i, (s, r, n, w) in enumerate(jobs, start=1):
        start = T0 + s
        lines.append(f"{i}|{iso(T0 + s)}|{iso(start)}|{iso(start + r)}|{hms(r)}|{hms(w)}|{n}|"
                     f"{n * 4}|COMPLETED|p|u|normal")
        lines.append(f"{i}.batch|{iso(start)}|{iso(start)}|{iso(start + r)}|{hms(r)}||1|4|"
                     "COMPLETED|p||")
    return "\n".join(lines) + "\n"


def as_pbs(jobs: list[Job]) -> str:
    lines = []
    for i, (s, r, n, w) in enumerate(jobs, start=1):
        start = T0 + s
        stamp = time.strftime("%m/%d/%Y %H:%M:%S", time.gmtime(start + r))
        lines.append(f"{stamp};E;{i}.pbs01;user=u group=g queue=workq ctime={T0 + s} "
                     f"qtime={T0 + s} etime={T0 + s} start={start} "
                     f"Resource_List.nodect={n} Resource_List.select={n}:ncpus=4 "
                     f"Resource_List.walltime={hms(w)} end={start + r} Exit_status=0 "
                     f"resources_used.walltime={hms(r)} run_count=1")
    return "\n".join(lines) + "\n"


def schedule(path: Path) -> list[tuple[int, float, float]]:
    trace = load_trace(path, nodes=NODES)
    return sorted((o.id, o.start, o.end) for o in simulate(trace, policy="easy").outcomes)


jobs_strategy = st.lists(
    st.tuples(st.integers(0, 20_000), st.integers(1, 9_000), st.integers(1, NODES),
              st.integers(1, 100_000)),
    min_size=1, max_size=12)


@settings(max_examples=40, deadline=None)
@given(jobs_strategy)
def test_swf_sacct_and_pbs_give_the_same_schedule(jobs: list[Job]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        paths = []
        for name, text in (("t.swf", as_swf(jobs)), ("t.sacct", as_sacct(jobs)),
                           ("20240301", as_pbs(jobs))):
            (folder / name).write_text(text)
            paths.append(folder / name)
        swf, sacct, pbs = (schedule(p) for p in paths)
        assert swf == sacct == pbs
        assert len(swf) == len(jobs)
        converted = folder / "converted.swf"
        result = CliRunner().invoke(app, ["trace", "convert", str(paths[1]), str(converted),
                                          "--nodes", str(NODES)])
        assert result.exit_code == 0, result.output
        first = min(s for s, *_ in jobs)
        shifted = [(i, start - T0 - first, end - T0 - first) for i, start, end in sacct]
        assert schedule(converted) == shifted


def test_convert_states_the_machine_and_refuses_bad_input(tmp_path: Path) -> None:
    source = tmp_path / "t.sacct"
    source.write_text(as_sacct([(0, 100, 2, 200), (10, 50, 8, 100)]))
    target = tmp_path / "out.swf.gz"
    result = CliRunner().invoke(app, ["trace", "convert", str(source), str(target),
                                      "--nodes", "8"])
    assert result.exit_code == 0, result.output
    trace = load_trace(target)
    assert trace.header is not None and trace.header.unix_start_time == T0
    assert (trace.header.max_nodes, trace.header.max_procs) == (8, 8)
    assert trace.unit == "nodes" and trace.nodes == 8 and len(trace) == 2
    assert "Wrote 2 jobs (sacct, 8 nodes)" in result.output
    missing = CliRunner().invoke(app, ["trace", "convert", str(tmp_path / "nope"),
                                       str(tmp_path / "x.swf")])
    assert missing.exit_code == 1 and "no trace file at" in missing.output
    assert not (tmp_path / "x.swf").exists()


def test_a_processor_trace_converts_with_both_header_sizes(tmp_path: Path) -> None:
    source = tmp_path / "smp.swf"
    source.write_text("; MaxNodes: 4\n; MaxProcs: 16\n"
                      "1 100 0 50 6 -1 -1 6 60 -1 1 -1 -1 -1 -1 -1 -1 -1\n"
                      "2 110 0 50 12 -1 -1 12 60 -1 1 -1 -1 -1 -1 -1 -1 -1\n")
    for unit, sizes, header in (("processors", [6, 12], (4, 16)), ("nodes", [2, 3], (4, 4))):
        target = tmp_path / f"{unit}.swf"
        result = CliRunner().invoke(app, ["trace", "convert", str(source), str(target),
                                          "--unit", unit])
        assert result.exit_code == 0, result.output
        back = load_trace(target)
        assert back.header is not None
        assert (back.header.max_nodes, back.header.max_procs) == header
        assert list(back.jobs.nodes) == sizes and list(back.jobs.submit) == [0.0, 10.0]
        assert back.unit == unit and back.header.unix_start_time == 100
    bad = CliRunner().invoke(app, ["trace", "convert", str(source), str(tmp_path / "x.swf"),
                                   "--unit", "cores"])
    assert bad.exit_code == 1 and "--unit must be processors or nodes" in bad.output


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("0123456789|:-T.;=/ _[]+EDSRQabcNUnknow\n")),
               max_size=300))
def test_garbage_logs_parse_or_raise_one_trace_error(text: str) -> None:
    from sim.trace.columns import TraceError
    from sim.trace.formats.pbs import parse_pbs
    from sim.trace.formats.sacct import parse_sacct

    lines = list(enumerate(text.split("\n"), start=1))
    for parse in (parse_sacct, parse_pbs):
        try:
            table, notes = parse(lines, source="log")
        except TraceError as error:
            assert str(error).startswith("log") and str(error).endswith(".")
        else:
            assert all(isinstance(note, str) for note in notes)
            assert len(table) <= len(lines)
