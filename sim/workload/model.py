"""The hybrid workload model of Fan et al., "Hybrid Workload Scheduling on HPC Systems"
(IPDPS 2022): every trace job becomes a rigid, malleable or on-demand job.

Rules (each a field of :class:`WorkloadModel`; all draws come from ``seed``):

- Types go by group (:mod:`sim.workload.grouping`): 10% of groups on demand, 60% rigid, 30%
  malleable. The shares are met exactly, up to rounding (largest remainders), by shuffling the
  groups; with ``type_shares="drawn"`` each group's type is drawn on its own at those
  probabilities instead, so the shares a seed gets vary around them.
- On-demand jobs larger than half the machine are re-typed rigid or malleable at random, in
  the ratio of the rigid and malleable shares (2:1 by default).
- Malleable jobs: minimum size 20% of the size, rounded up, at least 1; setup U(0, 5%) of the
  runtime. A shrink or an expand is free; with ``resize_cost="setup"`` each one costs the job
  its setup again at its new size, with ``"setup-fixed"`` its setup's time at any size
  (:attr:`metaq_py.policy.model.Job.resize_cost`). Rigid jobs: setup
  U(5%, 10%) of the runtime, and checkpoints at Daly's optimum
  (:func:`metaq_py.policy.checkpoint.daly_interval`) with a cost of 600 s below 1,024 nodes and
  1,200 s from 1,024 up, times ``checkpoint_scale`` (the 50/100/200% sweep); no checkpoint
  when that interval exceeds the runtime. On-demand jobs have no setup.
- On-demand jobs fall into four notice categories with the workload's shares, drawn per job.
  The trace's submit time is the *actual* arrival. The notice comes U(15, 30) min before the
  *estimated* arrival. Accurate: estimate = actual. Early: the actual arrival is uniform
  between notice and estimate. Late: the actual arrival is uniform within 30 min after the
  estimate. None: no notice and no estimate.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Literal

import numpy as np

from metaq_py.policy.checkpoint import LARGE_COST, LARGE_JOB, SMALL_COST, daly_interval
from metaq_py.policy.model import Job, Kind, Notice
from sim.trace.loader import Trace
from sim.workload.grouping import DEFAULT_GAP, Rule, group_jobs


class NoticeCategory(str, Enum):
    """How an on-demand job's advance notice relates to its real arrival."""

    NONE = "none"
    ACCURATE = "accurate"
    EARLY = "early"
    LATE = "late"

    def __str__(self) -> str:
        return self.value


CATEGORIES = (NoticeCategory.NONE, NoticeCategory.ACCURATE, NoticeCategory.EARLY,
              NoticeCategory.LATE)
KINDS = (Kind.RIGID, Kind.MALLEABLE, Kind.ONDEMAND)
"""Kind codes of :attr:`HybridWorkload.kind`: 0 rigid, 1 malleable, 2 on-demand."""

NoticeShares = tuple[float, float, float, float]
"""Shares of on-demand jobs with (no, accurate, early, late) notice."""

WORKLOADS: Mapping[str, NoticeShares] = {
    "W1": (0.7, 0.1, 0.1, 0.1),
    "W2": (0.1, 0.7, 0.1, 0.1),
    "W3": (0.1, 0.1, 0.7, 0.1),
    "W4": (0.1, 0.1, 0.1, 0.7),
    "W5": (0.25, 0.25, 0.25, 0.25),
}
"""The paper's five workloads: 70% of on-demand jobs in one category, in the order none,
accurate, early, late (W1 to W4), then equal shares (W5)."""

HOUR = 3600.0

TypeShares = Literal["exact", "drawn"]
TYPE_SHARES: tuple[TypeShares, ...] = ("exact", "drawn")
"""How the type shares become group types: met exactly per seed (largest remainders, the
default) or drawn group by group at the shares' probabilities."""

MalleableSpeedup = Literal["linear", "amdahl-0.05"]
MALLEABLE_SPEEDUPS: tuple[MalleableSpeedup, ...] = ("linear", "amdahl-0.05")
"""How a malleable job's time depends on its size: linearly (the default) or by Amdahl's law
with a serial fraction of 5% (:meth:`metaq_py.policy.model.Job.slowdown`)."""

SetupSpeedup = Literal["linear", "none"]
SETUP_SPEEDUPS: tuple[SetupSpeedup, ...] = ("linear", "none")
"""How a malleable job's setup depends on its size: it speeds up with the rest of its run (the
model's default), or takes the same time at any size, as the paper's t_actual = t_single / n
+ t_setup says (R2 of ``paper-rules.md``; :attr:`metaq_py.policy.model.Job.fixed_setup`)."""

CheckpointTime = Literal["free", "charged"]
CHECKPOINT_TIMES: tuple[CheckpointTime, ...] = ("free", "charged")
"""Whether a checkpoint costs its job time. ``free`` (the model's default): the trace's
runtime is the job's at any checkpoint interval. ``charged`` (R15): the trace's runtime holds
the checkpoints the job takes at Daly's interval; at another interval (``checkpoint_scale``)
its runtime and walltime grow by the checkpoints it adds, each ``d`` long, or shrink by those
it saves. The time so charged is not useful work (:attr:`HybridWorkload.charged`)."""

ResizeCost = Literal["none", "setup", "setup-fixed"]
RESIZE_COSTS: tuple[ResizeCost, ...] = ("none", "setup", "setup-fixed")
"""What a shrink or an expand costs a malleable job: nothing (the default), its setup again
at its new size (the setup is work at full size, as a resumed job pays it), or its setup's
time whatever the size (:attr:`metaq_py.policy.model.Job.resize_cost`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadModel:
    """Every knob of the hybrid workload model; the defaults are the paper's (W5 shares)."""

    seed: int = 0
    ondemand_share: float = 0.1
    rigid_share: float = 0.6
    malleable_share: float = 0.3
    retype_above: float = 0.5
    """On-demand jobs larger than this fraction of the machine are re-typed."""
    notice_shares: NoticeShares = WORKLOADS["W5"]
    notice_lead: tuple[float, float] = (900.0, 1800.0)
    """Seconds between the notice and the estimated arrival (uniform)."""
    late_window: float = 1800.0
    """A late job arrives uniformly within this many seconds after its estimate."""
    malleable_min_fraction: float = 0.2
    malleable_setup: tuple[float, float] = (0.0, 0.05)
    rigid_setup: tuple[float, float] = (0.05, 0.10)
    rigid_setup_shift: float = 0.0
    """Added to both ends of ``rigid_setup`` (the setup-overhead study: -0.05 gives the
    paper's 0-5%, +0.05 gives 10-15%)."""
    ondemand_setup: tuple[float, float] = (0.0, 0.0)
    """Setup as a fraction of the runtime, uniform in the range."""
    mtbf: float = 24 * HOUR
    """M in Daly's formula: the mean time between interrupts a job sees."""
    checkpoint_cost_small: float = SMALL_COST
    checkpoint_cost_large: float = LARGE_COST
    checkpoint_large_from: int = LARGE_JOB
    checkpoint_scale: float = 1.0
    """Multiplies Daly's interval (0.5 / 1 / 2 for the paper's Fig. 7 sweep)."""
    grouping: Rule = "auto"
    campaign_gap: float = DEFAULT_GAP
    type_shares: TypeShares = "exact"
    """One of :data:`TYPE_SHARES`."""
    malleable_speedup: MalleableSpeedup = "linear"
    """One of :data:`MALLEABLE_SPEEDUPS`."""
    resize_cost: ResizeCost = "none"
    """One of :data:`RESIZE_COSTS`."""
    setup_speedup: SetupSpeedup = "linear"
    """One of :data:`SETUP_SPEEDUPS`."""
    checkpoint_time: CheckpointTime = "free"
    """One of :data:`CHECKPOINT_TIMES`."""
    name: str = field(default="W5")

    def __post_init__(self) -> None:
        shares = (self.ondemand_share, self.rigid_share, self.malleable_share)
        if min(shares) < 0 or not math.isclose(sum(shares), 1.0):
            raise ValueError(f"type shares must be >= 0 and sum to 1, got {shares}")
        if min(self.notice_shares) < 0 or not math.isclose(sum(self.notice_shares), 1.0):
            raise ValueError(f"notice shares must be >= 0 and sum to 1, got "
                             f"{self.notice_shares}")
        if self.type_shares not in TYPE_SHARES:
            raise ValueError(f"type_shares is {' or '.join(TYPE_SHARES)}, got "
                             f"{self.type_shares!r}")
        if self.malleable_speedup not in MALLEABLE_SPEEDUPS:
            raise ValueError(f"malleable_speedup is {' or '.join(MALLEABLE_SPEEDUPS)}, got "
                             f"{self.malleable_speedup!r}")
        if self.setup_speedup not in SETUP_SPEEDUPS:
            raise ValueError(f"setup_speedup is {' or '.join(SETUP_SPEEDUPS)}, got "
                             f"{self.setup_speedup!r}")
        if self.checkpoint_time not in CHECKPOINT_TIMES:
            raise ValueError(f"checkpoint_time is {' or '.join(CHECKPOINT_TIMES)}, got "
                             f"{self.checkpoint_time!r}")
        if self.resize_cost not in RESIZE_COSTS:
            raise ValueError(f"resize_cost is {' or '.join(RESIZE_COSTS)}, got "
                             f"{self.resize_cost!r}")
        if not 0 < self.malleable_min_fraction <= 1:
            raise ValueError("malleable_min_fraction must be in (0, 1]")
        low, high = (x + self.rigid_setup_shift for x in self.rigid_setup)
        if low < -1e-12 or high > 1:
            raise ValueError(f"the rigid setup range shifted by {self.rigid_setup_shift} is "
                             f"({low:g}, {high:g}); it must lie within (0, 1) of the runtime")
        if self.mtbf <= 0 or self.checkpoint_scale <= 0:
            raise ValueError("mtbf and checkpoint_scale must be positive")

    @property
    def serial(self) -> float:
        """The serial fraction of every malleable job (0: linear speedup)."""
        return 0.0 if self.malleable_speedup == "linear" else float(
            self.malleable_speedup.removeprefix("amdahl-"))

    def resize_seconds(self, kind: Kind, setup: float) -> float:
        """What each shrink or expand costs a job of ``kind`` with ``setup``, as time at its
        full size (:attr:`metaq_py.policy.model.Job.resize_cost`): only a malleable job is
        resized, and only when ``resize_cost`` is not ``"none"`` does it pay."""
        return setup if self.resize_cost != "none" and kind is Kind.MALLEABLE else 0.0

    def fixed_setup(self, kind: Kind) -> bool:
        """Whether a job of ``kind`` has a setup that takes as long at any size (only a
        malleable job changes size)."""
        return self.setup_speedup == "none" and kind is Kind.MALLEABLE

    @property
    def resize_fixed(self) -> bool:
        """Whether a resize costs the same time at any size (``"setup-fixed"``)."""
        return self.resize_cost == "setup-fixed"

    @classmethod
    def for_workload(cls, name: str, **changes: object) -> WorkloadModel:
        """The model of workload ``name`` (W1..W5), with any other field changed."""
        if name not in WORKLOADS:
            raise ValueError(f"unknown workload {name!r}; choose from {', '.join(WORKLOADS)}")
        return cls(notice_shares=WORKLOADS[name], name=name, **changes)  # type: ignore[arg-type]

    def with_seed(self, seed: int) -> WorkloadModel:
        return replace(self, seed=seed)


def notice_id(job_id: int) -> str:
    """The id of the advance notice announcing on-demand job ``job_id``."""
    return f"notice-{job_id}"


@dataclass(frozen=True, slots=True)
class HybridJob:
    """One job of the hybrid workload, as the engine submits it.

    ``submit`` is the actual arrival. ``size`` is the node count (the maximum for malleable
    jobs); ``walltime`` and ``runtime`` are at that size, ``runtime <= walltime``. ``setup``,
    ``checkpoint_interval`` (``None``: never checkpoints) and ``checkpoint_cost`` are seconds.
    On-demand jobs carry their notice ``category``; ``notice_time`` and ``estimated_arrival``
    are ``None`` without a notice.
    """

    id: int
    kind: Kind
    submit: float
    size: int
    min_size: int
    walltime: float
    runtime: float
    setup: float
    checkpoint_interval: float | None
    checkpoint_cost: float
    group: str
    category: NoticeCategory | None = None
    notice_time: float | None = None
    estimated_arrival: float | None = None
    serial: float = 0.0
    """A malleable job's serial fraction (:attr:`WorkloadModel.serial`)."""
    resize_cost: float = 0.0
    """What each shrink or expand costs it (:meth:`WorkloadModel.resize_seconds`)."""
    resize_fixed: bool = False
    """Whether that cost is the same at any size (:attr:`WorkloadModel.resize_fixed`)."""
    fixed_setup: bool = False
    """Whether its setup takes as long at any size (:meth:`WorkloadModel.fixed_setup`)."""

    @property
    def notice_id(self) -> str | None:
        return None if self.notice_time is None else notice_id(self.id)

    def to_job(self) -> Job:
        """The policy core's view of this job, waiting from its submit time."""
        return Job(id=self.id, kind=self.kind, size=self.size, walltime=self.walltime,
                   submit=self.submit, min_size=self.min_size, runtime=self.runtime,
                   setup=self.setup, checkpoint_interval=self.checkpoint_interval,
                   checkpoint_cost=self.checkpoint_cost, notice=self.notice_id,
                   serial=self.serial, resize_cost=self.resize_cost,
                   resize_fixed=self.resize_fixed, fixed_setup=self.fixed_setup)

    def notice(self) -> Notice | None:
        """The advance notice the engine issues at ``notice_time`` (``None`` without one)."""
        if self.notice_time is None or self.estimated_arrival is None:
            return None
        return Notice(id=notice_id(self.id), nodes=self.size, arrival=self.estimated_arrival,
                      walltime=self.walltime, issued=self.notice_time)


@dataclass(frozen=True, slots=True, eq=False)
class HybridWorkload:
    """A trace with the hybrid model applied, as columns over the trace's rows.

    ``kind`` holds codes into :data:`KINDS`; ``category`` codes into :data:`CATEGORIES` (-1 for
    jobs that are not on demand); missing times are NaN. :meth:`job` builds one
    :class:`HybridJob`, so an engine can create jobs as their submit time comes.
    """

    trace: Trace
    model: WorkloadModel
    group: np.ndarray
    group_labels: tuple[str, ...]
    group_kind: np.ndarray
    kind: np.ndarray
    retyped: np.ndarray
    min_size: np.ndarray
    setup: np.ndarray
    checkpoint_interval: np.ndarray
    checkpoint_cost: np.ndarray
    category: np.ndarray
    notice_time: np.ndarray
    estimated_arrival: np.ndarray
    charged: np.ndarray | None = None
    """Seconds of checkpoint time each job's runtime (and walltime) gained over the trace's
    (negative: saved) under ``checkpoint_time="charged"``; not useful work. ``None``: none
    (the trace's runtimes stand)."""

    def __len__(self) -> int:
        return len(self.kind)

    def __iter__(self) -> Iterator[HybridJob]:
        """Every job in submit order; converts the columns once, so it is several times
        faster per job than :meth:`job`."""
        jobs = self.trace.jobs
        columns = zip(
            jobs.id.tolist(), self.kind.tolist(), jobs.submit.tolist(), jobs.nodes.tolist(),
            self.min_size.tolist(), jobs.walltime.tolist(), jobs.runtime.tolist(),
            self.setup.tolist(), self.checkpoint_interval.tolist(),
            self.checkpoint_cost.tolist(), self.group.tolist(), self.category.tolist(),
            self.notice_time.tolist(), self.estimated_arrival.tolist(), strict=True)
        labels, serial, model = self.group_labels, self.model.serial, self.model
        for (id_, kind, submit, size, min_size, walltime, runtime, setup, interval, cost,
             group, category, notice, estimate) in columns:
            yield HybridJob(
                id=id_, kind=KINDS[kind], submit=submit, size=size, min_size=min_size,
                walltime=walltime, runtime=runtime, setup=setup,
                checkpoint_interval=None if interval != interval else interval,
                checkpoint_cost=cost, group=labels[group],
                category=None if category < 0 else CATEGORIES[category],
                notice_time=None if notice != notice else notice,
                estimated_arrival=None if estimate != estimate else estimate,
                serial=serial if KINDS[kind] is Kind.MALLEABLE else 0.0,
                resize_cost=model.resize_seconds(KINDS[kind], setup),
                resize_fixed=model.resize_fixed, fixed_setup=model.fixed_setup(KINDS[kind]))

    def job(self, i: int) -> HybridJob:
        jobs = self.trace.jobs
        interval = float(self.checkpoint_interval[i])
        category = int(self.category[i])
        notice = float(self.notice_time[i])
        estimate = float(self.estimated_arrival[i])
        return HybridJob(
            id=int(jobs.id[i]), kind=KINDS[self.kind[i]], submit=float(jobs.submit[i]),
            size=int(jobs.nodes[i]), min_size=int(self.min_size[i]),
            walltime=float(jobs.walltime[i]), runtime=float(jobs.runtime[i]),
            setup=float(self.setup[i]),
            checkpoint_interval=None if math.isnan(interval) else interval,
            checkpoint_cost=float(self.checkpoint_cost[i]),
            group=self.group_labels[self.group[i]],
            category=None if category < 0 else CATEGORIES[category],
            notice_time=None if math.isnan(notice) else notice,
            estimated_arrival=None if math.isnan(estimate) else estimate,
            serial=self.model.serial if KINDS[self.kind[i]] is Kind.MALLEABLE else 0.0,
            resize_cost=self.model.resize_seconds(KINDS[self.kind[i]], float(self.setup[i])),
            resize_fixed=self.model.resize_fixed,
            fixed_setup=self.model.fixed_setup(KINDS[self.kind[i]]))


def _quota(count: int, shares: tuple[float, ...]) -> list[int]:
    """Split ``count`` items by ``shares`` with largest remainders (ties to the earlier share)."""
    exact = [count * s for s in shares]
    base = [math.floor(x) for x in exact]
    left = count - sum(base)
    order = sorted(range(len(shares)), key=lambda k: (-(exact[k] - base[k]), k))
    for k in order[:left]:
        base[k] += 1
    return base


def _group_kinds(count: int, model: WorkloadModel, rng: np.random.Generator) -> np.ndarray:
    """The kind code of each of ``count`` groups, as ``model.type_shares`` says."""
    shares = (model.rigid_share, model.malleable_share, model.ondemand_share)
    if model.type_shares == "drawn":
        p = np.asarray(shares) / sum(shares)
        return rng.choice(3, size=count, p=p).astype(np.int8)
    group_kind = np.repeat(np.array([0, 1, 2], dtype=np.int8), _quota(count, shares))
    rng.shuffle(group_kind)
    return group_kind


def hybrid_workload(trace: Trace, model: WorkloadModel | None = None, *,
                    typed_on: Trace | None = None) -> HybridWorkload:
    """Apply ``model`` (default: the paper's W5) to every job of ``trace``.

    ``typed_on`` is the same jobs at the trace's own load, when ``trace`` had its load scaled
    (:func:`sim.trace.scaling.scale_load`): the groups that decide the job types are drawn on
    it, so that a seed types every job alike at every load (campaigns, cut by the gaps
    between submits, would otherwise merge as the gaps shrink)."""
    model = model or WorkloadModel()
    if typed_on is not None and len(typed_on) != len(trace):
        raise ValueError(f"typed_on has {len(typed_on)} jobs and the trace {len(trace)}: it "
                         f"must be the same jobs at another load")
    rng_types, rng_retype, rng_category, rng_notice, rng_setup = (
        np.random.default_rng(s) for s in np.random.SeedSequence(model.seed).spawn(5))
    jobs = trace.jobs
    n = len(jobs)
    size = jobs.nodes
    runtime = jobs.runtime

    groups = group_jobs(jobs if typed_on is None else typed_on.jobs, rule=model.grouping,
                        gap=model.campaign_gap)
    group_kind = _group_kinds(groups.count, model, rng_types)
    kind = group_kind[groups.codes]

    retyped = (kind == 2) & (size > model.retype_above * trace.nodes)
    rigid_weight = model.rigid_share + model.malleable_share
    p_rigid = model.rigid_share / rigid_weight if rigid_weight > 0 else 0.5
    kind = kind.copy()
    kind[retyped] = np.where(rng_retype.random(int(retyped.sum())) < p_rigid, 0, 1)

    min_size = size.copy()
    malleable = kind == 1
    min_size[malleable] = np.maximum(
        1, np.ceil(model.malleable_min_fraction * size[malleable] - 1e-9)).astype(np.int64)

    setup_fraction = np.zeros(n)
    draws = rng_setup.random(n)
    rigid_setup = tuple(max(0.0, x + model.rigid_setup_shift) for x in model.rigid_setup)
    for code, (low, high) in ((0, rigid_setup), (1, model.malleable_setup),
                              (2, model.ondemand_setup)):
        rows = kind == code
        setup_fraction[rows] = low + (high - low) * draws[rows]
    setup = setup_fraction * runtime

    rigid = kind == 0
    cost = np.where(size < model.checkpoint_large_from, model.checkpoint_cost_small,
                    model.checkpoint_cost_large)
    tau = {c: daly_interval(c, model.mtbf) * model.checkpoint_scale for c in np.unique(cost)}
    interval = np.vectorize(tau.__getitem__, otypes=[np.float64])(cost) if n else np.zeros(0)
    checkpoints = rigid & (interval <= runtime)
    checkpoint_interval = np.where(checkpoints, interval, np.nan)
    checkpoint_cost = np.where(checkpoints, cost, 0.0)

    charged = None
    if model.checkpoint_time == "charged" and checkpoints.any():
        base = {c: daly_interval(c, model.mtbf) for c in np.unique(cost)}
        default = np.vectorize(base.__getitem__, otypes=[np.float64])(cost)
        charged = _checkpoint_time(runtime - setup, default, interval, cost,
                                   rigid & (default <= runtime), checkpoints)
        trace = replace(trace, jobs=replace(jobs, runtime=runtime + charged,
                                            walltime=jobs.walltime + charged))

    category, notice_time, estimate = _notices(kind == 2, jobs.submit, model, rng_category,
                                               rng_notice)
    return HybridWorkload(
        trace=trace, model=model, group=groups.codes, group_labels=groups.labels,
        group_kind=group_kind, kind=kind, retyped=retyped, min_size=min_size, setup=setup,
        checkpoint_interval=checkpoint_interval, checkpoint_cost=checkpoint_cost,
        category=category, notice_time=notice_time, estimated_arrival=estimate,
        charged=charged)


def _checkpoint_time(run: np.ndarray, default: np.ndarray, interval: np.ndarray,
                     cost: np.ndarray, at_default: np.ndarray,
                     at_interval: np.ndarray) -> np.ndarray:
    """Seconds each job's run gains (R15) when it checkpoints every ``interval`` instead of
    every ``default`` (Daly's), each checkpoint ``cost`` long; ``run`` is its time past the
    setup as the trace has it, ``at_default`` and ``at_interval`` whether it checkpoints at
    all at each interval.

    The trace's run holds ``n0`` checkpoints, as many as complete before it ends at the
    default interval (:func:`metaq_py.policy.checkpoint.last_checkpoint`: the k-th at
    ``k * (default + cost)``), so the work in it is ``w = run - n0 * cost``. At an interval
    ``t`` the job checkpoints after each full ``t`` of work but the last,
    ``n(t) = ceil(w / t) - 1`` times; it gains ``(n(interval) - n(default)) * cost``, which
    is 0 at the default interval."""
    n0 = np.maximum(np.where(at_default, np.ceil(run / (default + cost)) - 1, 0.0), 0.0)
    work = run - n0 * cost

    def count(t: np.ndarray, on: np.ndarray) -> np.ndarray:
        return np.where(on, np.maximum(np.ceil(work / np.where(on, t, 1.0)) - 1, 0.0), 0.0)

    return (count(interval, at_interval) - count(default, at_default)) * cost


def _notices(ondemand: np.ndarray, actual: np.ndarray, model: WorkloadModel,
             rng_category: np.random.Generator,
             rng_notice: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = len(actual)
    rows = np.flatnonzero(ondemand)
    category = np.full(n, -1, dtype=np.int8)
    category[rows] = rng_category.choice(4, size=len(rows), p=np.asarray(model.notice_shares))
    # Drawn for every job, so one job's times do not depend on how many others are on demand.
    low, high = model.notice_lead
    lead = rng_notice.uniform(low, high, size=n)
    where = rng_notice.random(n)
    estimate = np.full(n, np.nan)
    accurate = category == 1
    early = category == 2
    late = category == 3
    estimate[accurate] = actual[accurate]
    # early: actual = notice + where * lead, and estimate = notice + lead
    estimate[early] = actual[early] + (1.0 - where[early]) * lead[early]
    estimate[late] = actual[late] - where[late] * model.late_window
    notice_time = estimate - lead
    return category, notice_time, estimate
