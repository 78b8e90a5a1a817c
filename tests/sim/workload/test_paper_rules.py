"""The workload rules the paper states (``paper-rules.md``) where our model had chosen
otherwise: job types drawn before the load is scaled, checkpoints that cost time (R15) and a
malleable setup that does not scale (R2). Expectations are worked out by hand."""

from __future__ import annotations

import math

import numpy as np

from metaq_py.policy.checkpoint import daly_interval
from metaq_py.policy.model import Kind
from sim.engine.core import simulate
from sim.trace.scaling import scale_load
from sim.trace.synthetic import synthetic_trace
from sim.workload.model import WorkloadModel, _checkpoint_time, hybrid_workload
from tests.sim_worlds import tiny_trace


def test_with_one_seed_every_job_keeps_its_type_at_every_load() -> None:
    """Campaigns are cut by the gaps between submits; drawn on the scaled trace they merge
    as the gaps shrink, and the types move. Drawn on the trace at its own load, they stay.
    (Grouped by campaign, as a trace without projects, such as Theta 2022's SWF, is.)"""
    own = synthetic_trace(jobs=3000, seed=4)
    model = WorkloadModel(seed=7, grouping="campaign")
    at_one = hybrid_workload(own, model)
    moved = 0
    for load in (0.8, 1.5, 3.0):
        scaled = scale_load(own, load)
        kept = hybrid_workload(scaled, model, typed_on=own)
        assert np.array_equal(kept.kind, at_one.kind), load
        assert np.array_equal(kept.min_size, at_one.min_size), load
        moved += int((hybrid_workload(scaled, model).kind != at_one.kind).sum())
    assert moved > 0, "without typed_on the types do move: the test can fail"


def test_checkpoint_time_worked_by_hand() -> None:
    """A run of 30,000 s past its setup, Daly's interval 10,000 s, checkpoints of 600 s.
    At that interval checkpoints complete at 10,600 and 21,200 s (the next, 31,800, after
    the end): 2 of them, so the work is 28,800 s. At half the interval (5,000 s) the job
    checkpoints after 5, 10, 15, 20 and 25 thousand seconds of work (ceil(5.76) - 1 = 5):
    3 more, +1,800 s. At twice the interval, once (ceil(1.44) - 1): -600 s. A run of
    5,000 s that Daly's interval exceeds takes none at either, and gains nothing."""
    run = np.array([30000.0, 5000.0])
    daly = np.array([10000.0, 10000.0])
    cost = np.array([600.0, 600.0])
    at_daly = daly <= run + 0  # the second never checkpoints at Daly's interval
    assert _checkpoint_time(run, daly, daly, cost, at_daly, at_daly).tolist() == [0.0, 0.0]
    half = daly / 2
    assert _checkpoint_time(run, daly, half, cost, at_daly, half <= run).tolist() == \
        [1800.0, 0.0]
    double = daly * 2
    assert _checkpoint_time(run, daly, double, cost, at_daly, double <= run).tolist() == \
        [-600.0, 0.0]


def test_charged_checkpoints_lengthen_the_run_and_are_not_useful_work() -> None:
    """One rigid job of 10 nodes and 40 hours, alone on the machine, at half Daly's
    interval: its runtime and walltime grow by what the added checkpoints take, and the
    useful work stays the trace's 40 hours on 10 nodes. Free checkpoints change nothing."""
    hours = 40 * 3600.0
    trace = tiny_trace([(0.0, 10, hours + 3600.0, hours)], nodes=10)
    model = WorkloadModel(seed=0, ondemand_share=0.0, rigid_share=1.0, malleable_share=0.0,
                          rigid_setup=(0.0, 0.0), checkpoint_scale=0.5,
                          checkpoint_time="charged")
    w = hybrid_workload(trace, model)
    tau = daly_interval(600.0, model.mtbf)
    run_ = hours
    n_daly = math.ceil(run_ / (tau + 600.0)) - 1
    work = run_ - n_daly * 600.0
    gained = ((math.ceil(work / (tau / 2)) - 1) - (math.ceil(work / tau) - 1)) * 600.0
    assert gained > 0 and w.charged is not None and w.charged.tolist() == [gained]
    assert w.trace.jobs.runtime.tolist() == [hours + gained]
    assert w.trace.jobs.walltime.tolist() == [hours + 3600.0 + gained]
    (o,) = simulate(w, policy="easy").outcomes
    assert (o.start, o.end) == (0.0, hours + gained)
    assert o.useful_node_seconds == hours * 10
    free = hybrid_workload(trace, WorkloadModel(**{**_fields(model), "checkpoint_time": "free"}))
    assert free.charged is None and free.trace.jobs.runtime.tolist() == [hours]


def _fields(model: WorkloadModel) -> dict[str, object]:
    return {f: getattr(model, f) for f in model.__dataclass_fields__}


def test_a_malleable_setup_that_does_not_scale_reaches_the_jobs() -> None:
    trace = synthetic_trace(jobs=400, seed=2)
    w = hybrid_workload(trace, WorkloadModel(seed=1, setup_speedup="none"))
    jobs = list(w)
    assert any(j.kind is Kind.MALLEABLE for j in jobs)
    assert all(j.to_job().fixed_setup == (j.kind is Kind.MALLEABLE) for j in jobs)
    assert not any(j.to_job().fixed_setup for j in hybrid_workload(trace, WorkloadModel(seed=1)))
