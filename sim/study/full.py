"""``--study all``: everything the 17 observations need, on one or more traces.

For each trace, after calibrating the paper's load (:mod:`sim.study.calibrate`, factor F):

- ``own``: the paper's seven policies x W1..W5 x seeds at the trace's own load (x1);
- ``paper``: the same at F;
- ``checkpoint``, ``failures``, ``malleable-min``, ``setup``: the variant studies of
  observations 13-17, at F, on W5 (the equal mix of notice categories), the defaults as
  their reference (the same runs as ``paper``'s W5, so they are not run twice);
- ``load-0.8`` and ``load-1.2``: W5 at 0.8 F and 1.2 F, for the sensitivity of the ranking.

Every run is an ordinary :class:`~sim.run.spec.RunSpec`: all of them go through one
:func:`~sim.study.execution.run_grid` (parallel, stored, resumable), duplicates once.

``overrides`` (``metaq experiment --set``) change a modelling choice for every run,
calibration included: the whole study under an alternative, to see which verdicts it moves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from metaq_py.policy.mechanisms import MECHANISMS
from sim.run.spec import RunSpec, TraceSource
from sim.study.aggregate import ResultsTable, aggregate
from sim.study.calibrate import Calibration, calibrate
from sim.study.execution import FinishedRun
from sim.study.grid import HOUR, PAPER_POLICIES, Variant, with_overrides
from sim.study.observations import Evidence, Verdict, judge_all
from sim.workload.model import WORKLOADS

VARIANT_STUDIES: Mapping[str, tuple[Variant, ...]] = {
    "checkpoint": ((), (("checkpoint_scale", 0.5),), (("checkpoint_scale", 2.0),)),
    "failures": ((), (("failure_mtbf", 50 * HOUR), ("failure_repair", 6 * HOUR)),
                 (("failure_mtbf", 5 * HOUR), ("failure_repair", 6 * HOUR))),
    "malleable-min": ((), (("malleable_min_fraction", 0.4),),
                      (("malleable_min_fraction", 0.6),)),
    "setup": ((), (("rigid_setup_shift", -0.05),), (("rigid_setup_shift", 0.05),)),
}
"""Observations 13-17's studies; the defaults, their reference, come first."""
VARIANT_WORKLOAD = "W5"
SENSITIVITY_LOADS = (0.8, 1.2)
"""Multiples of the calibrated load F for the sensitivity of the ranking."""


@dataclass(frozen=True, slots=True)
class TracePlan:
    """The runs of one trace: ``parts[name]`` in grid order."""

    source: TraceSource
    calibration: Calibration
    parts: Mapping[str, tuple[RunSpec, ...]]

    @property
    def factor(self) -> float:
        return self.calibration.factor


def _grid(source: TraceSource, variants: Sequence[Variant], workloads: Sequence[str],
          seeds: Sequence[int], overrides: Variant) -> tuple[RunSpec, ...]:
    return tuple(RunSpec(policy=p, workload=w, seed=s, trace=source,
                         overrides=with_overrides(v, overrides))
                 for v in variants for p in PAPER_POLICIES for w in workloads for s in seeds)


def plan(source: TraceSource, calibration: Calibration, *, seeds: Sequence[int],
         workloads: Sequence[str] = tuple(WORKLOADS), overrides: Variant = (),
         variant_workloads: Sequence[str] = (VARIANT_WORKLOAD,)) -> TracePlan:
    """Every run the 17 observations need on ``source`` (at load 1) calibrated to F, each
    with ``overrides`` on top of its own; the variant studies on ``variant_workloads``."""
    factor = calibration.factor
    at_f = replace(source, load=factor)
    parts: dict[str, tuple[RunSpec, ...]] = {
        "own": _grid(replace(source, load=1.0), ((),), workloads, seeds, overrides),
        "paper": _grid(at_f, ((),), workloads, seeds, overrides),
    }
    for name, variants in VARIANT_STUDIES.items():
        parts[name] = _grid(at_f, variants, variant_workloads, seeds, overrides)
    for multiple in SENSITIVITY_LOADS:
        scaled = replace(source, load=round(factor * multiple, 4))
        parts[f"load-{multiple:g}"] = _grid(scaled, ((),), (VARIANT_WORKLOAD,), seeds,
                                            overrides)
    return TracePlan(source=source, calibration=calibration, parts=parts)


def every_spec(plans: Sequence[TracePlan]) -> list[RunSpec]:
    """Every distinct run of ``plans``, in plan order."""
    return list(dict.fromkeys(s for p in plans for specs in p.parts.values() for s in specs))


def tables(trace_plan: TracePlan,
           records: Mapping[RunSpec, FinishedRun]) -> dict[str, ResultsTable]:
    """One results table per part (a variant study's reference is its defaults)."""
    return {name: aggregate([records[s] for s in specs], policies=PAPER_POLICIES)
            for name, specs in trace_plan.parts.items()}


@dataclass(frozen=True, slots=True)
class TraceVerdicts:
    """The 17 verdicts of one trace at the paper's load and at its own."""

    trace: str
    paper: tuple[Verdict, ...]
    own: tuple[Verdict, ...]


def judge_trace(trace: str, parts: Mapping[str, ResultsTable], *,
                reading: str | None = None) -> TraceVerdicts:
    """Observations 1-12 at both loads; 13-17 from the variant studies (at the paper's);
    under ``reading`` (:data:`~sim.study.observations.READINGS`) when one is named."""
    variants = {k: parts[k] for k in VARIANT_STUDIES if k in parts}
    at_paper = judge_all(Evidence(parts.get("paper"), variants, reading))
    at_own = judge_all(Evidence(parts.get("own"), {}, reading))
    return TraceVerdicts(trace, tuple(at_paper), tuple(at_own))


@dataclass(frozen=True, slots=True)
class TraceResults:
    """One trace's plan, its tables and its verdicts."""

    plan: TracePlan
    tables: Mapping[str, ResultsTable]
    verdicts: TraceVerdicts


def run_all(sources: Sequence[TraceSource], *, seeds: Sequence[int],
            run: Callable[[list[RunSpec]], list[FinishedRun]],
            workloads: Sequence[str] = tuple(WORKLOADS), overrides: Variant = (),
            reading: str | None = None,
            variant_workloads: Sequence[str] = (VARIANT_WORKLOAD,)) -> list[TraceResults]:
    """Calibrate each trace, run every part of every trace through ``run`` at once, and
    judge the 17 observations per trace (under ``reading``; 13-17 averaged over
    ``variant_workloads``); ``overrides`` apply to every run."""
    calibrations = [calibrate(s, run, overrides=overrides) for s in sources]
    plans = [plan(s, c, seeds=seeds, workloads=workloads, overrides=overrides,
                  variant_workloads=variant_workloads)
             for s, c in zip(sources, calibrations, strict=True)]
    specs = every_spec(plans)
    records = dict(zip(specs, run(specs), strict=True))
    out = []
    for p in plans:
        parts = tables(p, records)
        out.append(TraceResults(p, parts, judge_trace(p.source.describe(), parts,
                                                      reading=reading)))
    return out


def two_loads(source: TraceSource, calibration: Calibration, study: str,
              own: Sequence[FinishedRun], paper: Sequence[FinishedRun], *,
              reading: str | None = None) -> TraceResults:
    """A plain study (``metaq experiment --calibrate paper``) run at the trace's own load
    (``own``) and at the paper's (``paper``), as ``--study all`` reads one trace: the parts
    ``own`` and ``paper``, and, when the study is one of observations 13-17's, its runs at
    the paper's load as that observation's evidence."""
    def table(records: Sequence[FinishedRun]) -> ResultsTable:
        seen = {r.spec.policy for r in records}
        return aggregate(records, policies=[m for m in MECHANISMS if m in seen])

    tables = {"own": table(own), "paper": table(paper)}
    if study in VARIANT_STUDIES:
        tables[study] = tables["paper"]
    parts = {"own": tuple(r.spec for r in own), "paper": tuple(r.spec for r in paper)}
    trace_plan = TracePlan(source=source, calibration=calibration, parts=parts)
    return TraceResults(trace_plan, tables,
                        judge_trace(source.describe(), tables, reading=reading))
