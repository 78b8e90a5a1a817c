"""How a claim of the paper is judged on our runs: the four verdicts (:class:`Word`), the
evidence of one trace at one load (:class:`Evidence`), paired samples (:class:`Paired`) and
the parts of a claim (:class:`Checks`). The 17 claims themselves are in
:mod:`sim.study.observations`.

Each part compares runs *paired* by ``(workload, seed)``: the same hybrid workload drawn by
the same seed, under two policies (or two variants, or, for observations 11 and 12, two
workloads paired by seed). The difference of each pair is a sample; its mean with a Student-t
95% interval decides the part (:func:`decide`). A claim against a fixed figure ("about
98%") compares the interval of the mean with the band the words allow (:func:`_band`).

A *reading* (:data:`READINGS`) says what "preempted" counts. The paper's failure study (V-C)
says failures "cause higher preemption ratio", so by default (R19) a job killed by a node
failure counts as preempted (``kills-as-preemptions``); ``mechanisms-only`` counts only the
mechanisms' preemptions, the reading before R19.

Tolerances for the paper's loose words are parameters, fixed before any run: "about
22%/98%" is within 10 points; "about 30%" within 10 points; "slightly" and "no significant
difference" are a spread under 5 points; "much more often" is at least 1.5 times;
utilisation can move where the offered load is at least :data:`SATURATED` and the
steady-state window lasts at least :data:`SETTLES` mean runtimes (a trace too small for its
load has a window a few jobs long: no queue settles in it).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum

from sim.study.aggregate import ALL, Cell, ResultsTable, Row, t975
from sim.study.grid import MECHANISM_NAMES

ABOUT = 0.10
SLIGHT = 0.05
MUCH = 1.5
UTIL_GAIN = 0.05
SATURATED = 1.0
"""The offered load from which utilisation can differ between policies."""
SETTLES = 10.0
"""The fewest mean runtimes the steady-state window must last for a queue to settle in it."""
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


RANK = {Word.CONTRADICTED: 3, Word.UNDECIDED: 2, Word.CANNOT: 1, Word.HOLDS: 0}


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


class Lacking(Exception):
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


def paired(t: ResultsTable | None, policy: str, metric: str, *, workload: str = ALL,
       variant: str | None = None) -> Paired:
    if t is None:
        raise Lacking(metric)
    c = t.cell(policy, metric, workload=_which(t, workload), variant=variant)
    if c is None or not c.samples:
        raise Lacking(f"{policy} {metric}")
    return Paired(dict(c.samples), frozenset({(policy, workload, variant or "")}))


def _which(t: ResultsTable, workload: str) -> str:
    """A table of one workload has no :data:`ALL` rows: its one workload stands for all."""
    return t.workloads[0] if workload == ALL and len(t.workloads) == 1 else workload


def decide(d: Paired) -> Word:
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


def percent(x: float) -> str:
    return f"{100 * x:.1f}%"


def hours(x: float) -> str:
    return f"{x:.2f} h"


def show_of(metric: str) -> Callable[[float], str]:
    return hours if metric.startswith("turn") else percent


class Checks:
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
        self.part(decide(d), shown, seeds=d.seeds(), utilisation=utilisation, cells=d.cells)

    def band(self, x: Paired, lowest: float, highest: float, shown: str) -> None:
        self.part(_band(x, lowest, highest), shown, seeds=x.seeds(), cells=x.cells)

    def verdict(self, number: int) -> Verdict:
        word = max((w for w, _ in self.parts), key=RANK.__getitem__, default=Word.CANNOT)

        def which(w: Word) -> str:
            return "; ".join(s for x, s in self.parts if x is w)

        return Verdict(number, "; ".join(self.shown), word, which(Word.CONTRADICTED),
                       which(Word.UNDECIDED), which(Word.CANNOT), self.seeds,
                       frozenset(self.undecided))


def _mean_of(t: ResultsTable, key: str) -> float | None:
    """The mean of ``key`` over every cell of ``t``; ``None`` where no run has it (runs from
    before the figure existed)."""
    values = [c.mean for row in t.cells.values() if (c := row.get(key)) is not None
              and not math.isnan(c.mean)]
    return sum(values) / len(values) if values else None


def _movable(t: ResultsTable | None) -> str | None:
    """``None`` when utilisation can move on ``t``'s runs, else why not."""
    if t is None:
        return None
    window = _mean_of(t, "window_runtimes")
    if window is not None and window < SETTLES:
        return (f"the steady-state window lasts {window:.1f} mean runtimes (< {SETTLES:g}): "
                f"the trace is too small for this load, no queue settles in it")
    offered = _mean_of(t, "offered_load")
    if offered is None or offered >= SATURATED:
        return None
    return (f"offered load {offered:.2f} < {SATURATED:g}, every policy does the work as it "
            f"comes")


# --- parts every observation uses -----------------------------------------------------------


def better(c: Checks, t: ResultsTable | None, a: str, b: str, metric: str, higher: bool,
            label: str, **where: str) -> None:
    """Part: ``a`` beats ``b`` on ``metric`` (``higher`` is better, or lower)."""
    va, vb = paired(t, a, metric, **where), paired(t, b, metric, **where)
    show = show_of(metric)
    c.sign(va - vb if higher else vb - va, f"{label} {a} {show(va.mean)} vs {b} "
                                           f"{show(vb.mean)}",
           utilisation=metric == "utilisation")


def mechs(t: ResultsTable | None, metric: str, policies: Sequence[str] = MECHANISM_NAMES,
           **where: str) -> Paired:
    return average([paired(t, m, metric, **where) for m in policies])
