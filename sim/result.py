"""What one simulated run produced: per-job outcomes, the machine over time, decision timings.

:class:`SimulationResult` is what :func:`sim.engine.simulate` returns and what the outputs
(:mod:`sim.report`, :mod:`sim.plots`) and the experiments read. Its :meth:`summary` is the
run judged by :mod:`sim.metrics`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

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


@dataclass(frozen=True, slots=True, eq=False)
class SimulationResult:
    """One run of ``policy`` on a ``nodes``-node machine.

    ``oracle``: decisions used true runtimes; ``cqsim_oracle``: only for waiting jobs, running
    ones being planned by their walltimes (CQSim's behaviour).

    ``outcomes`` has one :class:`~sim.metrics.JobOutcome` per submitted job, in submit order
    (a job that never started or never finished has ``start``/``end`` ``None``).
    ``decision_seconds`` is the wall-clock time of every ``decide`` call; ``events`` counts the
    events the engine handled (stale ones included) and ``wall_seconds`` is the whole run.
    """

    policy: str
    oracle: bool
    cqsim_oracle: bool
    nodes: int
    hybrid: bool
    outcomes: tuple[JobOutcome, ...]
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
