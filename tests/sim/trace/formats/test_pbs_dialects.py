"""The three dialects of PBS accounting, each record written as its server writes it: PBS Pro's
``select`` chunks, Torque's ``nodes=N:ppn=M`` with ``unique_node_count`` and
``total_execution_slots``, and Cray PBS's ``mppwidth`` / ``mppnppn`` / ``mppdepth`` (whose
``nodect`` is the MOM node). Sizes, disagreements and mixed logs."""

from __future__ import annotations

import math
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.trace.formats.pbs import parse_pbs
from sim.trace.loader import load_trace

QTIME = 1491390300


def _stamp(epoch: int) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%m/%d/%Y %H:%M:%S")


def pbspro(job: int, chunks: int, ncpus: int, *, hosts: int | None = None,
           nodect: int | None = None) -> str:
    """An E record as PBS Pro 2022 writes it (one line)."""
    hosts = chunks if hosts is None else hosts
    nodect = chunks if nodect is None else nodect
    exec_host = "+".join(f"n{h:03d}/0*{ncpus}" for h in range(hosts))
    vnode = "+".join(f"(n{h:03d}:ncpus={ncpus})" for h in range(hosts))
    start, end = QTIME + 60, QTIME + 60 + 3600
    return (f"{_stamp(end)};E;{job}.pbs01;user=alice group=physics project=_pbs_project_default "
            f"jobname=run.sh queue=workq ctime={QTIME} qtime={QTIME} etime={QTIME} "
            f"start={start} exec_host={exec_host} exec_vnode={vnode} "
            f"Resource_List.ncpus={chunks * ncpus} Resource_List.nodect={nodect} "
            f"Resource_List.place=scatter Resource_List.select={chunks}:ncpus={ncpus} "
            f"Resource_List.walltime=02:00:00 session=4242 end={end} Exit_status=0 "
            f"resources_used.cpupercent=99 resources_used.cput=01:00:00 "
            f"resources_used.mem=1024kb resources_used.ncpus={chunks * ncpus} "
            f"resources_used.vmem=2048kb resources_used.walltime=01:00:00 run_count=1")


def torque(job: int, nodes: int, ppn: int, *, unique: int | None = None,
           slots: int | None = None) -> str:
    """An E record as Torque 6 writes it (one line)."""
    unique = nodes if unique is None else unique
    slots = nodes * ppn if slots is None else slots
    exec_host = "+".join(f"node{h:04d}/0-{ppn - 1}" for h in range(unique))
    start, end = QTIME + 7, QTIME + 7 + 104
    return (f"{_stamp(end)};E;{job}.master23.cluster;user=bob group=chem jobname=STDIN "
            f"queue=short ctime={QTIME} qtime={QTIME} etime={QTIME} start={start} "
            f"owner=bob@login01 exec_host={exec_host} Resource_List.nodes={nodes}:ppn={ppn} "
            f"Resource_List.vmem=1gb Resource_List.nodect={nodes} "
            f"Resource_List.neednodes={nodes}:ppn={ppn} Resource_List.nice=0 "
            f"Resource_List.walltime=01:00:00 session=15273 total_execution_slots={slots} "
            f"unique_node_count={unique} end={end} Exit_status=0 resources_used.cput=0 "
            f"resources_used.energy_used=0 resources_used.mem=55048kb "
            f"resources_used.vmem=92488kb resources_used.walltime=00:01:44")


def cray(job: int, width: int, nppn: int | None, depth: int | None = None) -> str:
    """An E record as PBS Pro on a Cray XT (ALPS) writes it: nodect, select and exec_host
    name the MOM node."""
    start, end = QTIME + 29, QTIME + 29 + 182
    width_fields = f"Resource_List.mppwidth={width} "
    if nppn is not None:
        width_fields = f"Resource_List.mppnppn={nppn} " + width_fields
    if depth is not None:
        width_fields = f"Resource_List.mppdepth={depth} " + width_fields
    return (f"{_stamp(end)};E;{job}.sdb;user=carol group=-default- account=n02-chem "
            f"jobname=xdggj000 queue=par:n32c2_20m ctime={QTIME} qtime={QTIME} etime={QTIME} "
            f"start={start} exec_host=nid00004/13 exec_vnode=(mom01:ncpus=1) "
            f"Resource_List.mpparch=XT {width_fields}Resource_List.ncpus=1 "
            f"Resource_List.nodect=1 Resource_List.place=pack Resource_List.select=1 "
            f"Resource_List.walltime=00:20:00 session=11260 alt_id=1065 end={end} Exit_status=0 "
            f"resources_used.cpupercent=0 resources_used.cput=00:00:06 "
            f"resources_used.mem=4200kb resources_used.ncpus=1 resources_used.vmem=15360kb "
            f"resources_used.walltime=00:03:02")


def parse(records: list[str], **options: object) -> tuple[list[int], tuple[str, ...]]:
    table, notes = parse_pbs(enumerate(records, start=1), source="log", **options)  # type: ignore[arg-type]
    return [int(n) for n in table.nodes], notes


@settings(max_examples=60, deadline=None)
@given(chunks=st.integers(1, 64), ncpus=st.integers(1, 128))
def test_pbspro_size_is_its_chunks(chunks: int, ncpus: int) -> None:
    assert parse([pbspro(1, chunks, ncpus)]) == ([chunks], ())
    assert parse([pbspro(1, chunks, ncpus)], processors=True)[0] == [chunks * ncpus]


@settings(max_examples=60, deadline=None)
@given(nodes=st.integers(1, 64), ppn=st.integers(1, 64))
def test_torque_size_is_its_unique_nodes_and_slots(nodes: int, ppn: int) -> None:
    assert parse([torque(1, nodes, ppn)]) == ([nodes], ())
    assert parse([torque(1, nodes, ppn)], processors=True) == ([nodes * ppn], ())


@settings(max_examples=60, deadline=None)
@given(width=st.integers(1, 20000), nppn=st.integers(1, 64), depth=st.integers(1, 8))
def test_cray_size_is_its_width_over_pes_per_node_never_the_mom_node(
        width: int, nppn: int, depth: int) -> None:
    assert parse([cray(1, width, nppn, depth)]) == ([math.ceil(width / nppn)], ())
    assert parse([cray(1, width, nppn, depth)], processors=True)[0] == [width * depth]
    # without mppnppn, the cores per node place the PEs and their threads
    nodes, notes = parse([cray(1, width, None, depth)], procs_per_node=32)
    assert nodes == [math.ceil(width * depth / 32)] and notes == ()


def test_a_real_shaped_cray_job_of_64_pes_at_2_per_node_is_32_nodes() -> None:
    assert parse([cray(102, 64, 2)]) == ([32], ())


def test_cray_without_mppnppn_or_cores_per_node_is_counted_and_dropped(tmp_path: Path) -> None:
    log = tmp_path / "20080812"
    log.write_text("\n".join([cray(1, 64, None), cray(2, 64, 2)]) + "\n")
    trace = load_trace(log, nodes=64)
    assert [j.nodes for j in trace] == [32]
    assert ("found 1 Cray PBS records without mppnppn and no --procs-per-node to place "
            "mppwidth x mppdepth on (size unknown)") in trace.notes
    assert [j.nodes for j in load_trace(log, nodes=64, procs_per_node=16)] == [4, 32]


def test_disagreeing_fields_are_counted() -> None:
    records = [
        torque(1, 4, 8, unique=2),          # two virtual nodes per host
        torque(2, 4, 8, slots=16),          # fewer slots than asked
        torque(3, 2, 2),
        pbspro(4, 4, 8, hosts=2),           # place=pack: four chunks on two hosts
    ]
    nodes, notes = parse(records[:3])
    assert nodes == [2, 4, 2]
    assert notes == ("found 1 Torque records whose unique_node_count differs from their "
                     "nodect (unique_node_count kept)",)
    slots, notes = parse(records[:3], processors=True)
    assert slots == [32, 16, 4]
    assert notes == ("found 1 Torque records whose total_execution_slots differs from nodes "
                     "x ppn (total_execution_slots kept)",)
    nodes, notes = parse([records[3], pbspro(5, 3, 8, nodect=2)])
    assert nodes == [2, 3]
    assert notes == (
        "found 1 PBS Pro records whose nodect differs from their select's chunk count "
        "(nodect kept)",
        "found 2 PBS Pro records that ran on a different number of hosts (exec_host) than "
        "their nodect (the hosts kept)",
    )


def test_a_log_of_mixed_dialects_is_read_as_its_most_common_one() -> None:
    records = [torque(1, 2, 4), torque(2, 3, 4), cray(3, 64, 2), pbspro(4, 2, 8),
               torque(5, 1, 1)]
    nodes, notes = parse(records)
    assert nodes == [2, 3, 1]
    assert notes[0] == ("the log mixes PBS dialects (3 Torque, 1 Cray PBS, 1 PBS Pro records): "
                        "read as Torque, the most common, and skipped the other 2 records")


def test_a_record_of_no_dialect_is_read_by_its_nodect() -> None:
    plain = ("06/06/2005 14:07:17;E;407.ign1.zeta2.org;user=guest group=guest jobname=STDIN "
             "queue=batch ctime=1118087915 qtime=1118087915 etime=1118087915 start=1118088366 "
             "exec_host=ign1.zeta2.org/0 Resource_List.nodect=1 Resource_List.walltime=00:16:40 "
             "session=6365 end=1118088437 Exit_status=265 resources_used.cput=00:00:00 "
             "resources_used.mem=3068kb resources_used.vmem=13120kb "
             "resources_used.walltime=00:01:11")
    # Torque 2's own sample: Resource_List.nodes makes it Torque; without, it fits any
    assert parse([plain]) == ([1], ())
    assert parse([plain.replace("Resource_List.nodect=1", "Resource_List.nodect=1 "
                                "Resource_List.nodes=1")]) == ([1], ())
