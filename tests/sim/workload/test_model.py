"""The hybrid workload model: types by group, re-typing, sizes, setups, checkpoints, notices,
workload shares and burstiness, checked on large synthetic traces and on Theta when present."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from metaq_py.policy.checkpoint import daly_interval
from metaq_py.policy.model import Kind
from sim.run.spec import CHOICES, MODEL_CHOICE_KEYS, SpecError, check_override
from sim.trace.columns import JobTable
from sim.trace.loader import load_trace
from sim.trace.synthetic import synthetic_trace
from sim.workload.grouping import campaigns, group_jobs
from sim.workload.model import CATEGORIES, WORKLOADS, WorkloadModel, hybrid_workload
from tests.sim_traces import real_trace


@pytest.fixture(scope="module")
def trace():
    return synthetic_trace(jobs=200_000, seed=11)


def dispersion(times: np.ndarray, start: float, end: float) -> float:
    counts = np.bincount(((times - start) // 3600).astype(int),
                         minlength=int((end - start) // 3600) + 1)
    return float(counts.var() / counts.mean())


def test_types_are_assigned_by_group_with_the_paper_shares(trace) -> None:
    w = hybrid_workload(trace, WorkloadModel(seed=1))
    groups = len(w.group_labels)
    shares = np.bincount(w.group_kind, minlength=3) / groups
    assert shares == pytest.approx([0.6, 0.3, 0.1], abs=1 / groups)
    # every job of a group has the group's kind, except re-typed on-demand jobs
    assert np.array_equal(w.kind[~w.retyped], w.group_kind[w.group][~w.retyped])
    assert np.all(w.group_kind[w.group][w.retyped] == 2)


def test_big_ondemand_jobs_are_retyped(trace) -> None:
    w = hybrid_workload(trace, WorkloadModel(seed=2, ondemand_share=0.5, rigid_share=0.3,
                                             malleable_share=0.2))
    big = trace.jobs.nodes > trace.nodes / 2
    assert big.any() and not np.any(w.kind[big] == 2)
    assert np.array_equal(w.retyped, big & (w.group_kind[w.group] == 2))
    retyped_kinds = w.kind[w.retyped]
    assert set(retyped_kinds.tolist()) == {0, 1}


def test_malleable_minimum_and_setups(trace) -> None:
    w = hybrid_workload(trace, WorkloadModel(seed=3))
    size, runtime = trace.jobs.nodes, trace.jobs.runtime
    mall = w.kind == 1
    expected = np.maximum(1, np.ceil(0.2 * size[mall]))
    assert np.array_equal(w.min_size[mall], expected)
    assert np.array_equal(w.min_size[~mall], size[~mall])
    fraction = w.setup / runtime
    assert fraction[mall].min() >= 0 and fraction[mall].max() <= 0.05
    assert fraction[mall].mean() == pytest.approx(0.025, abs=0.001)
    rigid = w.kind == 0
    assert fraction[rigid].min() >= 0.05 and fraction[rigid].max() <= 0.10
    assert np.all(w.setup[w.kind == 2] == 0)
    w40 = hybrid_workload(trace, WorkloadModel(seed=3, malleable_min_fraction=0.4))
    assert np.array_equal(w40.min_size[mall], np.maximum(1, np.ceil(0.4 * size[mall])))


def test_checkpoints_follow_daly(trace) -> None:
    model = WorkloadModel(seed=4, mtbf=12 * 3600, checkpoint_scale=0.5)
    w = hybrid_workload(trace, model)
    size, runtime = trace.jobs.nodes, trace.jobs.runtime
    small_tau = 0.5 * daly_interval(600.0, 12 * 3600)
    large_tau = 0.5 * daly_interval(1200.0, 12 * 3600)
    r = 600 / (2 * 12 * 3600)
    assert small_tau == pytest.approx(
        0.5 * (math.sqrt(2 * 600 * 12 * 3600) * (1 + math.sqrt(r) / 3 + r / 9) - 600))
    rigid = w.kind == 0
    tau = np.where(size < 1024, small_tau, large_tau)
    with_ckpt = rigid & (tau <= runtime)
    assert np.allclose(w.checkpoint_interval[with_ckpt], tau[with_ckpt])
    assert np.all(np.isnan(w.checkpoint_interval[~with_ckpt]))
    assert np.all(w.checkpoint_cost[with_ckpt & (size >= 1024)] == 1200)
    assert np.all(w.checkpoint_cost[with_ckpt & (size < 1024)] == 600)
    assert with_ckpt.any() and (rigid & ~with_ckpt).any()


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_notice_category_shares_per_workload(trace, name: str) -> None:
    w = hybrid_workload(trace, WorkloadModel.for_workload(name, seed=5))
    cats = w.category[w.kind == 2]
    n = len(cats)
    assert n > 5000 and np.all(w.category[w.kind != 2] == -1)
    for code, share in enumerate(WORKLOADS[name]):
        sigma = math.sqrt(share * (1 - share) / n)
        assert abs((cats == code).mean() - share) < 5 * sigma


def test_notice_times_follow_their_category(trace) -> None:
    w = hybrid_workload(trace, WorkloadModel(seed=6))
    actual = trace.jobs.submit
    lead = w.estimated_arrival - w.notice_time
    od = w.kind == 2
    none, acc, early, late = (od & (w.category == c) for c in range(4))
    assert np.all(np.isnan(w.notice_time[none]) & np.isnan(w.estimated_arrival[none]))
    has = acc | early | late
    assert np.all((lead[has] >= 900) & (lead[has] <= 1800))
    assert np.array_equal(w.estimated_arrival[acc], actual[acc])
    assert np.all((actual[early] >= w.notice_time[early])
                  & (actual[early] <= w.estimated_arrival[early]))
    delay = actual[late] - w.estimated_arrival[late]
    assert np.all((delay >= 0) & (delay <= 1800))
    assert delay.mean() == pytest.approx(900, rel=0.05)
    job = w.job(int(np.flatnonzero(early)[0]))
    notice = job.notice()
    assert notice is not None and notice.id == job.to_job().notice
    assert notice.arrival == job.estimated_arrival and notice.nodes == job.size
    assert job.to_job().kind is Kind.ONDEMAND and str(job.category) == "early"
    assert w.job(int(np.flatnonzero(none)[0])).notice() is None


def test_same_seed_same_workload(trace) -> None:
    a, b = (hybrid_workload(trace, WorkloadModel(seed=9)) for _ in range(2))
    c = hybrid_workload(trace, WorkloadModel(seed=10))
    for name in ("kind", "setup", "category", "notice_time", "checkpoint_interval"):
        assert np.array_equal(getattr(a, name), getattr(b, name), equal_nan=True)
    assert not np.array_equal(a.kind, c.kind)
    views = list(a)
    assert len(views) == len(b)
    assert views[:5000] == [b.job(i) for i in range(5000)]
    assert views[-1] == b.job(len(b) - 1)
    assert any(v.notice_time is not None for v in views)


def test_policy_jobs_are_valid(trace) -> None:
    w = hybrid_workload(trace, WorkloadModel(seed=12))
    for i in range(0, len(w), 997):
        job = w.job(i).to_job()
        assert 1 <= job.min_size <= job.size and job.runtime is not None
        assert job.runtime <= job.walltime


def test_campaign_grouping() -> None:
    table = JobTable.from_columns(
        submit=[0.0, 10.0, 20.0, 5000.0, 30.0, 8000.0],
        nodes=[128, 128, 256, 128, 128, 128],
        walltime=[3600.0, 3600.0, 3600.0, 3600.0, 3600.0, 3600.0])
    assert campaigns(table, gap=3600).tolist() == [0, 0, 1, 2, 0, 2]
    groups = group_jobs(table.with_columns(
        user=np.array([None, "u1", None, None, None, None], dtype=object)))
    assert groups.labels[groups.codes[1]] == "user:u1"
    assert groups.codes[0] == groups.codes[4] != groups.codes[1]


def test_ondemand_arrivals_are_bursty_on_synthetic(trace) -> None:
    w = hybrid_workload(trace, WorkloadModel(seed=13))
    od = trace.jobs.submit[w.kind == 2]
    assert dispersion(od, trace.first_submit, trace.last_submit) > 2


def test_ondemand_arrivals_are_bursty_on_theta() -> None:
    trace = load_trace(real_trace("theta_2022.swf.gz"))
    values = []
    for seed in range(3):
        w = hybrid_workload(trace, WorkloadModel(seed=seed))
        assert all(label.startswith("campaign:") for label in w.group_labels)
        od = trace.jobs.submit[w.kind == 2]
        values.append(dispersion(od, trace.first_submit, trace.last_submit))
    assert min(values) > 2.5, values


def test_bad_models_are_refused() -> None:
    with pytest.raises(ValueError):
        WorkloadModel(ondemand_share=0.5)
    with pytest.raises(ValueError):
        WorkloadModel(notice_shares=(1.0, 0.5, 0.0, 0.0))
    with pytest.raises(ValueError):
        WorkloadModel.for_workload("W9")
    assert len(CATEGORIES) == 4


def test_an_id_every_job_shares_is_passed_over() -> None:
    # Theta 2023-24's SWF has user 0 on every job: grouping by it would make every job one kind
    table = JobTable.from_columns(
        submit=[0.0, 10.0, 20.0, 5000.0], nodes=[128, 128, 256, 128],
        walltime=[3600.0, 3600.0, 3600.0, 3600.0])
    shared = group_jobs(table.with_columns(user=np.array(["0"] * 4, dtype=object)))
    assert shared.labels == ("campaign:0", "campaign:1", "campaign:2")
    assert group_jobs(table.with_columns(user=np.array(["0"] * 4, dtype=object)),
                      rule="user").labels == ("user:0",)


def test_rigid_setup_shift_moves_the_rigid_range_only(trace) -> None:
    base = hybrid_workload(trace, WorkloadModel(seed=3))
    low = hybrid_workload(trace, WorkloadModel(seed=3, rigid_setup_shift=-0.05))
    rigid, malleable = base.kind == 0, base.kind == 1
    runtime = trace.jobs.runtime
    assert np.all(low.setup[rigid] / runtime[rigid] <= 0.05 + 1e-12)
    assert np.allclose(low.setup[rigid], base.setup[rigid] - 0.05 * runtime[rigid])
    assert np.array_equal(low.setup[malleable], base.setup[malleable])
    with pytest.raises(ValueError, match="rigid setup"):
        WorkloadModel(rigid_setup_shift=-0.06)


@pytest.mark.parametrize("key", MODEL_CHOICE_KEYS)
def test_every_word_valued_model_choice_refuses_an_unknown_word_in_one_sentence(
        key: str) -> None:
    """The model and a ``--set`` both name the choice and its words, and take each word."""
    words = " or ".join(CHOICES[key])
    with pytest.raises(ValueError, match=rf"^{key} is {re.escape(words)}, got 'nonsense'$"):
        WorkloadModel(**{key: "nonsense"})
    with pytest.raises(SpecError, match=rf"^parameter {key} is {re.escape(words)}, "
                                        r"got 'nonsense'$"):
        check_override(key, "nonsense")
    for word in CHOICES[key]:
        assert check_override(key, word) == word
        WorkloadModel(**{key: word})  # every word builds a model
