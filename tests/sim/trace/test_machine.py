"""SWF as the standard means it: sizes count processors, the machine is MaxProcs processors,
and ``unit="nodes"`` converts sizes to whole nodes. Schedules worked out by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.engine.core import simulate
from sim.trace.loader import load_trace
from tests.sim_traces import real_trace


def record(job: int, submit: int, runtime: int, procs: int, walltime: int) -> str:
    return f"{job} {submit} -1 {runtime} {procs} -1 -1 {procs} {walltime} -1 1 " \
           "-1 -1 -1 -1 -1 -1 -1"


def write(tmp_path: Path, header: str, rows: list[str]) -> Path:
    path = tmp_path / "t.swf"
    path.write_text(header + "\n".join(rows) + "\n")
    return path


# 4 nodes of 4 processors. Three jobs at t=0, 100 s each: 6, 6 and 4 processors.
DISAGREE = "; MaxNodes: 4\n; MaxProcs: 16\n"
PACKED = [record(1, 0, 100, 6, 100), record(2, 0, 100, 6, 100), record(3, 0, 100, 4, 100)]


def starts(trace) -> dict[int, float]:
    return {o.id: o.start for o in simulate(trace, policy="easy").outcomes}


def test_sizes_count_processors_and_the_machine_is_max_procs(tmp_path: Path) -> None:
    trace = load_trace(write(tmp_path, DISAGREE, PACKED))
    assert trace.unit == "processors" and trace.nodes == 16
    assert trace.machine is not None and trace.machine.procs_per_node == 4
    assert trace.machine.source == "SWF header MaxProcs: 16, MaxNodes: 4"
    assert list(trace.jobs.nodes) == [6, 6, 4]
    # 6 + 6 + 4 = 16 processors: all three start at once.
    assert starts(trace) == {1: 0, 2: 0, 3: 0}


def test_unit_nodes_rounds_sizes_up_to_whole_nodes(tmp_path: Path) -> None:
    trace = load_trace(write(tmp_path, DISAGREE, PACKED), unit="nodes")
    assert trace.unit == "nodes" and trace.nodes == 4
    assert list(trace.jobs.nodes) == [2, 2, 1]
    # 2 + 2 nodes fill the machine; the 4-processor job takes a node of its own at t=100.
    assert starts(trace) == {1: 0, 2: 0, 3: 100}


def test_a_job_larger_than_max_nodes_but_within_max_procs_is_kept(tmp_path: Path) -> None:
    # The old reading (machine = MaxNodes = 4) would have dropped both jobs.
    rows = [record(1, 0, 100, 12, 200), record(2, 10, 100, 8, 200), record(3, 20, 50, 3, 50)]
    trace = load_trace(write(tmp_path, DISAGREE, rows))
    assert trace.report.oversize_dropped == 0 and len(trace) == 3
    # J1 takes 12 of 16; J2 (8) is the head, its shadow J1's walltime end at 200; J3 (3
    # processors, ends by 70) backfills at 20 on the 4 free ones; J1 really ends at 100.
    assert starts(trace) == {1: 0, 2: 100, 3: 20}


def test_procs_per_node_when_max_procs_is_not_a_whole_multiple(tmp_path: Path) -> None:
    path = write(tmp_path, "; MaxNodes: 3\n; MaxProcs: 16\n", PACKED)
    with pytest.raises(ValueError, match=r"MaxProcs 16, MaxNodes 3.*--procs-per-node"):
        load_trace(path, unit="nodes")
    trace = load_trace(path, unit="nodes", procs_per_node=4)
    assert trace.nodes == 3 and list(trace.jobs.nodes) == [2, 2, 1]
    # 2 + 2 > 3 nodes: J2 waits for J1; J3 (1 node) fits next to J1 at t=0.
    assert starts(trace) == {1: 0, 2: 100, 3: 0}


def test_machine_size_given_in_nodes_or_processors(tmp_path: Path) -> None:
    path = write(tmp_path, DISAGREE, PACKED)
    assert load_trace(path, nodes=2).nodes == 8  # 2 nodes of 4 processors
    assert load_trace(path, procs=12).nodes == 12
    assert load_trace(path, unit="nodes", nodes=3).nodes == 3
    with pytest.raises(ValueError, match="not both"):
        load_trace(path, nodes=2, procs=8)
    only_procs = write(tmp_path, "; MaxProcs: 16\n", PACKED)
    with pytest.raises(ValueError, match="give the machine as --procs"):
        load_trace(only_procs, nodes=2)


def test_one_processor_per_node_is_described_in_nodes(tmp_path: Path) -> None:
    trace = load_trace(write(tmp_path, "; MaxNodes: 16\n; MaxProcs: 16\n", PACKED))
    assert trace.unit == "nodes" and trace.nodes == 16
    assert trace.report.lines() == []


def test_theta_keeps_its_machine_and_unit() -> None:
    trace = load_trace(real_trace("theta_2022.swf.gz"))
    assert trace.unit == "nodes" and trace.nodes == 4360 and len(trace) == 23_911
    assert trace.machine is not None and trace.machine.procs_per_node == 1
