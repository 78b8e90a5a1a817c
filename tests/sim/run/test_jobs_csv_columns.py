"""jobs.csv written straight from the engine's columns is the file the JobOutcome values give,
byte for byte: plain traces, hybrid workloads with on-demand jobs, and jobs that never ran."""

from __future__ import annotations

from pathlib import Path

from metaq_py.policy.model import Kind
from sim.engine.core import simulate
from sim.run.metrics import Columns, JobOutcome
from sim.run.outputs import write_jobs_csv
from sim.run.result import Outcomes
from sim.trace.synthetic import synthetic_trace
from sim.workload.model import WorkloadModel, hybrid_workload


def both(outcomes: Outcomes, tmp_path: Path) -> tuple[str, str]:
    fast = write_jobs_csv(outcomes, tmp_path / "fast.csv").read_text()
    slow = write_jobs_csv(tuple(outcomes), tmp_path / "slow.csv").read_text()
    return fast, slow


def test_plain_and_hybrid_runs_write_the_same_file(tmp_path: Path) -> None:
    trace = synthetic_trace(jobs=400, nodes=512, seed=3)
    plain = simulate(trace, policy="easy")
    fast, slow = both(plain.outcomes, tmp_path)
    assert fast == slow and len(fast.splitlines()) == 401
    work = hybrid_workload(trace, WorkloadModel.for_workload("W5", seed=2))
    hybrid = simulate(work, policy="CUA&SPAA")
    kinds = {o.kind.value for o in hybrid.outcomes}
    assert "ondemand" in kinds and "malleable" in kinds
    fast, slow = both(hybrid.outcomes, tmp_path)
    assert fast == slow


def test_jobs_that_never_ran_have_empty_cells(tmp_path: Path) -> None:
    values = [
        JobOutcome(id=1, kind=Kind.RIGID, size=4, submit=0.0, start=5.0, end=105.5,
                   runtime=100.5, useful_node_seconds=402.0, preemptions=0, shrinks=0,
                   lost_node_seconds=0.0),
        JobOutcome(id="od-2", kind=Kind.ONDEMAND, size=2, submit=1.25, start=None, end=None,
                   runtime=30.0, useful_node_seconds=0.0, preemptions=0, shrinks=0,
                   lost_node_seconds=0.0, instant_start=False, notice="late"),
        JobOutcome(id=3, kind=Kind.MALLEABLE, size=8, submit=2.0, start=2.0, end=None,
                   runtime=50.0, useful_node_seconds=16.0, preemptions=1, shrinks=2,
                   lost_node_seconds=3.5),
    ]
    outcomes = Outcomes(Columns.of(values), [o.id for o in values], {"od-2": "late"})
    fast, slow = both(outcomes, tmp_path)
    assert fast == slow
    assert fast.splitlines()[1:] == [
        "1,rigid,4,0,5,105.5,5,105.5,100.5,402,0,0,0,,",
        "od-2,ondemand,2,1.25,,,,,30,0,0,0,0,0,late",
        "3,malleable,8,2,2,,0,,50,16,1,2,3.5,,",
    ]
