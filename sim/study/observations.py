"""The paper's 17 observations (``paper-observations.md``), each judged on our tables.

Every observation is a function of an :class:`Evidence`: the results tables of one trace at
one load (the policies on W1..W5, and the variant studies on W5). It returns a
:class:`Verdict`, one of four words (:class:`Word`):

- **holds**: every part of the claim shows, outside the noise;
- **contradicted**: some part shows the opposite, outside the noise;
- **undecided**: some part's difference lies inside its 95% interval (and none is
  contradicted): more seeds might decide it;
- **cannot judge**: some part cannot move at this load (utilisation, when the work offered is
  below the machine's capacity: every policy then does the work as it comes), or the
  evidence lacks a figure; and no other part is contradicted or undecided.

Each part compares runs *paired* by ``(workload, seed)``: the same hybrid workload drawn by
the same seed, under two policies (or two variants, or, for observations 11 and 12, two
workloads paired by seed). The difference of each pair is a sample; its mean with a Student-t
95% interval decides the part (:func:`_decide`). A claim against a fixed figure ("about
98%") compares the interval of the mean with the band the words allow (:func:`_band`).

A *reading* (:data:`READINGS`) says what "preempted" counts. The paper's failure study (V-C)
says failures "cause higher preemption ratio", so by default (R19) a job killed by a node
failure counts as preempted (``kills-as-preemptions``); ``mechanisms-only`` counts only the
mechanisms' preemptions, the reading before R19.

Tolerances for the paper's loose words are parameters, fixed before any run: "about
22%/98%" is within 10 points; "about 30%" within 10 points; "slightly" and "no significant
difference" are a spread under 5 points; "much more often" is at least 1.5 times;
utilisation can move where the offered load is at least :data:`SATURATED`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum

from sim.study.aggregate import ALL, Cell, ResultsTable, Row, t975
from sim.study.grid import BASELINE, MECHANISM_NAMES

ABOUT = 0.10
SLIGHT = 0.05
MUCH = 1.5
UTIL_GAIN = 0.05
SATURATED = 1.0
"""The offered load from which utilisation can differ between policies."""
CUx = ("CUA&PAA", "CUA&SPAA", "CUP&PAA", "CUP&SPAA")


READINGS: Mapping[str, tuple[str, Mapping[str, str]]] = {
    "kills-as-preemptions": (
        "a job killed by a node failure counts as preempted (R19, the default)",
        {"preempt_rigid": "preempt_or_kill_rigid",
         "preempt_malleable": "preempt_or_kill_malleable"}),
    "mechanisms-only": (
        "only the mechanisms' preemptions count", {}),
    "shrinks-as-preemptions": (
        "a malleable job shrunk counts as preempted",
        {"preempt_malleable": "preempt_or_shrink_malleable"}),
}
"""Meanings of the preemption ratios: name -> (in words, metric read -> metric used)."""
DEFAULT_READING = "kills-as-preemptions"


class Word(str, Enum):
    """A verdict."""

    HOLDS = "holds"
    CONTRADICTED = "contradicted"
    UNDECIDED = "undecided"
    CANNOT = "cannot judge"

    def __str__(self) -> str:
        return self.value


Cells = frozenset[tuple[str, str, str]]
"""The cells a quantity was read from: ``(policy, workload, variant)`` (``ALL``: every
workload; the variant ``""``: the table's reference)."""


_RANK = {Word.CONTRADICTED: 3, Word.UNDECIDED: 2, Word.CANNOT: 1, Word.HOLDS: 0}


@dataclass(frozen=True, slots=True)
class Evidence:
    """The tables one trace at one load gives: ``paper`` (every policy, W1..W5) and the
    variant studies (W5, reference variant first), any of which may be missing; ``reading``
    names one of :data:`READINGS` (``None``: the default, :data:`DEFAULT_READING`)."""

    paper: ResultsTable | None
    variants: Mapping[str, ResultsTable] = field(default_factory=dict)
    reading: str | None = None

    def read(self) -> Evidence:
        """The evidence with the reading's metrics in the places of the ones it widens; a
        table that lacks them (runs stored before they existed) lacks the widened ones."""
        reading = self.reading or DEFAULT_READING
        if reading not in READINGS:
            raise ValueError(f"unknown reading {reading!r}; choose from {', '.join(READINGS)}")
        renames = READINGS[reading][1]
        if not renames:
            return self
        return Evidence(_renamed(self.paper, renames),
                        {k: t for k, v in self.variants.items()
                         if (t := _renamed(v, renames)) is not None}, reading)


def _renamed(t: ResultsTable | None, renames: Mapping[str, str]) -> ResultsTable | None:
    if t is None:
        return None
    cells: dict[Row, dict[str, Cell]] = {}
    for row, by in t.cells.items():
        cells[row] = {k: v for k, v in by.items() if k not in renames}
        cells[row].update({old: by[new] for old, new in renames.items() if new in by})
    return replace(t, cells=cells)


@dataclass(frozen=True, slots=True)
class Verdict:
    """One observation judged: our figures (``ours``), the :class:`Word`, and the parts
    that did not hold: ``broken`` (contradicted), ``noise`` (undecided), ``unjudged``
    (cannot judge, with why). ``seeds`` is the most seeds a part rested on; ``undecided``
    the cells the undecided parts read (where more seeds may decide them)."""

    number: int
    ours: str
    word: Word
    broken: str = ""
    noise: str = ""
    unjudged: str = ""
    seeds: int = 0
    undecided: Cells = frozenset()

    @property
    def holds(self) -> bool | None:
        """``True`` when it holds, ``False`` when contradicted, ``None`` otherwise."""
        return {Word.HOLDS: True, Word.CONTRADICTED: False}.get(self.word)


@dataclass(frozen=True, slots=True)
class Observation:
    number: int
    claim: str
    judge: Callable[[Evidence], Verdict]


class _Lacking(Exception):
    """The evidence lacks a figure the observation needs."""


# --- paired samples -------------------------------------------------------------------------


Key = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Paired:
    """A quantity run by run: ``values[(workload, seed)]``, read from the cells ``cells``.
    Arithmetic pairs two quantities on the runs both have."""

    values: Mapping[Key, float]
    cells: Cells = frozenset()

    def _zip(self, other: Paired | float, op: Callable[[float, float], float]) -> Paired:
        if isinstance(other, Paired):
            return Paired({k: op(v, other.values[k]) for k, v in self.values.items()
                           if k in other.values}, self.cells | other.cells)
        return Paired({k: op(v, other) for k, v in self.values.items()}, self.cells)

    def __sub__(self, other: Paired | float) -> Paired:
        return self._zip(other, lambda a, b: a - b)

    def __add__(self, other: Paired | float) -> Paired:
        return self._zip(other, lambda a, b: a + b)

    def __mul__(self, other: Paired | float) -> Paired:
        return self._zip(other, lambda a, b: a * b)

    def __truediv__(self, other: Paired | float) -> Paired:
        return self._zip(other, lambda a, b: a / b if b else math.nan)

    def by_seed(self) -> Paired:
        """The same values keyed by seed alone (one workload's), to pair across workloads."""
        return Paired({("*", s): v for (_, s), v in self.values.items()}, self.cells)

    @property
    def mean(self) -> float:
        data = [v for v in self.values.values() if not math.isnan(v)]
        return sum(data) / len(data) if data else math.nan

    def interval(self) -> tuple[float, float, int]:
        """``(low, high, n)``: the 95% interval of the mean (Student t) over the runs."""
        data = [v for v in self.values.values() if not math.isnan(v)]
        n = len(data)
        if n == 0:
            return math.nan, math.nan, 0
        m = sum(data) / n
        if n == 1:
            return m, m, 1
        std = math.sqrt(sum((x - m) ** 2 for x in data) / (n - 1))
        half = t975(n - 1) * std / math.sqrt(n)
        return m - half, m + half, n

    def seeds(self) -> int:
        return len({s for _, s in self.values})


def average(quantities: Sequence[Paired]) -> Paired:
    """The mean of several quantities, run by run (on the runs they all have)."""
    keys = set(quantities[0].values)
    for q in quantities[1:]:
        keys &= set(q.values)
    return Paired({k: sum(q.values[k] for q in quantities) / len(quantities)
                   for k in sorted(keys)}, frozenset().union(*(q.cells for q in quantities)))


def _p(t: ResultsTable | None, policy: str, metric: str, *, workload: str = ALL,
       variant: str | None = None) -> Paired:
    if t is None:
        raise _Lacking(metric)
    c = t.cell(policy, metric, workload=_which(t, workload), variant=variant)
    if c is None or not c.samples:
        raise _Lacking(f"{policy} {metric}")
    return Paired(dict(c.samples), frozenset({(policy, workload, variant or "")}))


def _which(t: ResultsTable, workload: str) -> str:
    """A table of one workload has no :data:`ALL` rows: its one workload stands for all."""
    return t.workloads[0] if workload == ALL and len(t.workloads) == 1 else workload


def _decide(d: Paired) -> Word:
    """Whether ``d`` (a difference that the claim says is positive) is: outside the noise
    and positive (holds), outside and negative (contradicted), or inside (undecided; also
    with fewer than two runs, or no spread and no difference)."""
    low, high, n = d.interval()
    if n < 2 or math.isnan(low):
        return Word.UNDECIDED
    if low > 0:
        return Word.HOLDS
    if high < 0:
        return Word.CONTRADICTED
    return Word.UNDECIDED


def _band(x: Paired, lowest: float, highest: float) -> Word:
    """Whether the interval of ``x``'s mean lies inside ``[lowest, highest]`` (holds),
    wholly outside it (contradicted), or across an edge (undecided)."""
    low, high, n = x.interval()
    if n < 2 or math.isnan(low):
        return Word.UNDECIDED
    if lowest <= low and high <= highest:
        return Word.HOLDS
    if high < lowest or low > highest:
        return Word.CONTRADICTED
    return Word.UNDECIDED


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _h(x: float) -> str:
    return f"{x:.2f} h"


def _show(metric: str) -> Callable[[float], str]:
    return _h if metric.startswith("turn") else _pct


class _Checks:
    """Collects the parts of a claim: figures shown, and the parts that did not hold."""

    def __init__(self, table: ResultsTable | None) -> None:
        self.shown: list[str] = []
        self.parts: list[tuple[Word, str]] = []
        self.seeds = 0
        self.movable = _movable(table)
        self.undecided: set[tuple[str, str, str]] = set()

    def part(self, word: Word, shown: str, *, seeds: int = 0, utilisation: bool = False,
             cells: Cells = frozenset()) -> None:
        """One part, judged ``word`` on ``cells``; a utilisation part cannot be judged where
        utilisation cannot move (:data:`SATURATED`)."""
        self.shown.append(shown)
        self.seeds = max(self.seeds, seeds)
        if utilisation and self.movable is not None:
            word = Word.CANNOT
            shown = f"{shown}: {self.movable}"
        if word is Word.UNDECIDED:
            self.undecided |= cells
        self.parts.append((word, shown))

    def sign(self, d: Paired, shown: str, *, utilisation: bool = False) -> None:
        self.part(_decide(d), shown, seeds=d.seeds(), utilisation=utilisation, cells=d.cells)

    def band(self, x: Paired, lowest: float, highest: float, shown: str) -> None:
        self.part(_band(x, lowest, highest), shown, seeds=x.seeds(), cells=x.cells)

    def verdict(self, number: int) -> Verdict:
        word = max((w for w, _ in self.parts), key=_RANK.__getitem__, default=Word.CANNOT)

        def which(w: Word) -> str:
            return "; ".join(s for x, s in self.parts if x is w)

        return Verdict(number, "; ".join(self.shown), word, which(Word.CONTRADICTED),
                       which(Word.UNDECIDED), which(Word.CANNOT), self.seeds,
                       frozenset(self.undecided))


def _movable(t: ResultsTable | None) -> str | None:
    """``None`` when utilisation can move on ``t``'s runs, else why not."""
    if t is None:
        return None
    loads = [c.mean for row in t.cells.values() if (c := row.get("offered_load")) is not None
             and not math.isnan(c.mean)]
    if not loads:
        return None  # runs from before the figure existed: judged as before
    offered = sum(loads) / len(loads)
    if offered >= SATURATED:
        return None
    return (f"offered load {offered:.2f} < {SATURATED:g}, every policy does the work as it "
            f"comes")


# --- the observations ---------------------------------------------------------------------


def _better(c: _Checks, t: ResultsTable | None, a: str, b: str, metric: str, higher: bool,
            label: str, **where: str) -> None:
    """Part: ``a`` beats ``b`` on ``metric`` (``higher`` is better, or lower)."""
    va, vb = _p(t, a, metric, **where), _p(t, b, metric, **where)
    show = _show(metric)
    c.sign(va - vb if higher else vb - va, f"{label} {a} {show(va.mean)} vs {b} "
                                           f"{show(vb.mean)}",
           utilisation=metric == "utilisation")


def _mechs(t: ResultsTable | None, metric: str, policies: Sequence[str] = MECHANISM_NAMES,
           **where: str) -> Paired:
    return average([_p(t, m, metric, **where) for m in policies])


def obs1(e: Evidence) -> Verdict:
    t = e.paper
    c = _Checks(t)
    base_u, mech_u = _p(t, BASELINE, "utilisation"), _mechs(t, "utilisation")
    gain = mech_u / base_u - 1
    c.sign(gain - UTIL_GAIN, f"utilisation {_pct(base_u.mean)} → {_pct(mech_u.mean)} "
                             f"({100 * gain.mean:+.1f}%, paper > +5%)", utilisation=True)
    base_i, mech_i = _p(t, BASELINE, "instant_start"), _mechs(t, "instant_start")
    c.band(base_i, 0.22 - ABOUT, 0.22 + ABOUT, f"baseline instant start "
                                                f"{_pct(base_i.mean)} (paper 22%)")
    c.band(mech_i, 0.98 - ABOUT, 1.0, f"mechanisms' instant start {_pct(mech_i.mean)} "
                                      f"(paper 98%)")
    base_t, mech_t = _p(t, BASELINE, "turnaround_all"), _mechs(t, "turnaround_all")
    c.sign(mech_t - base_t, f"turnaround {_h(base_t.mean)} → {_h(mech_t.mean)} "
                            f"(paper 15 h → 22 h)")
    return c.verdict(1)


def obs2(e: Evidence) -> Verdict:
    t = e.paper
    c = _Checks(t)
    for metric, higher_is_worse, label in (("turnaround_all", True, "longest turnaround"),
                                          ("utilisation", False, "lowest utilisation"),
                                          ("preempt_malleable", True,
                                           "highest malleable preemption")):
        worst = _p(t, "N&PAA", metric)
        others = {m: _p(t, m, metric) for m in MECHANISM_NAMES if m != "N&PAA"}
        # N&PAA is worst when it is worse than the best of the rest's worst, run by run:
        # against each other mechanism in turn; the part is the weakest comparison
        diffs = [worst - o if higher_is_worse else o - worst for o in others.values()]
        words = [_decide(d) for d in diffs]
        word = max(words, key=_RANK.__getitem__)
        cells = frozenset().union(*(d.cells for d, w in zip(diffs, words, strict=True)
                                    if w is Word.UNDECIDED))
        runner = max(others, key=lambda m: others[m].mean * (1 if higher_is_worse else -1))
        show = _show(metric)
        c.part(word, f"{label}: N&PAA {show(worst.mean)}, the worst of the others {runner} "
                     f"{show(others[runner].mean)}", seeds=worst.seeds(),
               utilisation=metric == "utilisation", cells=cells)
    return c.verdict(2)


def obs3(e: Evidence) -> Verdict:
    t = e.paper
    c = _Checks(t)
    pairs = [(f"{n}&SPAA", f"{n}&PAA") for n in ("N", "CUA", "CUP")]
    for a, b in pairs:
        _better(c, t, a, b, "utilisation", True, "utilisation")
    for a, b in pairs:
        _better(c, t, a, b, "preempt_malleable", False, "malleable preemption")
    rise = _mechs(t, "preempt_rigid", [a for a, _ in pairs]) - \
        _mechs(t, "preempt_rigid", [b for _, b in pairs])
    c.band(rise, 0.0, SLIGHT, f"rigid preemption SPAA − PAA {100 * rise.mean:+.1f} points "
                              f"(paper: rises slightly)")
    return c.verdict(3)


def obs4(e: Evidence) -> Verdict:
    t = e.paper
    c = _Checks(t)
    pairs = [(f"{n}&PAA", f"{n}&SPAA") for n in ("CUA", "CUP")]
    for a, b in pairs:
        _better(c, t, a, b, "turnaround_all", False, "turnaround")
    for a, b in pairs:
        _better(c, t, a, b, "preempt_rigid", False, "rigid preemption")
    return c.verdict(4)


def obs5(e: Evidence) -> Verdict:
    t = e.paper
    c = _Checks(t)
    pairs = [(f"CUA&{a}", f"CUP&{a}") for a in ("PAA", "SPAA")]
    for a, b in pairs:
        _better(c, t, a, b, "turnaround_all", False, "turnaround")
    for a, b in pairs:
        _better(c, t, a, b, "utilisation", True, "utilisation")
    return c.verdict(5)


def obs6(e: Evidence) -> Verdict:
    t = e.paper
    c = _Checks(t)
    for m in CUx:
        mal, rig = _p(t, m, "turnaround_malleable"), _p(t, m, "turnaround_rigid")
        c.sign(rig - mal, f"{m} malleable {_h(mal.mean)} vs rigid {_h(rig.mean)}")
    return c.verdict(6)


def obs7(e: Evidence) -> Verdict:
    t = e.paper
    c = _Checks(t)
    best = _p(t, "N&SPAA", "turnaround_rigid")
    for m in MECHANISM_NAMES:
        if m != "N&SPAA":
            other = _p(t, m, "turnaround_rigid")
            c.sign(other - best, f"rigid turnaround N&SPAA {_h(best.mean)} vs {m} "
                                 f"{_h(other.mean)}")
    mal = _p(t, "N&SPAA", "turnaround_malleable")
    c.shown.append(f"N&SPAA malleable {_h(mal.mean)} (paper: both about 24 h)")
    return c.verdict(7)


def obs8(e: Evidence) -> Verdict:
    t = e.paper
    c = _Checks(t)
    for m in MECHANISM_NAMES:
        pm, pr = _p(t, m, "preempt_malleable"), _p(t, m, "preempt_rigid")
        c.sign(pm - pr, f"{m} preempted malleable {_pct(pm.mean)} vs rigid {_pct(pr.mean)}")
    mal, rig = _mechs(t, "turnaround_malleable"), _mechs(t, "turnaround_rigid")
    c.sign(rig - mal, f"yet turnaround malleable {_h(mal.mean)} vs rigid {_h(rig.mean)}")
    return c.verdict(8)


def obs9(e: Evidence) -> Verdict:
    t = e.paper
    c = _Checks(t)
    share = _p(t, BASELINE, "ondemand_work_share")
    c.band(share, 0.03, 0.15, f"on-demand work {_pct(share.mean)} (paper 3–15%)")
    rates = [_p(t, m, "instant_start") for m in MECHANISM_NAMES]
    mean = average(rates)
    c.band(mean, 0.98 - ABOUT, 1.0, f"instant start {_pct(mean.mean)} (paper about 98%)")
    keys = set(rates[0].values).intersection(*(r.values for r in rates[1:]))
    spread = Paired({k: max(r.values[k] for r in rates) - min(r.values[k] for r in rates)
                     for k in sorted(keys)}, average(rates).cells)
    c.band(spread, 0.0, SLIGHT, f"spread between mechanisms {100 * spread.mean:.1f} points")
    return c.verdict(9)


def obs10(e: Evidence) -> Verdict:
    t = e.paper
    c = _Checks(t)
    base, mech = _p(t, BASELINE, "turnaround_all"), _mechs(t, "turnaround_all")
    rise = mech / base - 1
    c.band(rise, 0.30 - ABOUT, 0.30 + ABOUT, f"turnaround {_h(base.mean)} → {_h(mech.mean)} "
                                             f"({100 * rise.mean:+.0f}%, paper about +30%)")
    return c.verdict(10)


def _workloads(t: ResultsTable | None) -> tuple[str, ...]:
    if t is None or len(t.workloads) < 2:
        raise _Lacking("workloads")
    return t.workloads


def _on(t: ResultsTable | None, policies: Sequence[str], metric: str, w: str) -> Paired:
    return _mechs(t, metric, policies, workload=w).by_seed()


def obs11(e: Evidence) -> Verdict:
    t = e.paper
    c = _Checks(t)
    cup = ("CUP&PAA", "CUP&SPAA")
    workloads = _workloads(t)
    if "W2" not in workloads:
        raise _Lacking("W2")
    for metric, higher, word in (("turnaround_all", False, "turnaround"),
                                 ("utilisation", True, "utilisation"),
                                 ("preempt_rigid", False, "rigid preemption")):
        w2 = _on(t, cup, metric, "W2")
        show = _show(metric)
        for w in workloads:
            if w != "W2":
                other = _on(t, cup, metric, w)
                c.sign(w2 - other if higher else other - w2,
                       f"CUP {word} W2 {show(w2.mean)} vs {w} {show(other.mean)}",
                       utilisation=metric == "utilisation")
    return c.verdict(11)


def obs12(e: Evidence) -> Verdict:
    t = e.paper
    c = _Checks(t)
    cua = ("CUA&PAA", "CUA&SPAA")
    workloads = _workloads(t)
    if "W4" not in workloads:
        raise _Lacking("W4")
    w4 = _on(t, cua, "turnaround_all", "W4")
    for w in workloads:
        if w != "W4":
            other = _on(t, cua, "turnaround_all", w)
            c.sign(other - w4, f"CUA turnaround W4 {_h(w4.mean)} vs {w} {_h(other.mean)}")
    inst = _on(t, cua, "instant_start", "W4")
    rest = average([_on(t, cua, "instant_start", w) for w in workloads if w != "W4"])
    c.sign(inst - rest, f"CUA instant start W4 {_pct(inst.mean)} vs others {_pct(rest.mean)}")
    return c.verdict(12)


def _variant(e: Evidence, name: str) -> ResultsTable:
    t = e.variants.get(name)
    if t is None or len(t.variants) < 2:
        raise _Lacking(name)
    return t


def _label(t: ResultsTable, key: str, value: float) -> str:
    for v in t.variants:
        if f"{key}={value:g}" in v.split(","):
            return v
    raise _Lacking(f"{key}={value:g}")


def obs13(e: Evidence) -> Verdict:
    t = _variant(e, "checkpoint")
    c = _Checks(t)
    often = _label(t, "checkpoint_scale", 0.5)
    for m in MECHANISM_NAMES:
        r0, r1 = (_p(t, m, "turnaround_rigid", variant=v) for v in (t.reference, often))
        u0, u1 = (_p(t, m, "utilisation", variant=v) for v in (t.reference, often))
        c.sign(r0 - r1, f"{m} rigid {_h(r0.mean)} → {_h(r1.mean)}")
        c.sign(u1 - u0, f"{m} utilisation {_pct(u0.mean)} → {_pct(u1.mean)}",
               utilisation=True)
    return c.verdict(13)


def obs14(e: Evidence) -> Verdict:
    t = _variant(e, "failures")
    c = _Checks(t)
    worst = t.variants[-1]
    for metric, up in (("utilisation", False), ("instant_start", False),
                       ("preempt_rigid", True), ("preempt_malleable", True),
                       ("turnaround_rigid", True)):
        a = _mechs(t, metric, variant=t.reference)
        b = _mechs(t, metric, variant=worst)
        show = _show(metric)
        c.sign(b - a if up else a - b, f"{metric} {show(a.mean)} → {show(b.mean)}",
               utilisation=metric == "utilisation")
    c.shown.append(f"({worst} against none, mean of the six)")
    return c.verdict(14)


def obs15(e: Evidence) -> Verdict:
    t = _variant(e, "malleable-min")
    c = _Checks(t)
    big = t.variants[-1]
    rise = {m: _p(t, m, "turnaround_all", variant=big) - _p(t, m, "turnaround_all",
                                                            variant=t.reference)
            for m in MECHANISM_NAMES}
    mean = average(list(rise.values()))
    c.sign(mean, f"turnaround {mean.mean:+.2f} h from {t.reference} to {big} (mean)")
    spaa = average([rise[m] for m in MECHANISM_NAMES if m.endswith("SPAA")])
    paa = average([rise[m] for m in MECHANISM_NAMES if m.endswith("&PAA")])
    c.sign(spaa - paa, f"under SPAA {spaa.mean:+.2f} h vs PAA {paa.mean:+.2f} h")
    return c.verdict(15)


def obs16(e: Evidence) -> Verdict:
    t = _variant(e, "setup")
    c = _Checks(t)
    low, high = _label(t, "rigid_setup_shift", -0.05), _label(t, "rigid_setup_shift", 0.05)
    turn = [_mechs(t, "turnaround_all", variant=v) for v in (low, t.reference, high)]
    util = [_mechs(t, "utilisation", variant=v) for v in (low, t.reference, high)]
    shown = " / ".join(_h(x.mean) for x in turn)
    c.sign(turn[1] - turn[0], f"turnaround at rigid setup 0–5/5–10/10–15%: {shown} (first "
                              f"step)")
    c.sign(turn[2] - turn[1], "turnaround, second step")
    shown = " / ".join(_pct(x.mean) for x in util)
    c.sign(util[0] - util[1], f"utilisation {shown} (first step)", utilisation=True)
    c.sign(util[1] - util[2], "utilisation, second step", utilisation=True)
    return c.verdict(16)


def obs17(e: Evidence) -> Verdict:
    t = _variant(e, "setup")
    c = _Checks(t)
    low = _label(t, "rigid_setup_shift", -0.05)
    a = _mechs(t, "preempt_rigid", variant=t.reference)
    b = _mechs(t, "preempt_rigid", variant=low)
    c.sign(b - a * MUCH, f"rigid preemption {_pct(a.mean)} at 5–10% setup → {_pct(b.mean)} "
                         f"at 0–5% (much more: ≥ {MUCH:g}x)")
    return c.verdict(17)


OBSERVATIONS: tuple[Observation, ...] = (
    Observation(1, "The mechanisms raise utilisation by > 5%, instant start 22% → 98%, "
                   "turnaround 15 h → 22 h", obs1),
    Observation(2, "N&PAA is worst: longest turnaround, lowest utilisation, most malleable "
                   "preemption", obs2),
    Observation(3, "SPAA beats PAA on utilisation and malleable preemption; rigid preemption "
                   "rises slightly", obs3),
    Observation(4, "PAA (N excepted) gives lower turnaround and rigid preemption than SPAA", obs4),
    Observation(5, "CUA beats CUP slightly on turnaround and utilisation", obs5),
    Observation(6, "Under CUA/CUP × PAA/SPAA malleable jobs turn around faster than rigid",
                obs6),
    Observation(7, "N&SPAA gives the lowest rigid-job turnaround of the six", obs7),
    Observation(8, "Malleable jobs are preempted more often than rigid, yet turn around "
                   "faster", obs8),
    Observation(9, "On-demand work is 3–15%; about 98% start at once under every mechanism",
                obs9),
    Observation(10, "The mechanisms raise average turnaround by about 30%", obs10),
    Observation(11, "CUP does best on W2 (accurate notices)", obs11),
    Observation(12, "CUA has its lowest turnaround on W4 (late arrivals); instant start rises",
                obs12),
    Observation(13, "Checkpointing more often than Daly's optimum helps every mechanism", obs13),
    Observation(14, "Failures lower utilisation and instant start, raise preemption and rigid "
                    "turnaround", obs14),
    Observation(15, "A larger malleable minimum hurts, most of all under SPAA", obs15),
    Observation(16, "A lower setup overhead is better", obs16),
    Observation(17, "With rigid setup at 0–5% rigid jobs are preempted much more often", obs17),
)

NEEDS: Mapping[int, tuple[str, tuple[str, ...]]] = {
    **{n: ("paper", ("easy", *MECHANISM_NAMES)) for n in (1, 9, 10)},
    **{n: ("paper", MECHANISM_NAMES) for n in (2, 3, 5, 7, 8)},
    4: ("paper", CUx), 6: ("paper", CUx),
    11: ("paper", ("CUP&PAA", "CUP&SPAA")), 12: ("paper", ("CUA&PAA", "CUA&SPAA")),
    13: ("checkpoint", MECHANISM_NAMES), 14: ("failures", MECHANISM_NAMES),
    15: ("malleable-min", MECHANISM_NAMES), 16: ("setup", MECHANISM_NAMES),
    17: ("setup", MECHANISM_NAMES),
}
"""For each observation, the part of the study whose runs it reads and the policies in them:
what more seeds must run when its verdict is undecided (:mod:`sim.study.full`)."""


def judge_all(evidence: Evidence) -> list[Verdict]:
    """Every observation on ``evidence`` (under its reading); one that lacks figures cannot
    be judged."""
    evidence = evidence.read()
    out = []
    for o in OBSERVATIONS:
        try:
            out.append(o.judge(evidence))
        except _Lacking as e:
            out.append(Verdict(o.number, "n/a", Word.CANNOT,
                               unjudged=f"the study lacks {e.args[0]}"))
    return out
