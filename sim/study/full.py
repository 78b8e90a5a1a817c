"""``--study all``: everything the 17 observations need, on one or more traces, at two loads.

For each trace, after calibrating the paper's load (:mod:`sim.study.calibrate`: the factor F
at which the baseline reaches the paper's utilisation):

- ``paper``: the paper's seven policies x W1..W5 x seeds at F;
- ``saturated``: the same at a saturating load S (:func:`saturating`): at least 1.2 F, and
  enough for the work offered to reach :data:`OFFERED` of the machine, so that utilisation
  can move (at F it often cannot: every policy then does the work as it comes);
- ``checkpoint``, ``failures``, ``malleable-min``, ``setup``: the variant studies of
  observations 13-17 at each load (``<study>@paper``, ``<study>@saturated``), the six
  mechanisms on W5, their reference the same runs of the main part.

Every run follows the paper's rules (:func:`~sim.study.grid.with_rules`). Verdicts are
judged at :data:`FIRST_SEEDS` seeds; an observation undecided at a load gets more seeds for
exactly the runs its undecided parts read (:attr:`~sim.study.judging.Verdict.undecided`),
up to :data:`MAX_SEEDS` as the paper's ten traces (R18), within :data:`ESCALATION_RUNS` runs
(the verdicts that need the fewest first), and is judged again.

Every run is an ordinary :class:`~sim.run.spec.RunSpec`: all go through one runner
(:func:`~sim.study.execution.run_grid`: parallel, stored, resumable), duplicates once.
``overrides`` (``metaq experiment --set``) change a modelling choice for every run,
calibration included: the whole study under an alternative, to see which verdicts it moves.
``observations`` limits the study to the runs some observations need (to rerun one row).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from sim.run.spec import RunSpec, TraceSource
from sim.study.aggregate import ALL, ResultsTable, aggregate
from sim.study.calibrate import Calibration, calibrate
from sim.study.execution import FinishedRun
from sim.study.grid import HOUR, MECHANISM_NAMES, PAPER_POLICIES, Variant, with_rules
from sim.study.judging import Evidence, Verdict, Word
from sim.study.observations import NEEDS, judge_all
from sim.workload.model import WORKLOADS

VARIANT_STUDIES: Mapping[str, tuple[Variant, ...]] = {
    "checkpoint": ((), (("checkpoint_scale", 0.5),)),
    "failures": ((), (("failure_mtbf", 5 * HOUR), ("failure_repair", 6 * HOUR))),
    "malleable-min": ((), (("malleable_min_fraction", 0.6),)),
    "setup": ((), (("rigid_setup_shift", -0.05),), (("rigid_setup_shift", 0.05),)),
}
"""Observations 13-17's studies: the defaults (their reference) first, then the variants
the verdicts compare with them."""
VARIANT_WORKLOAD = "W5"
LOADS = ("paper", "saturated")
SATURATING = 1.2
"""The saturating load is at least this multiple of F."""
OFFERED = 1.1
"""... and high enough that the work offered is this share of the machine's capacity."""
FIRST_SEEDS = 3
MAX_SEEDS = 10
ESCALATION_RUNS = 400
"""The most runs ``--study all`` adds for undecided verdicts. On the two Theta traces the
first three seeds are 783 runs (calibration included) and the escalation asked for 350:
about 1,130 runs, 10 to 40 minutes on 2 free cores at the 1.1 to 4.2 s of CPU a run measured
(compiled and pure Python; ``docs/notebook.md``). A row left undecided says so, with the
command that decides it."""


def saturating(calibration: Calibration) -> float:
    """The saturating load factor: :data:`SATURATING` x F, or more when the work offered at
    F (``offered_load``, which grows in proportion to the factor) needs it to reach
    :data:`OFFERED`."""
    factor = calibration.factor
    offered = calibration.calibrated.get("offered_load")
    wanted = factor * OFFERED / offered if offered else 0.0
    return round(max(SATURATING * factor, wanted), 4)


@dataclass(frozen=True, slots=True)
class TracePlan:
    """The runs of one trace: ``parts[name]`` in grid order, at loads ``factors``."""

    source: TraceSource
    calibration: Calibration
    factors: Mapping[str, float]
    parts: Mapping[str, tuple[RunSpec, ...]]

    @property
    def factor(self) -> float:
        return self.calibration.factor


def _grid(source: TraceSource, variants: Sequence[Variant], policies: Sequence[str],
          workloads: Sequence[str], seeds: Sequence[int], overrides: Variant) -> \
        tuple[RunSpec, ...]:
    return tuple(RunSpec(policy=p, workload=w, seed=s, trace=source,
                         overrides=with_rules(p, v, overrides))
                 for v in variants for p in policies for w in workloads for s in seeds)


def plan(source: TraceSource, calibration: Calibration, *, seeds: Sequence[int],
         workloads: Sequence[str] = tuple(WORKLOADS), overrides: Variant = (),
         observations: Sequence[int] | None = None) -> TracePlan:
    """Every run the 17 observations (or ``observations``) need on ``source`` at both loads,
    each with ``overrides`` on top of the rules."""
    factors = {"paper": calibration.factor, "saturated": saturating(calibration)}
    wanted = set(observations or NEEDS)
    parts: dict[str, tuple[RunSpec, ...]] = {}
    for load, factor in factors.items():
        at = replace(source, load=factor)
        main = {p for n in wanted if NEEDS[n][0] == "paper" for p in NEEDS[n][1]}
        for n in wanted:
            if NEEDS[n][0] != "paper":
                main |= set(NEEDS[n][1])  # the variant studies' reference runs
        policies = [p for p in PAPER_POLICIES if p in main]
        on = workloads if any(NEEDS[n][0] == "paper" for n in wanted) else \
            (VARIANT_WORKLOAD,)
        parts[load] = _grid(at, ((),), policies, on, seeds, overrides)
        for name, variants in VARIANT_STUDIES.items():
            if any(NEEDS[n][0] == name for n in wanted):
                # the reference (variants[0]) is the main part's runs: not run twice
                parts[f"{name}@{load}"] = _grid(at, variants[1:], MECHANISM_NAMES,
                                                (VARIANT_WORKLOAD,), seeds, overrides)
    return TracePlan(source=source, calibration=calibration, factors=factors, parts=parts)


def more_seeds(trace_plan: TracePlan, load: str, verdict: Verdict,
               seeds: Sequence[int]) -> list[RunSpec]:
    """The runs the undecided parts of ``verdict`` (at ``load``) read, with ``seeds``: the
    cells they compared (policy, workload or all of them, variant or the reference)."""
    part = NEEDS[verdict.number][0]
    main = trace_plan.parts.get(load, ())
    variants = trace_plan.parts.get(f"{part}@{load}", ())
    reference = main[0].variant if main else ""  # a variant study's reference: the main runs
    base: list[RunSpec] = []
    for policy, workload, variant in sorted(verdict.undecided):
        if part == "paper" or variant in ("", reference):
            base += [s for s in main if s.policy == policy and (
                workload in (ALL, s.workload) if part == "paper"
                else s.workload == VARIANT_WORKLOAD)]
        else:
            base += [s for s in variants if s.policy == policy and s.variant == variant]
    first = min((s.seed for s in base), default=0)
    return list(dict.fromkeys(replace(s, seed=seed) for s in base if s.seed == first
                              for seed in seeds))


def every_spec(plans: Sequence[TracePlan]) -> list[RunSpec]:
    """Every distinct run of ``plans``, in plan order."""
    return list(dict.fromkeys(s for p in plans for specs in p.parts.values() for s in specs))


def tables(trace_plan: TracePlan,
           records: Mapping[RunSpec, FinishedRun]) -> dict[str, ResultsTable]:
    """One results table per part, from every record of its runs whatever their seeds; a
    variant study's includes its reference, the main part's W5 runs of the mechanisms."""
    by_part: dict[str, list[FinishedRun]] = {name: [] for name in trace_plan.parts}
    keys = {name: {_key(s) for s in specs} for name, specs in trace_plan.parts.items()}
    for spec, record in records.items():
        k = _key(spec)
        for name in trace_plan.parts:
            if k in keys[name]:
                by_part[name].append(record)
    out: dict[str, ResultsTable] = {}
    for name, found in by_part.items():
        if "@" in name:
            load = name.split("@")[1]
            found = [r for r in by_part[load] if r.spec.policy in MECHANISM_NAMES
                     and r.spec.workload == VARIANT_WORKLOAD] + found
            out[name] = aggregate(found, policies=MECHANISM_NAMES)
        elif found:
            out[name] = aggregate(found, policies=PAPER_POLICIES)
    return out


def _key(spec: RunSpec) -> RunSpec:
    """A run without its seed: which part of a plan it belongs to."""
    return replace(spec, seed=0)


@dataclass(frozen=True, slots=True)
class TraceVerdicts:
    """The 17 verdicts of one trace at each load (by the names of :attr:`TracePlan.factors`),
    under the study's reading, and observation 14's under ``mechanisms-only`` (R19's other
    reading) beside."""

    trace: str
    at: Mapping[str, tuple[Verdict, ...]]
    mechanisms_only: Mapping[str, Verdict]


def judge_trace(trace: str, parts: Mapping[str, ResultsTable], *,
                reading: str | None = None,
                loads: Sequence[str] = LOADS) -> TraceVerdicts:
    """The 17 observations at each of ``loads``, under ``reading``."""
    at: dict[str, tuple[Verdict, ...]] = {}
    plain: dict[str, Verdict] = {}
    for load in loads:
        variants = {k.split("@")[0]: t for k, t in parts.items() if k.endswith(f"@{load}")}
        at[load] = tuple(judge_all(Evidence(parts.get(load), variants, reading)))
        plain[load] = judge_all(Evidence(parts.get(load), variants, "mechanisms-only"))[13]
    return TraceVerdicts(trace, at, plain)


@dataclass(frozen=True, slots=True)
class TraceResults:
    """One trace's plan, its tables and its verdicts."""

    plan: TracePlan
    tables: Mapping[str, ResultsTable]
    verdicts: TraceVerdicts


Runner = Callable[[list[RunSpec]], list[FinishedRun]]


def run_all(sources: Sequence[TraceSource], *, seeds: Sequence[int], run: Runner,
            workloads: Sequence[str] = tuple(WORKLOADS), overrides: Variant = (),
            reading: str | None = None, max_seeds: int = MAX_SEEDS,
            escalation: int | None = ESCALATION_RUNS,
            observations: Sequence[int] | None = None) -> list[TraceResults]:
    """Calibrate each trace, run every part of every trace through ``run`` at once, judge
    the observations, add seeds up to ``max_seeds`` to the runs the undecided parts read
    (within ``escalation`` runs in all, the cheapest verdicts first; ``None``: no limit),
    and judge again; ``overrides`` apply to every run. With ``observations``, only those
    rows get more seeds: the others, judged on what those rows' runs happen to hold, are
    not what was asked."""
    calibrations = [calibrate(s, run, overrides=overrides) for s in sources]
    plans = [plan(s, c, seeds=seeds, workloads=workloads, overrides=overrides,
                  observations=observations)
             for s, c in zip(sources, calibrations, strict=True)]
    specs = every_spec(plans)
    records = dict(zip(specs, run(specs), strict=True))
    results = [_judged(p, records, reading) for p in plans]
    extra_seeds = list(range(max(seeds) + 1, min(seeds) + max_seeds))
    asked = set(observations or NEEDS)  # rows judged on runs they do not own get no seeds
    wanted = [[s for s in more_seeds(p, load, v, extra_seeds) if s not in records]
              for p, r in zip(plans, results, strict=True) for load in r.verdicts.at
              for v in r.verdicts.at[load] if v.word is Word.UNDECIDED and v.number in asked]
    more: dict[RunSpec, None] = {}
    for specs in sorted(wanted, key=len):  # the cheapest verdicts first
        new = [s for s in specs if s not in more]
        if escalation is not None and len(more) + len(new) > escalation:
            break
        more.update(dict.fromkeys(new))
    if more:
        records.update(zip(more, run(list(more)), strict=True))
        results = [_judged(p, records, reading) for p in plans]
    return results


def _judged(trace_plan: TracePlan, records: Mapping[RunSpec, FinishedRun],
            reading: str | None) -> TraceResults:
    parts = tables(trace_plan, records)
    return TraceResults(trace_plan, parts, judge_trace(trace_plan.source.describe(), parts,
                                                       reading=reading))


def two_loads(source: TraceSource, calibration: Calibration, study: str,
              own: Sequence[FinishedRun], paper: Sequence[FinishedRun], *,
              reading: str | None = None) -> TraceResults:
    """A plain study (``metaq experiment --calibrate paper``) run at the paper's load
    (``paper``) and at the trace's own (``own``), judged as ``--study all`` judges a trace
    as far as its runs go; when the study is one of observations 13-17's, its runs at each
    load are that observation's evidence."""
    def table(records: Sequence[FinishedRun]) -> ResultsTable:
        seen = {r.spec.policy for r in records}
        return aggregate(records, policies=[m for m in PAPER_POLICIES if m in seen] or
                         sorted(seen))

    tables = {"paper": table(paper), "own": table(own)}
    if study in VARIANT_STUDIES:
        tables[f"{study}@paper"] = tables["paper"]
        tables[f"{study}@own"] = tables["own"]
    parts = {"paper": tuple(r.spec for r in paper), "own": tuple(r.spec for r in own)}
    trace_plan = TracePlan(source=source, calibration=calibration,
                           factors={"paper": calibration.factor, "own": 1.0}, parts=parts)
    return TraceResults(trace_plan, tables, judge_trace(source.describe(), tables,
                                                        reading=reading,
                                                        loads=("paper", "own")))
