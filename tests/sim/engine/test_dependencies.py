"""Dependencies (SWF fields 17 and 18): a schedule worked out by hand, the same trace without
them, the cleaning of bad references, and the ordering invariant under hypothesis."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.engine.core import simulate
from sim.engine.failures import FailureModel, NodeFailures
from sim.trace.columns import JobTable
from sim.trace.formats.swf import write_swf
from sim.trace.loader import Trace, load_trace
from sim.workload.model import WorkloadModel, hybrid_workload

# A 4-processor machine. Fields: id submit wait runtime alloc cpu mem req-procs req-time
# req-mem status user group exe queue partition preceding think.
HAND = """\
; MaxProcs: 4
1   0 -1 100 4 -1 -1 4 100 -1 1 1 1 -1 1 -1 -1 -1
2  10 -1  50 2 -1 -1 2  50 -1 1 1 1 -1 1 -1  1 20
3  20 -1  30 2 -1 -1 2  30 -1 1 1 1 -1 1 -1 -1 -1
4  30 -1  10 1 -1 -1 1  10 -1 1 1 1 -1 1 -1  3 -1
6  40 -1   5 1 -1 -1 1   5 -1 1 1 1 -1 1 -1 99 -1
5 500 -1  10 4 -1 -1 4  10 -1 1 1 1 -1 1 -1  2  5
"""


def hand_trace(tmp_path: Path, *, dependencies: bool) -> Trace:
    path = tmp_path / "hand.swf"
    path.write_text(HAND)
    return load_trace(path, dependencies=dependencies)


def schedule(trace: Trace, *, dependencies: bool) -> dict[int, tuple[float, float, float]]:
    result = simulate(trace, policy="easy", dependencies=dependencies)
    return {o.id: (o.submit, o.start, o.end) for o in result.outcomes}  # type: ignore[misc]


def test_the_hand_worked_schedule_with_dependencies(tmp_path: Path) -> None:
    # t=0: J1 takes all 4 processors until 100.  J2 waits for J1: it arrives at
    # max(10, 100 + 20) = 120.  J3 (no dependency) and J6 (its preceding job 99 is not in the
    # trace, so it keeps its submit, 40) queue behind J1.  t=100: J3 (2) and J6 (1) start.
    # t=105: J6 ends.  t=120: J2 arrives and starts on the 2 free processors (ends 170).
    # t=130: J3 ends; J4 waits for J3 with think time -1 (unknown, so 0): it arrives at
    # max(30, 130) = 130 and starts (ends 140).  J5 waits for J2: max(500, 170 + 5) = 500.
    trace = hand_trace(tmp_path, dependencies=True)
    assert trace.report.dependents == 3
    assert trace.report.preceding_missing == 1
    assert schedule(trace, dependencies=True) == {
        1: (0, 0, 100), 2: (120, 120, 170), 3: (20, 100, 130), 4: (130, 130, 140),
        5: (500, 500, 510), 6: (40, 100, 105)}


def test_without_the_flag_the_fields_are_ignored(tmp_path: Path) -> None:
    # t=100: J1 ends; in queue order J2 (2) and J3 (2) start; J4 and J6 wait until J3 ends
    # at 130 (J2 holds 2 processors until 150).
    expected = {1: (0, 0, 100), 2: (10, 100, 150), 3: (20, 100, 130), 4: (30, 130, 140),
                5: (500, 500, 510), 6: (40, 130, 135)}
    plain = hand_trace(tmp_path, dependencies=False)
    assert plain.report.dependents == 0 and plain.report.lines() == []
    assert schedule(plain, dependencies=False) == expected
    # cleaning with dependencies but simulating without: still today's schedule
    assert schedule(hand_trace(tmp_path, dependencies=True), dependencies=False) == expected


def test_a_trace_without_preceding_jobs_gives_the_same_run_either_way(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    n = 300
    table = JobTable.from_columns(
        submit=np.sort(rng.uniform(0, 20_000, n)), runtime=rng.uniform(10, 2_000, n),
        walltime=np.full(n, 2_000.0), nodes=rng.integers(1, 9, n))
    path = tmp_path / "plain.swf"
    write_swf(table, path)
    trace = load_trace(path, procs=16)
    off = simulate(trace, policy="conservative")
    on = simulate(load_trace(path, procs=16, dependencies=True), policy="conservative",
                  dependencies=True)
    assert list(off.outcomes) == list(on.outcomes)


def test_cleaning_cuts_and_counts_bad_references(tmp_path: Path) -> None:
    # J2's preceding job is dropped (runtime 0), J3 names itself, J4 a later job, J5 a job
    # the file does not hold; J6 names J1, which is kept.
    text = "; MaxProcs: 4\n" + "\n".join(
        f"{i} {i * 10} -1 {runtime} 1 -1 -1 1 100 -1 1 1 1 -1 1 -1 {before} -1"
        for i, runtime, before in [(1, 50, -1), (7, 0, -1), (2, 50, 7), (3, 50, 3),
                                   (4, 50, 6), (5, 50, 42), (6, 50, 1)])
    path = tmp_path / "bad.swf"
    path.write_text(text + "\n")
    trace = load_trace(path, dependencies=True)
    report = trace.report
    assert (report.dependents, report.preceding_dropped, report.preceding_later,
            report.preceding_missing) == (1, 1, 2, 1)
    kept = dict(zip(trace.jobs.id.tolist(), trace.jobs.preceding_job.tolist(), strict=True))
    assert kept == {1: -1, 2: -1, 3: -1, 4: -1, 5: -1, 6: 1}
    assert any("dropped" in line and "own submit" in line for line in report.lines())
    assert report.to_dict()["preceding_later"] == 2


def test_a_hybrid_workload_refuses_dependencies(tmp_path: Path) -> None:
    trace = hand_trace(tmp_path, dependencies=True)
    workload = hybrid_workload(trace, WorkloadModel.for_workload("W1", seed=0))
    with pytest.raises(ValueError, match="plain trace"):
        simulate(workload, dependencies=True)


@st.composite
def dependent_traces(draw: st.DrawFn) -> JobTable:
    n = draw(st.integers(1, 25))
    submits = sorted(draw(st.lists(st.integers(0, 5_000), min_size=n, max_size=n)))
    runtimes = draw(st.lists(st.integers(1, 1_000), min_size=n, max_size=n))
    sizes = draw(st.lists(st.integers(1, 8), min_size=n, max_size=n))
    # any job number, earlier, later, itself or absent: cleaning keeps the earlier ones
    before = [draw(st.one_of(st.just(-1), st.integers(0, n + 2))) for _ in range(n)]
    think = [draw(st.one_of(st.just(-1), st.integers(0, 2_000))) for _ in range(n)]
    return JobTable.from_columns(
        submit=submits, runtime=runtimes, walltime=[r + 100 for r in runtimes], nodes=sizes,
        preceding_job=before, think_time=think)


def check_order(trace: Trace, failures: NodeFailures | None, policy: str) -> None:
    result = simulate(trace, policy=policy, dependencies=True, failures=failures)
    outcome = {o.id: o for o in result.outcomes}
    assert len(outcome) == len(trace)
    t = trace.jobs
    for jid, submit, before, think in zip(t.id.tolist(), t.submit.tolist(),
                                          t.preceding_job.tolist(), t.think_time.tolist(),
                                          strict=True):
        mine = outcome[jid]
        assert mine.start is not None and mine.start >= submit
        if before != -1:
            pause = think if think > 0 else 0.0
            assert mine.start >= outcome[before].end + pause  # type: ignore[operator]
            assert mine.submit == max(submit, outcome[before].end + pause)  # type: ignore[operator]


@settings(max_examples=60, deadline=None)
@given(table=dependent_traces(), policy=st.sampled_from(["easy", "conservative"]))
def test_no_job_starts_before_its_preceding_job_ended_plus_think_time(
        tmp_path_factory: pytest.TempPathFactory, table: JobTable, policy: str) -> None:
    path = tmp_path_factory.mktemp("deps") / "t.swf"
    write_swf(table, path)
    check_order(load_trace(path, procs=8, dependencies=True), None, policy)


@settings(max_examples=30, deadline=None)
@given(table=dependent_traces(), seed=st.integers(0, 50))
def test_a_requeued_preceding_job_is_waited_for_until_its_final_end(
        tmp_path_factory: pytest.TempPathFactory, table: JobTable, seed: int) -> None:
    # node failures kill running jobs, which are requeued: the dependent waits for the end
    # of the last run (the outcome's end), not the killed one
    path = tmp_path_factory.mktemp("deps") / "t.swf"
    write_swf(table, path)
    trace = load_trace(path, procs=8, dependencies=True)
    failures = NodeFailures(FailureModel(mtbf=600.0, repair=300.0, seed=seed), nodes=8,
                            start=float(trace.jobs.submit[0]))
    check_order(trace, failures, "easy")
