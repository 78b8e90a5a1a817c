"""The named studies and the grid of runs each expands to.

A study is a set of policies and a list of *variants*, each variant a set of parameter
overrides (:mod:`sim.run.spec`). Its grid is every variant x policy x workload x seed, one
:class:`~sim.run.spec.RunSpec` each. The first variant is the study's reference: the paper's
findings are judged on it.

- ``paper``: Fan et al.'s study, the baseline ``easy`` and the six mechanisms, defaults;
- ``checkpoint``: the rigid jobs' checkpoint interval at 50%, 100% and 200% of Daly's optimum
  (the paper's Fig. 7);
- ``malleable-min``: the malleable minimum size at 20%, 40% and 60% of the maximum;
- ``spaa-plus``: our shrink-then-preempt ``SPAA+`` beside ``SPAA`` under each notice strategy;
- ``failures``: node failures with a machine-wide MTBF of 5 h and 50 h and repairs of about
  6 h, beside the failure-free machine;
- ``setup``: the rigid jobs' setup at 0-5% and 10-15% of the runtime beside the paper's 5-10%.

``--study all`` (:mod:`sim.study.full`) runs what all 17 of the paper's observations need.

``--sweep KEY=V1,V2`` (:func:`parse_sweep`) multiplies a study's variants by more values.

Every run of a study follows the paper's rules where our model had chosen otherwise
(:func:`paper_rules`, ``paper-rules.md``): victims in ascending overhead in time (R9),
malleable setups that do not scale (R2), checkpoints that cost time (R15), and the baseline
planned as CQSim does with malleable jobs at full size (R14). The completion rule (R12) is the
schedulers' own default. ``--set`` with the other word of a rule's key brings back the
choice before it (``docs/model.md``, "Rules of the paper").
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from metaq_py.durations import DurationError, parse_duration
from sim.run.spec import (
    CHOICES,
    RunSpec,
    SpecError,
    TraceSource,
    Value,
    check_override,
    paper_rules,
)
from sim.workload.model import WORKLOADS

HOUR = 3600.0
BASELINE = "easy"
MECHANISM_NAMES = ("N&PAA", "N&SPAA", "CUA&PAA", "CUA&SPAA", "CUP&PAA", "CUP&SPAA")
"""The paper's six mechanisms: notice strategy & arrival strategy."""
PAPER_POLICIES = (BASELINE, *MECHANISM_NAMES)
SPAA_PLUS_POLICIES = ("N&SPAA", "N&SPAA+", "CUA&SPAA", "CUA&SPAA+", "CUP&SPAA", "CUP&SPAA+")
DEFAULT_SEEDS = 10

Variant = tuple[tuple[str, Value], ...]
"""Sorted ``(parameter, value)`` overrides; ``()`` is the defaults."""

DURATION_KEYS = frozenset({"mtbf", "late_window", "campaign_gap", "checkpoint_cost_small",
                           "checkpoint_cost_large", "failure_mtbf", "failure_repair",
                           "release_after", "warning"})
"""Parameters given in seconds; a sweep may write them as durations (``5h``, ``6:00:00``)."""


@dataclass(frozen=True, slots=True)
class Study:
    """A named question: ``policies`` under each of ``variants`` (the first is the reference)."""

    name: str
    title: str
    question: str
    policies: tuple[str, ...]
    variants: tuple[Variant, ...] = ((),)


STUDIES: Mapping[str, Study] = {
    s.name: s for s in (
        Study("paper", "Hybrid workload scheduling (Fan et al., IPDPS 2022)",
              "How do the six on-demand mechanisms compare with the EASY baseline?",
              PAPER_POLICIES),
        Study("checkpoint", "Checkpoint interval sweep",
              "How does the rigid jobs' checkpoint interval (50%, 100%, 200% of Daly's "
              "optimum) change the mechanisms' cost?",
              PAPER_POLICIES,
              ((("checkpoint_scale", 1.0),), (("checkpoint_scale", 0.5),),
               (("checkpoint_scale", 2.0),))),
        Study("malleable-min", "Malleable minimum size",
              "How much do the mechanisms depend on malleable jobs shrinking to 20%, 40% or "
              "60% of their size?",
              PAPER_POLICIES,
              ((("malleable_min_fraction", 0.2),), (("malleable_min_fraction", 0.4),),
               (("malleable_min_fraction", 0.6),))),
        Study("spaa-plus", "Shrink-then-preempt (SPAA+) against SPAA",
              "Does shrinking what it can before preempting the rest beat SPAA's fallback "
              "to PAA?",
              SPAA_PLUS_POLICIES),
        Study("failures", "Node failures",
              "What do node failures (machine-wide MTBF 5 h or 50 h, repairs of about 6 h) "
              "do to the mechanisms?",
              PAPER_POLICIES,
              ((), (("failure_mtbf", 50 * HOUR), ("failure_repair", 6 * HOUR)),
               (("failure_mtbf", 5 * HOUR), ("failure_repair", 6 * HOUR)))),
        Study("setup", "Setup overhead",
              "What does the rigid jobs' setup overhead (0-5%, 5-10% as in the paper, 10-15% "
              "of the runtime) do to the mechanisms?",
              PAPER_POLICIES,
              ((), (("rigid_setup_shift", -0.05),), (("rigid_setup_shift", 0.05),))),
    )
}


def parse_sweep(text: str) -> tuple[str, tuple[Value, ...]]:
    """``KEY=V1,V2,...`` as ``(KEY, (V1, V2, ...))``; durations are allowed for the keys in
    :data:`DURATION_KEYS`. Raises :class:`~sim.run.spec.SpecError` with one sentence."""
    key, sep, values = text.partition("=")
    key = key.strip()
    words = [w.strip() for w in values.split(",") if w.strip()]
    if not sep or not key or not words:
        raise SpecError(f"a sweep is written KEY=V1,V2,..., got {text!r}")
    parsed: list[Value] = []
    for word in words:
        if key in CHOICES:  # a word, checked by check_override
            parsed.append(check_override(key, word))
            continue
        try:
            number = parse_duration(word) if key in DURATION_KEYS else float(word)
        except (DurationError, ValueError):
            raise SpecError(f"sweep {key}: {word!r} is not a number") from None
        parsed.append(check_override(key, number))
    if len(set(parsed)) != len(parsed):
        raise SpecError(f"sweep {key} repeats a value")
    return key, tuple(parsed)


FAILURE_DETAIL_KEYS = frozenset({"failure_repair"})
"""Failure parameters that only mean something on a machine with failures (``failure_mtbf``
set): ``--set`` gives them to those runs alone, and they replace the value a study holds for
them (the ``failures`` study varies the time between failures and holds repairs at 6 h)."""


def with_rules(policy: str, variant: Variant, overrides: Variant) -> Variant:
    """``variant`` with ``overrides`` (:func:`with_overrides`) on top of the paper's rules
    for ``policy``: a key a variant or ``--set`` gives replaces the rule's word."""
    chosen = with_overrides(variant, overrides)
    given = {k for k, _ in chosen}
    return tuple(sorted((*(r for r in paper_rules(policy) if r[0] not in given), *chosen)))


def with_overrides(variant: Variant, overrides: Variant) -> Variant:
    """``variant`` with ``overrides`` added (``--set``: a modelling choice changed for every
    run); a parameter in both is an error, since the study varies what ``--set`` would fix,
    except the :data:`FAILURE_DETAIL_KEYS`, which change only runs with failures."""
    details = {k for k, _ in overrides if k in FAILURE_DETAIL_KEYS}
    if details:
        if any(k == "failure_mtbf" for k, _ in (*variant, *overrides)):
            variant = tuple((k, v) for k, v in variant if k not in details)
        else:
            overrides = tuple((k, v) for k, v in overrides if k not in details)
    clash = sorted({k for k, _ in variant} & {k for k, _ in overrides})
    if clash:
        raise SpecError(f"--set {clash[0]} clashes with a variant of the study that varies it")
    return tuple(sorted((*variant, *overrides)))


def parse_setting(text: str) -> tuple[str, Value]:
    """``KEY=V`` as ``(KEY, V)`` (durations allowed as in :func:`parse_sweep`)."""
    key, values = parse_sweep(text)
    if len(values) != 1:
        raise SpecError(f"--set takes one value, KEY=V, got {text!r}")
    return key, values[0]


def variants_of(study: Study, sweeps: Sequence[tuple[str, Sequence[Value]]] = ()) -> \
        tuple[Variant, ...]:
    """The study's variants times every combination of the sweeps' values (a sweep's value
    replaces the study's own value of the same parameter)."""
    keys = [k for k, _ in sweeps]
    if len(set(keys)) != len(keys):
        raise SpecError("a parameter is swept twice")
    out: list[Variant] = []
    for base in study.variants:
        for combo in itertools.product(*(values for _, values in sweeps)):
            params = dict(base)
            params.update(zip(keys, combo, strict=True))
            variant = tuple(sorted(params.items()))
            if variant not in out:
                out.append(variant)
    return tuple(out)


def build_grid(study: Study, *, trace: TraceSource, seeds: int = DEFAULT_SEEDS,
               first_seed: int = 0, workloads: Iterable[str] = tuple(WORKLOADS),
               policies: Iterable[str] | None = None,
               sweeps: Sequence[tuple[str, Sequence[Value]]] = (),
               overrides: Variant = ()) -> tuple[RunSpec, ...]:
    """Every run of ``study``: variant x policy x workload x seed, in that nesting order;
    ``overrides`` are added to every variant, over the paper's rules (:func:`with_rules`)."""
    if seeds < 1:
        raise SpecError(f"a study needs at least one seed, got {seeds}")
    if first_seed < 0:
        raise SpecError(f"seeds start at 0 or above, got {first_seed}")
    workloads = tuple(dict.fromkeys(workloads))
    chosen = tuple(dict.fromkeys(policies)) if policies is not None else study.policies
    if not workloads or not chosen:
        raise SpecError("a study needs at least one workload and one policy")
    return tuple(
        RunSpec(policy=policy, workload=workload, seed=seed, trace=trace,
                overrides=with_rules(policy, variant, overrides))
        for variant in variants_of(study, sweeps)
        for policy in chosen
        for workload in workloads
        for seed in range(first_seed, first_seed + seeds))
