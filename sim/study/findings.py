"""The paper's headline findings, each a small function judging a results table.

Fan et al. (IPDPS 2022) report, on Theta 2019: the on-demand instant-start rate is about 22%
without the mechanisms and about 98% with them; the mechanisms raise utilisation by more than
5%; N&PAA is the worst mechanism; SPAA beats PAA on utilisation; CUA beats CUP; malleable jobs
turn around faster than rigid ones.

Each function takes a :class:`~sim.study.aggregate.ResultsTable` and returns a :class:`Finding`: the
paper's figure, ours, whether the claim holds on our numbers, and where it does not, why (the
numbers that break it). Claims are judged on the table's :data:`~sim.study.aggregate.ALL` rows
(seed-wise averages over the workloads) of its reference variant. A comparison whose 95%
confidence intervals overlap is still judged by the means, and said to be within the noise.
A finding whose policies are missing from the table cannot be judged (``holds`` is ``None``).
The tolerances ("about 22%") are parameters with the defaults below.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from sim.study.aggregate import ResultsTable
from sim.study.grid import BASELINE, MECHANISM_NAMES

PAPER_BASELINE_INSTANT = 0.22
PAPER_MECHANISM_INSTANT = 0.98
INSTANT_TOLERANCE = 0.10
"""How far (in rate) our instant-start figures may be from the paper's and still be "about"."""
PAPER_UTILISATION_GAIN = 0.05
"""More than 5%, read as a relative gain over the baseline's utilisation."""
PINNED_SPREAD = 0.01
"""When every policy's utilisation lies within this (absolute), it is pinned by the load."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One headline claim: ``paper`` says it, ``ours`` is what our table shows; ``holds`` is
    ``None`` when the table cannot judge it; ``reason`` explains a failure (or the noise)."""

    key: str
    claim: str
    paper: str
    ours: str
    holds: bool | None
    reason: str = ""


def _pct(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{100 * x:.1f}%"


def _missing(table: ResultsTable, policies: Sequence[str], metric: str) -> list[str]:
    return [p for p in policies if math.isnan(table.mean(p, metric))]


def _overlap(table: ResultsTable, a: str, b: str, metric: str) -> bool:
    """Whether the 95% intervals of two policies overlap (no interval: no overlap claimed)."""
    ca, cb = table.cell(a, metric), table.cell(b, metric)
    if ca is None or cb is None or math.isnan(ca.ci95) or math.isnan(cb.ci95):
        return False
    return ca.low <= cb.high and cb.low <= ca.high


def _cannot(key: str, claim: str, paper: str, missing: Sequence[str]) -> Finding:
    return Finding(key, claim, paper, "n/a", None,
                   f"the table lacks {', '.join(missing)}, which this finding needs")


def instant_start(table: ResultsTable, *, baseline: float = PAPER_BASELINE_INSTANT,
                  mechanisms: float = PAPER_MECHANISM_INSTANT,
                  tolerance: float = INSTANT_TOLERANCE) -> Finding:
    """Baseline instant start about 22%, rising to about 98% with the mechanisms."""
    key, claim = "instant_start", "On-demand instant start: about 22% → about 98%"
    paper = f"{_pct(baseline)} → {_pct(mechanisms)}"
    present = [m for m in MECHANISM_NAMES if not math.isnan(table.mean(m, "instant_start"))]
    if math.isnan(table.mean(BASELINE, "instant_start")) or not present:
        return _cannot(key, claim, paper, _missing(table, (BASELINE, *MECHANISM_NAMES),
                                                   "instant_start"))
    base = table.mean(BASELINE, "instant_start")
    rates = [table.mean(m, "instant_start") for m in present]
    mean = sum(rates) / len(rates)
    ours = f"{_pct(base)} → {_pct(mean)} (mechanisms {_pct(min(rates))}–{_pct(max(rates))})"
    problems = []
    if abs(base - baseline) > tolerance:
        problems.append(f"the baseline starts {_pct(base)} of on-demand jobs at once, more "
                        f"than {100 * tolerance:.0f} points from {_pct(baseline)}"
                        if base > baseline else
                        f"the baseline starts only {_pct(base)} of on-demand jobs at once")
    if abs(mean - mechanisms) > tolerance:
        problems.append(f"the mechanisms reach {_pct(mean)}, not about {_pct(mechanisms)}")
    return Finding(key, claim, paper, ours, not problems, "; ".join(problems))


def utilisation_gain(table: ResultsTable, *, gain: float = PAPER_UTILISATION_GAIN,
                     pinned: float = PINNED_SPREAD) -> Finding:
    """The mechanisms raise utilisation by more than 5% (relative) over the baseline."""
    key, claim = "utilisation_gain", "Utilisation up by more than 5% with the mechanisms"
    paper = f"> +{100 * gain:.0f}%"
    present = [m for m in MECHANISM_NAMES if not math.isnan(table.mean(m, "utilisation"))]
    base = table.mean(BASELINE, "utilisation")
    if math.isnan(base) or not present or base <= 0:
        return _cannot(key, claim, paper, _missing(table, (BASELINE, *MECHANISM_NAMES),
                                                   "utilisation"))
    values = [table.mean(m, "utilisation") for m in present]
    mean = sum(values) / len(values)
    rel = mean / base - 1
    ours = (f"{_pct(base)} → {_pct(mean)} ({100 * rel:+.1f}% relative, "
            f"{100 * (mean - base):+.1f} points)")
    if rel > gain:
        return Finding(key, claim, paper, ours, True)
    spread = max([*values, base]) - min([*values, base])
    if spread < pinned:
        reason = (f"every policy's utilisation lies within {100 * spread:.2f} points: all of "
                  f"them finish the same work, and the window (first submit to last end) "
                  f"ends with the trace's last jobs whatever the policy, so utilisation is "
                  f"pinned by the offered load")
    else:
        reason = f"the mechanisms gain only {100 * rel:+.1f}% over the baseline"
    return Finding(key, claim, paper, ours, False, reason)


def npaa_worst(table: ResultsTable, *, metric: str = "turnaround_all") -> Finding:
    """N&PAA is the worst mechanism: the longest average turnaround of the six."""
    key, claim = "npaa_worst", "N&PAA is the worst mechanism (longest average turnaround)"
    paper = "N&PAA worst"
    missing = _missing(table, MECHANISM_NAMES, metric)
    if missing:
        return _cannot(key, claim, paper, missing)
    ranked = sorted(MECHANISM_NAMES, key=lambda m: table.mean(m, metric), reverse=True)
    worst = ranked[0]
    ours = (f"worst {worst} ({table.mean(worst, metric):.2f} h); N&PAA ranks "
            f"{ranked.index('N&PAA') + 1} of {len(ranked)} ({table.mean('N&PAA', metric):.2f} h)")
    if worst == "N&PAA":
        runner = ranked[1]
        noise = (f"within the 95% noise of {runner}" if _overlap(table, worst, runner, metric)
                 else "")
        return Finding(key, claim, paper, ours, True, noise)
    reason = (f"{worst} turns jobs around in {table.mean(worst, metric):.2f} h on average, "
              f"longer than N&PAA's {table.mean('N&PAA', metric):.2f} h")
    if _overlap(table, worst, "N&PAA", metric):
        reason += " (within the 95% noise)"
    return Finding(key, claim, paper, ours, False, reason)


def _pairs(table: ResultsTable, key: str, claim: str, paper: str, metric: str,
           pairs: Sequence[tuple[str, str]], better: str) -> Finding:
    """``a`` beats ``b`` on ``metric`` (``better`` is ``higher`` or ``lower``) for all pairs."""
    missing = _missing(table, [p for pair in pairs for p in pair], metric)
    if missing:
        return _cannot(key, claim, paper, missing)
    show = _pct if metric in ("utilisation", "instant_start") else (lambda x: f"{x:.2f} h")
    parts, broken, noisy = [], [], []
    for a, b in pairs:
        va, vb = table.mean(a, metric), table.mean(b, metric)
        wins = va > vb if better == "higher" else va < vb
        parts.append(f"{a} {show(va)} vs {b} {show(vb)}")
        if not wins:
            broken.append(f"{a} is not {'above' if better == 'higher' else 'below'} {b} "
                          f"({show(va)} vs {show(vb)})")
        if _overlap(table, a, b, metric):
            noisy.append(f"{a}/{b}")
    reason = "; ".join(broken)
    if noisy:
        reason += ("; " if reason else "") + f"within the 95% noise: {', '.join(noisy)}"
    return Finding(key, claim, paper, "; ".join(parts), not broken, reason)


def spaa_beats_paa(table: ResultsTable) -> Finding:
    """SPAA gives higher utilisation than PAA under every notice strategy."""
    pairs = [(f"{n}&SPAA", f"{n}&PAA") for n in ("N", "CUA", "CUP")]
    found = _pairs(table, "spaa_beats_paa", "SPAA beats PAA on utilisation", "SPAA > PAA",
                   "utilisation", pairs, "higher")
    values = [table.mean(p, "utilisation") for pair in pairs for p in pair]
    if found.holds is False and max(values) - min(values) < PINNED_SPREAD:
        return replace(found, reason=found.reason + "; utilisation is pinned by the offered "
                                                    "load (see the utilisation finding)")
    return found


def cua_beats_cup(table: ResultsTable, *, metric: str = "turnaround_all") -> Finding:
    """CUA gives shorter average turnaround than CUP under both arrival strategies."""
    return _pairs(table, "cua_beats_cup", "CUA beats CUP (shorter average turnaround)",
                  "CUA better than CUP", metric,
                  [(f"CUA&{a}", f"CUP&{a}") for a in ("PAA", "SPAA")], "lower")


def malleable_faster(table: ResultsTable) -> Finding:
    """Under every mechanism, malleable jobs turn around faster than rigid ones."""
    key, claim = "malleable_faster", "Malleable jobs turn around faster than rigid ones"
    paper = "malleable < rigid"
    missing = [m for m in MECHANISM_NAMES if math.isnan(table.mean(m, "turnaround_malleable"))
               or math.isnan(table.mean(m, "turnaround_rigid"))]
    if missing:
        return _cannot(key, claim, paper, missing)
    faster = [m for m in MECHANISM_NAMES
              if table.mean(m, "turnaround_malleable") < table.mean(m, "turnaround_rigid")]
    mal = sum(table.mean(m, "turnaround_malleable") for m in MECHANISM_NAMES) / 6
    rig = sum(table.mean(m, "turnaround_rigid") for m in MECHANISM_NAMES) / 6
    ours = (f"malleable {mal:.2f} h vs rigid {rig:.2f} h (mean of mechanisms); faster under "
            f"{len(faster)} of {len(MECHANISM_NAMES)}")
    if len(faster) == len(MECHANISM_NAMES):
        return Finding(key, claim, paper, ours, True)
    slower = [m for m in MECHANISM_NAMES if m not in faster]
    base_mal = table.mean(BASELINE, "turnaround_malleable")
    base_rig = table.mean(BASELINE, "turnaround_rigid")
    reason = f"malleable jobs are slower under {', '.join(slower)}"
    if not math.isnan(base_mal) and not math.isnan(base_rig) and base_mal >= base_rig:
        reason += (f"; they are slower already under the baseline ({base_mal:.2f} h vs "
                   f"{base_rig:.2f} h), so the gap comes from which jobs the workload model "
                   f"made malleable (their sizes and runtimes), not from the mechanisms")
    return Finding(key, claim, paper, ours, False, reason)


FINDINGS: tuple[Callable[[ResultsTable], Finding], ...] = (
    instant_start, utilisation_gain, npaa_worst, spaa_beats_paa, cua_beats_cup,
    malleable_faster)
"""The paper's headline findings, in the order of the report."""


def judge(table: ResultsTable) -> list[Finding]:
    """Every headline finding on ``table``."""
    return [f(table) for f in FINDINGS]
