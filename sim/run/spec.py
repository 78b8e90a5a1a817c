"""One run of a study as a value: which trace, which policy, which workload, which seed, and
which parameters differ from the defaults.

A :class:`RunSpec` is all a run depends on, so it is what makes runs reproducible (the same
spec gives the same numbers), cacheable (its :attr:`~RunSpec.key` names the stored result) and
portable (:meth:`~RunSpec.to_json` is what an emitted ``#METAQ`` task carries to another
machine).

Parameter overrides name a field of :class:`~sim.workload.model.WorkloadModel` (for instance
``checkpoint_scale`` or ``malleable_min_fraction``), a failure-injection parameter
(:data:`FAILURE_KEYS`), a parameter of the scheduler (:data:`POLICY_KEYS`), of the engine
(:data:`ENGINE_KEYS`) or of the trace's cleaning (:data:`TRACE_KEYS`). Values are numbers
(durations in seconds; ``oracle`` 0 or 1), except for the keys of :data:`CHOICES`, whose
values are the words listed there.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metaq_py.policy.mechanisms import MECHANISMS, Scheduler, make_scheduler
from sim.workload.model import (
    CHECKPOINT_TIMES,
    MALLEABLE_SPEEDUPS,
    RESIZE_COSTS,
    SETUP_SPEEDUPS,
    TYPE_SHARES,
    WORKLOADS,
    WorkloadModel,
)

FAILURE_KEYS = ("failure_mtbf", "failure_repair")
"""Overrides that switch on node failures: the machine-wide mean time between node failures
and the mean repair time, in seconds (see :mod:`sim.engine.failures`)."""

POLICY_KEYS = ("oracle", "release_after", "warning", "victim_order", "borrowers",
               "other_reservations", "cup_preempt", "preempt_when", "node_order", "completion")
"""Overrides that build the scheduler (:func:`metaq_py.policy.mechanisms.make_scheduler`):
``oracle`` 1 decides on true runtimes instead of requested walltimes; ``release_after`` is
how long after a notice's estimated arrival its reservation is released, ``warning`` how long
before the arrival CUP preempts a malleable job, both in seconds; ``victim_order`` what PAA's
ascending preemption overhead counts (:class:`~metaq_py.policy.choices.VictimOrder`);
``borrowers`` which borrowers of its reservation an arriving on-demand job preempts
(:class:`~metaq_py.policy.choices.Borrowers`); ``other_reservations`` whether it takes idle
nodes reserved for other notices (:class:`~metaq_py.policy.choices.OtherReservations`);
``cup_preempt`` when CUP preempts the jobs it
picked (:class:`~metaq_py.policy.choices.CupTiming`); ``preempt_when`` whether an arriving
on-demand job or a CUP notice preempts when even every candidate is too few
(:class:`~metaq_py.policy.choices.PreemptWhen`); ``node_order`` which free or reserved
nodes a decision hands out first (:class:`~metaq_py.policy.pool.NodeOrder`); ``completion``
what the nodes of an on-demand job that ends do (:class:`~metaq_py.policy.choices.
Completion`: ``return`` to its victims, R12, or ``pool``)."""

ENGINE_KEYS = ("requeue", "malleable_start", "decisions", "instant_order", "failure_loss",
               "failure_node", "failure_times", "planning")
"""Overrides of the engine (:func:`sim.engine.core.simulate`): ``requeue`` is where a
preempted job waits again (:class:`~sim.engine.waiting.Requeue`); ``malleable_start`` the
smallest size a malleable job may start at (:class:`~sim.engine.waiting.MalleableStart`);
``decisions`` how often it decides at one instant (:class:`~sim.engine.agenda.DecisionPace`);
``instant_order`` whether finishes or submits due at one instant come first
(:class:`~sim.engine.agenda.InstantOrder`; only ``decisions`` ``per-item`` can tell);
``failure_loss`` what a malleable or on-demand job a node failure kills loses
(:class:`~sim.engine.failures.FailureLoss`), ``failure_node`` which node a failure strikes
(:class:`~sim.engine.failures.FailureNode`), ``failure_times`` the law of the times between
failures (:class:`~sim.engine.failures.FailureTimes`); only runs with :data:`FAILURE_KEYS` have
failures; ``planning`` what a decision plans on: ``walltimes`` (requested walltimes, or true
runtimes with ``oracle`` 1) or ``cqsim`` (CQSim's: waiting jobs by their true runtimes,
running ones by their walltimes; R14, the paper's baseline)."""

TRACE_KEYS = ("oversize",)
"""Overrides of the trace's cleaning (:func:`sim.trace.cleaning.clean`): ``oversize`` is what
becomes of a job larger than the machine, ``drop`` or ``clamp`` (shrunk to the machine)."""

CHOICES: Mapping[str, tuple[str, ...]] = {
    "victim_order": ("node-seconds", "seconds"),
    "borrowers": ("as-needed", "all"),
    "other_reservations": ("taken", "spared"),
    "cup_preempt": ("planned", "at-arrival"),
    "preempt_when": ("it-starts", "always"),
    "node_order": ("lowest-first", "highest-first"),
    "completion": ("return", "pool"),
    "planning": ("walltimes", "cqsim"),
    "requeue": ("original", "at-preemption"),
    "malleable_start": ("largest", "full"),
    "decisions": ("per-instant", "per-item"),
    "instant_order": ("finishes-first", "submits-first"),
    "failure_loss": ("all", "since-checkpoint"),
    "failure_node": ("uniform", "busy"),
    "failure_times": ("poisson", "weibull-0.7"),
    "type_shares": TYPE_SHARES,
    "malleable_speedup": MALLEABLE_SPEEDUPS,
    "resize_cost": RESIZE_COSTS,
    "setup_speedup": SETUP_SPEEDUPS,
    "checkpoint_time": CHECKPOINT_TIMES,
    "oversize": ("drop", "clamp"),
}
"""The overrides whose value is a word, and their words, the default first."""

_NUMERIC_MODEL_FIELDS = tuple(
    f.name for f in dataclasses.fields(WorkloadModel)
    if f.name not in ("seed", "name", "grouping", "notice_shares")
    and f.type in ("float", "int"))
MODEL_CHOICE_KEYS = ("type_shares", "malleable_speedup", "resize_cost", "setup_speedup",
                     "checkpoint_time")
"""Workload-model fields whose value is a word (:data:`CHOICES`)."""
OVERRIDE_KEYS = (*_NUMERIC_MODEL_FIELDS, *MODEL_CHOICE_KEYS, *FAILURE_KEYS, *POLICY_KEYS,
                 *ENGINE_KEYS, *TRACE_KEYS)
"""Every parameter a run may override."""

Value = float | int | str

PAPER_RULES: tuple[tuple[str, Value], ...] = (
    ("checkpoint_time", "charged"), ("setup_speedup", "none"), ("victim_order", "seconds"))
"""The paper's rules (``paper-rules.md``) where the model's defaults had chosen otherwise,
for every run of a study: R15, R2, R9 (the key ``victim_order`` means nothing to the
baseline, which preempts nothing, and is left out of its runs). The completion rule, R12, is
the schedulers' own default."""
BASELINE_RULES: tuple[tuple[str, Value], ...] = (("malleable_start", "full"),
                                                 ("planning", "cqsim"))
"""R14: the baseline treats malleable jobs as rigid (full size) and plans as CQSim does."""


def paper_rules(policy: str) -> tuple[tuple[str, Value], ...]:
    """The rules of the paper for a run of ``policy`` (a study's defaults), sorted."""
    if policy == "easy":
        return tuple(sorted((*(r for r in PAPER_RULES if r[0] != "victim_order"),
                             *BASELINE_RULES)))
    return PAPER_RULES


class SpecError(ValueError):
    """A run specification is malformed; the message is one sentence."""


def check_override(key: str, value: Value) -> Value:
    """``value`` as a float (a word for the keys of :data:`CHOICES`) if ``key`` may be
    overridden with it, else :class:`SpecError`."""
    if key not in OVERRIDE_KEYS:
        raise SpecError(f"unknown parameter {key!r}; choose from {', '.join(OVERRIDE_KEYS)}")
    words = CHOICES.get(key)
    if words is not None:
        if value not in words:
            raise SpecError(f"parameter {key} is {' or '.join(words)}, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise SpecError(f"parameter {key} needs a number, got {value!r}")
    if key in FAILURE_KEYS and not value > 0:
        raise SpecError(f"parameter {key} must be positive, got {value!r}")
    if key == "oracle" and value not in (0, 1):
        raise SpecError(f"parameter oracle is 0 (requested walltimes) or 1 (true runtimes), "
                        f"got {value!r}")
    if key in POLICY_KEYS and not value >= 0:
        raise SpecError(f"parameter {key} must be 0 or more, got {value!r}")
    # one spelling per value, so that 1 and 1.0 give the same spec and the same key
    return float(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceSource:
    """Where a run's jobs come from: a trace file, or the synthetic Theta-like workload.

    ``path`` ``None`` means synthetic (:func:`sim.trace.synthetic.synthetic_trace` with ``jobs``
    jobs, ``seed`` and ``nodes``). For a file, ``jobs`` keeps only its first ``jobs`` jobs in
    submit order (quick runs), and ``nodes`` overrides the machine size the file states.
    ``load`` divides every inter-arrival gap (:func:`sim.trace.scaling.scale_load`): the same
    jobs arrive ``load`` times as fast.
    """

    path: str | None = None
    jobs: int | None = None
    seed: int = 0
    nodes: int | None = None
    load: float = 1.0

    def __post_init__(self) -> None:
        if self.jobs is not None and self.jobs < 1:
            raise SpecError(f"a run needs at least one job, got jobs={self.jobs}")
        if self.nodes is not None and self.nodes < 1:
            raise SpecError(f"a machine needs at least one node, got nodes={self.nodes}")
        if isinstance(self.load, bool) or not isinstance(self.load, int | float) \
                or not math.isfinite(self.load) or self.load <= 0:
            raise SpecError(f"a load factor is a positive number, got load={self.load!r}")
        object.__setattr__(self, "load", float(self.load))

    @property
    def synthetic(self) -> bool:
        return self.path is None

    def describe(self) -> str:
        """One phrase for humans, e.g. ``theta_2022.swf.gz (first 500 jobs)``."""
        if self.path is None:
            size = self.jobs if self.jobs is not None else "23911"
            nodes = f", {self.nodes} nodes" if self.nodes is not None else ""
            load = f", load x{self.load:g}" if self.load != 1.0 else ""
            return f"synthetic Theta-like workload ({size} jobs, seed {self.seed}{nodes}{load})"
        first = f" (first {self.jobs} jobs)" if self.jobs is not None else ""
        load = f", load x{self.load:g}" if self.load != 1.0 else ""
        return f"{Path(self.path).name}{first}{load}"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSpec:
    """One simulation of a study: ``policy`` (a name from :data:`MECHANISMS`) on workload
    ``workload`` (W1..W5) of ``trace``, with model seed ``seed`` and the parameters in
    ``overrides`` (sorted ``(key, value)`` pairs) changed from their defaults."""

    policy: str
    workload: str
    seed: int
    trace: TraceSource = field(default_factory=TraceSource)
    overrides: tuple[tuple[str, Value], ...] = ()

    def __post_init__(self) -> None:
        canon = {m.upper(): m for m in MECHANISMS}.get(self.policy.upper())
        if canon is None:
            raise SpecError(f"unknown policy {self.policy!r}; choose from "
                            f"{', '.join(MECHANISMS)}")
        object.__setattr__(self, "policy", canon)
        if self.workload not in WORKLOADS:
            raise SpecError(f"unknown workload {self.workload!r}; choose from "
                            f"{', '.join(WORKLOADS)}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise SpecError(f"a seed is a whole number >= 0, got {self.seed!r}")
        keys = [k for k, _ in self.overrides]
        if len(set(keys)) != len(keys):
            raise SpecError(f"a parameter is overridden twice in {keys}")
        checked = tuple(sorted((k, check_override(k, v)) for k, v in self.overrides))
        object.__setattr__(self, "overrides", checked)

    @property
    def variant(self) -> str:
        """The overrides as a label (``checkpoint_scale=0.5``) but those that only follow
        the paper's rules (:func:`paper_rules`); ``default`` when none: so a study's runs
        under the rules are labelled alike whatever rules their policy follows."""
        rules = set(paper_rules(self.policy))
        return variant_label({k: v for k, v in self.overrides if (k, v) not in rules})

    @property
    def params(self) -> Mapping[str, Value]:
        return dict(self.overrides)

    def model(self) -> WorkloadModel:
        """The workload model of this run: the workload's notice shares, the seed, and every
        override that is a model field."""
        changes = {k: v for k, v in self.overrides
                   if k not in FAILURE_KEYS and k not in POLICY_KEYS and k not in ENGINE_KEYS
                   and k not in TRACE_KEYS}
        return WorkloadModel.for_workload(self.workload, seed=self.seed, **changes)

    def scheduler(self) -> Scheduler:
        """The run's scheduler: :attr:`policy` built with the overrides of
        :data:`POLICY_KEYS` (the defaults of :func:`make_scheduler` for the rest)."""
        options: dict[str, Any] = {k: (v == 1 if k == "oracle" else v)
                                   for k, v in self.overrides if k in POLICY_KEYS}
        if self.choice("planning") == "cqsim":
            options["oracle"] = True  # CQSim's half oracle plans waiting jobs on runtimes
        return make_scheduler(self.policy, **options)

    def choice(self, key: str) -> str:
        """The run's word for the modelling choice ``key`` (a key of :data:`CHOICES`, such as
        the engine's ``requeue`` or the failure source's ``failure_node``): its override,
        else the default, the first word of its choices."""
        return str(dict(self.overrides).get(key, CHOICES[key][0]))

    def to_dict(self) -> dict[str, object]:
        return {"policy": self.policy, "workload": self.workload, "seed": self.seed,
                "trace": _trace_dict(self.trace),
                "overrides": {k: v for k, v in self.overrides}}

    def to_json(self) -> str:
        """Canonical JSON: equal specs give equal text."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> RunSpec:
        try:
            trace = TraceSource(**dict(data.get("trace") or {}))  # type: ignore[arg-type]
            overrides = dict(data.get("overrides") or {})  # type: ignore[call-overload]
            return cls(policy=str(data["policy"]), workload=str(data["workload"]),
                       seed=data["seed"], trace=trace,  # type: ignore[arg-type]
                       overrides=tuple(overrides.items()))
        except KeyError as e:
            raise SpecError(f"a run specification needs {e.args[0]!r}") from None
        except TypeError as e:
            raise SpecError(f"a run specification has a bad field: {e}") from None

    @classmethod
    def from_json(cls, text: str) -> RunSpec:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise SpecError(f"a run specification is not valid JSON ({e.msg} at line "
                            f"{e.lineno})") from None
        if not isinstance(data, dict):
            raise SpecError("a run specification is a JSON object")
        return cls.from_dict(data)

    @property
    def key(self) -> str:
        """A short stable name for the stored result: readable prefix plus a content hash."""
        digest = hashlib.sha256(self.to_json().encode()).hexdigest()[:12]
        policy = self.policy.replace("&", "-").replace("+", "plus")
        return f"{policy}_{self.workload}_s{self.seed}_{digest}"


def _trace_dict(source: TraceSource) -> dict[str, object]:
    """The source as a dict; ``load`` only when it is not 1, so that specs written before
    loads existed keep their keys (and their stored runs)."""
    data = dataclasses.asdict(source)
    if data["load"] == 1.0:
        del data["load"]
    return data


def variant_label(params: Mapping[str, Value]) -> str:
    """``key=value`` pairs joined by commas, sorted; ``default`` for none."""
    if not params:
        return "default"
    return ",".join(f"{k}={_number(v)}" for k, v in sorted(params.items()))


def _number(v: Value) -> str:
    if isinstance(v, str):
        return v
    return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)
