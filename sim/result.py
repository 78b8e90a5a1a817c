"""What one simulated run produced: per-job outcomes, the machine over time, decision timings.

:class:`SimulationResult` is what :func:`sim.engine.simulate` returns and what the outputs
(:mod:`sim.report`, :mod:`sim.plots`) and the experiments read. Its :meth:`summary` is the
run judged by :mod:`sim.metrics`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import overload

import numpy as np

from sim.metrics import JobOutcome, Summary, summarise


@dataclass(frozen=True, slots=True, eq=False)
class Series:
    """The machine sampled after every instant at which something happened.

    ``busy[i]`` nodes were running jobs, ``queued[i]`` jobs were waiting and ``reserved[i]``
    idle nodes were held for advance notices from ``time[i]`` until ``time[i + 1]``: the
    series is a step function, exact between events.
    """

    time: np.ndarray
    busy: np.ndarray
    queued: np.ndarray
    reserved: np.ndarray

    def __len__(self) -> int:
        return len(self.time)


class Outcomes(Sequence[JobOutcome]):
    """The per-job outcomes of a run, built on first use.

    The engine keeps its own compact record of every job and hands over a ``build`` function
    instead of a million :class:`~sim.metrics.JobOutcome` objects, so a run whose outcomes are
    never read (a benchmark, a summary-only sweep) never pays for them. Reading it (indexing,
    iterating; ``len`` is known without it) builds the tuple once; it pickles as that plain tuple.
    """

    __slots__ = ("_build", "_count", "_items")

    def __init__(self, build: Callable[[], tuple[JobOutcome, ...]], count: int) -> None:
        """``build`` returns the ``count`` outcomes."""
        self._build: Callable[[], tuple[JobOutcome, ...]] | None = build
        self._count = count
        self._items: tuple[JobOutcome, ...] = ()

    def _get(self) -> tuple[JobOutcome, ...]:
        if self._build is not None:
            self._items = self._build()
            self._build = None  # frees the engine's records
        return self._items

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, i: int) -> JobOutcome: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[JobOutcome, ...]: ...
    def __getitem__(self, i: int | slice) -> JobOutcome | tuple[JobOutcome, ...]:
        return self._get()[i]

    def __iter__(self) -> Iterator[JobOutcome]:
        return iter(self._get())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Outcomes):
            other = other._get()
        return self._get() == other

    __hash__ = None  # type: ignore[assignment]  # like a list: compares by content

    def __repr__(self) -> str:
        return f"Outcomes({self._get()!r})"

    def __reduce__(self) -> tuple[type, tuple[tuple[JobOutcome, ...]]]:
        return tuple, (self._get(),)


@dataclass(frozen=True, slots=True, eq=False)
class SimulationResult:
    """One run of ``policy`` on a ``nodes``-node machine.

    ``oracle``: decisions used true runtimes; ``cqsim_oracle``: only for waiting jobs, running
    ones being planned by their walltimes (CQSim's behaviour).

    ``outcomes`` has one :class:`~sim.metrics.JobOutcome` per submitted job, in submit order
    (a job that never started or never finished has ``start``/``end`` ``None``); the engine
    passes an :class:`Outcomes`, built when first read.
    ``decision_seconds`` is the wall-clock time of every ``decide`` call; ``events`` counts the
    events the engine handled (stale ones included) and ``wall_seconds`` is the whole run.
    """

    policy: str
    oracle: bool
    cqsim_oracle: bool
    nodes: int
    hybrid: bool
    outcomes: Sequence[JobOutcome]
    decision_seconds: np.ndarray
    series: Series
    events: int
    wall_seconds: float

    @property
    def events_per_second(self) -> float:
        """Events handled per wall-clock second (infinite for an instantaneous run)."""
        return self.events / self.wall_seconds if self.wall_seconds > 0 else float("inf")

    @property
    def jobs_per_second(self) -> float:
        """Jobs simulated per wall-clock second."""
        n = len(self.outcomes)
        return n / self.wall_seconds if self.wall_seconds > 0 else float("inf")

    def summary(self, *, window: tuple[float, float] | None = None,
                extra: Mapping[str, object] | None = None) -> Summary:
        """Every metric of the run (window: first submit to last end unless given)."""
        return summarise(self.outcomes, nodes=self.nodes, window=window,
                         decision_durations=self.decision_seconds, extra=extra)
