"""Finding the load at which our baseline matches the paper's: ``--calibrate paper``.

The paper's Theta 2019 baseline (FCFS with EASY, its Table III) ran at 83.93% utilisation;
our traces run lighter or heavier. :func:`calibrate` finds the load factor ``F``
(:func:`sim.trace.scaling.scale_load`: inter-arrival gaps divided by ``F``) at which baseline
EASY reaches that utilisation, by bisection on ``F``.

Which utilisation: the paper's definition as we read it (``utilisation_paper``: useful
node-hours over the node-hours from the first submit to the last end), since the target is
the paper's own figure. The baseline ignores notices, so one workload (W5) and one seed (0)
stand for it; every step is an ordinary run, stored and reused like any other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from sim.run.spec import RunSpec, TraceSource
from sim.study.execution import FinishedRun
from sim.study.grid import BASELINE, Variant, with_rules

PAPER_TABLE_III: Mapping[str, float] = {
    "utilisation_paper": 0.8393, "turnaround_all": 15.6, "instant_start": 0.2269}
"""The paper's Theta 2019 baseline: utilisation, average turnaround (h), instant-start rate."""
CALIBRATION_METRIC = "utilisation_paper"
TOLERANCE = 0.001
"""Bisection stops when the utilisation is this close to the target (absolute)."""
MAX_STEPS = 12

Runner = Callable[[list[RunSpec]], list[FinishedRun]]
"""Runs some specs and returns their records in order (a stored, parallel grid runner)."""


@dataclass(frozen=True, slots=True)
class Calibration:
    """The load ``factor`` at which baseline EASY on ``trace`` reaches ``target``;
    ``reached`` is the utilisation there, ``steps`` every ``(factor, utilisation)`` tried,
    ``own`` and ``calibrated`` the baseline's figures at load 1 and at ``factor``."""

    trace: str
    factor: float
    target: float
    reached: float
    steps: tuple[tuple[float, float], ...]
    own: Mapping[str, float | None]
    calibrated: Mapping[str, float | None]

    @property
    def met(self) -> bool:
        return abs(self.reached - self.target) <= TOLERANCE


def _spec(source: TraceSource, factor: float, overrides: Variant) -> RunSpec:
    return RunSpec(policy=BASELINE, workload="W5", seed=0,
                   trace=replace(source, load=round(factor, 4)),
                   overrides=with_rules(BASELINE, (), overrides))


def calibrate(source: TraceSource, run: Runner, *,
              target: float = PAPER_TABLE_III[CALIBRATION_METRIC],
              overrides: Variant = ()) -> Calibration:
    """The load factor at which baseline EASY on ``source`` (with ``overrides``, the
    modelling choices the study runs under) reaches ``target``.

    The first guess is ``target`` over the utilisation at load 1 (utilisation grows about in
    proportion below saturation); then the bracket is widened until it holds the target and
    halved until the utilisation is within :data:`TOLERANCE` or :data:`MAX_STEPS` runs."""
    steps: list[tuple[float, float]] = []
    records: dict[float, FinishedRun] = {}

    def at(factor: float) -> float:
        factor = round(factor, 4)
        if factor not in records:
            records[factor] = run([_spec(source, factor, overrides)])[0]
            steps.append((factor, _value(records[factor])))
        return _value(records[factor])

    def close(factor: float) -> bool:
        return abs(at(factor) - target) <= TOLERANCE

    own = at(1.0)
    guess = max(0.05, target / own) if own > 0 else 1.0
    if not close(1.0) and not close(guess):
        low, high = (1.0, guess) if guess >= 1.0 else (guess, 1.0)
        while at(low) > target and len(steps) < MAX_STEPS:
            low /= 1.25
        while at(high) < target and len(steps) < MAX_STEPS:
            high *= 1.25
        while len(steps) < MAX_STEPS:
            middle = (low + high) / 2
            if close(middle):
                break
            low, high = (middle, high) if at(middle) < target else (low, middle)
    best = min(records, key=lambda f: (abs(at(f) - target), f))
    best = round(best, 4)
    return Calibration(trace=source.describe(), factor=best, target=target, reached=at(best),
                       steps=tuple(steps), own=dict(records[1.0].metrics),
                       calibrated=dict(records[best].metrics))


def _value(record: FinishedRun) -> float:
    value = record.metrics.get(CALIBRATION_METRIC)
    return float("nan") if value is None else float(value)


def table_iii(calibration: Calibration) -> list[list[str]]:
    """Rows of the comparison with the paper's Table III: paper, ours at the trace's own
    load, ours at the calibrated load."""
    def row(name: str, m: Mapping[str, float | None]) -> list[str]:
        def pct(key: str) -> str:
            v = m.get(key)
            return "n/a" if v is None else f"{100 * v:.2f}%"
        ta = m.get("turnaround_all")
        return [name, pct("utilisation_paper"), pct("utilisation"),
                "n/a" if ta is None else f"{ta:.1f} h", pct("instant_start")]

    paper = dict(PAPER_TABLE_III)
    return [
        ["paper, Theta 2019 (Table III)", f"{100 * paper['utilisation_paper']:.2f}%", "n/a",
         f"{paper['turnaround_all']:.1f} h", f"{100 * paper['instant_start']:.2f}%"],
        row(f"ours, {calibration.trace}, own load (x1)", calibration.own),
        row(f"ours, {calibration.trace}, load x{calibration.factor:g}", calibration.calibrated),
    ]


TABLE_III_HEADER = ["Baseline EASY", "Utilisation (paper's reading)",
                    "Utilisation (steady state)", "Avg turnaround", "Instant-start rate"]
