"""What one simulated run produced: per-job outcomes, the machine over time, decision timings.

:class:`SimulationResult` is what :func:`sim.engine.core.simulate` returns and what the outputs
(:mod:`sim.run.outputs`, :mod:`sim.run.plots`) and the experiments read. Its :meth:`summary` is the
run judged by :mod:`sim.run.metrics`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import overload

import numpy as np

from metaq_py.policy.model import JobId, Kind
from sim.run.metrics import KIND_CODE, KIND_CODES, Columns, JobOutcome, Summary, summarise


@dataclass(frozen=True, slots=True, eq=False)
class Series:
    """The machine sampled after every instant at which something happened.

    ``busy[i]`` nodes were running jobs, ``queued[i]`` jobs were waiting and ``reserved[i]``
    idle nodes were held for advance notices from ``time[i]`` until ``time[i + 1]``: the
    series is a step function, exact between agenda items.
    """

    time: np.ndarray
    busy: np.ndarray
    queued: np.ndarray
    reserved: np.ndarray

    def __len__(self) -> int:
        return len(self.time)


class Outcomes(Sequence[JobOutcome]):
    """The per-job outcomes of a run: the engine's columns, as values built on first use.

    The metrics read :attr:`columns` directly, so a run whose outcomes are never read one by
    one (a benchmark, a summary-only sweep) never builds a million
    :class:`~sim.run.metrics.JobOutcome` objects. Reading it (indexing, iterating; ``len`` is
    known without it) builds the tuple once; it pickles as that plain tuple.
    """

    __slots__ = ("_categories", "_ids", "_items", "columns")

    def __init__(self, columns: Columns, ids: Sequence[JobId],
                 categories: Mapping[JobId, str]) -> None:
        """One row of ``columns`` per job, whose ids are ``ids``; ``categories`` gives the
        notice category of each on-demand job."""
        self.columns = columns
        self._ids = ids
        self._categories = categories
        self._items: tuple[JobOutcome, ...] | None = None

    @property
    def ids(self) -> Sequence[JobId]:
        """The job ids, one per row of :attr:`columns`."""
        return self._ids

    @property
    def categories(self) -> Mapping[JobId, str]:
        """The notice category of each on-demand job."""
        return self._categories

    def _get(self) -> tuple[JobOutcome, ...]:
        if self._items is None:
            self._items = self._build()
        return self._items

    def _build(self) -> tuple[JobOutcome, ...]:
        c, categories = self.columns, self._categories
        ondemand = KIND_CODE[Kind.ONDEMAND]
        out = []
        for jid, code, size, submit, runtime, useful, start, end, pre, shr, lost, instant in zip(
                self._ids, c.kind.tolist(), c.size.tolist(), c.submit.tolist(),
                c.runtime.tolist(), c.useful.tolist(), c.start.tolist(), c.end.tolist(),
                c.preemptions.tolist(), c.shrinks.tolist(), c.lost.tolist(), c.instant.tolist(),
                strict=True):
            od = code == ondemand
            out.append(JobOutcome(
                id=jid, kind=KIND_CODES[code], size=size, submit=submit,
                start=None if start != start else start,  # NaN (never started) is unequal
                end=None if end != end else end, runtime=runtime, useful_node_seconds=useful,
                preemptions=pre, shrinks=shr,
                lost_node_seconds=lost or 0.0,  # share one 0.0 object, as most jobs lose none
                instant_start=instant if od else None,
                notice=categories.get(jid) if od else None))
        return tuple(out)

    def __len__(self) -> int:
        return len(self._ids)

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

    ``outcomes`` has one :class:`~sim.run.metrics.JobOutcome` per submitted job, in submit order
    (a job that never started or never finished has ``start``/``end`` ``None``); the engine
    passes an :class:`Outcomes`, built when first read.
    ``decision_seconds`` is the wall-clock time of every ``decide`` call; ``agenda_items``
    counts the agenda items the engine handled (stale ones included) and ``wall_seconds`` is
    the whole run.
    """

    policy: str
    oracle: bool
    cqsim_oracle: bool
    nodes: int
    hybrid: bool
    outcomes: Sequence[JobOutcome]
    decision_seconds: np.ndarray
    series: Series
    agenda_items: int
    wall_seconds: float

    @property
    def agenda_items_per_second(self) -> float:
        """Agenda items handled per wall-clock second (infinite for an instantaneous run)."""
        return self.agenda_items / self.wall_seconds if self.wall_seconds > 0 else float("inf")

    @property
    def jobs_per_second(self) -> float:
        """Jobs simulated per wall-clock second."""
        n = len(self.outcomes)
        return n / self.wall_seconds if self.wall_seconds > 0 else float("inf")

    def summary(self, *, window: tuple[float, float] | None = None,
                extra: Mapping[str, object] | None = None) -> Summary:
        """Every metric of the run (window: first submit to last end unless given)."""
        outcomes = self.outcomes
        data = outcomes.columns if isinstance(outcomes, Outcomes) else outcomes
        return summarise(data, nodes=self.nodes, window=window,
                         decision_durations=self.decision_seconds, extra=extra)
