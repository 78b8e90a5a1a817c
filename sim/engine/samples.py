"""The machine sampled over a run: one sample per instant the engine handled, kept as compact
arrays during the run and turned into the run's :class:`~sim.run.result.Series` at its end."""

from __future__ import annotations

from array import array
from collections.abc import Mapping

import numpy as np

from metaq_py.policy.spans import Spans
from sim.run.result import Series


class MachineSamples:
    """The machine at the end of every instant the engine handled, in time order.

    A sample is four numbers: the instant, the nodes busy running jobs, the jobs waiting and
    the idle nodes reserved for advance notices. Each holds until the next sample, so the
    :class:`~sim.run.result.Series` they make is a step function, exact between agenda items.
    Appending to typed arrays costs a few stores per instant, far less than a tuple or an
    object per sample over a run of a hundred thousand instants.
    """

    def __init__(self) -> None:
        self.time = array("d")
        self.busy, self.queued, self.reserved = array("l"), array("l"), array("l")

    def __len__(self) -> int:
        return len(self.time)

    def take(self, now: float, busy: int, queued: int, reserved: Mapping[str, Spans]) -> None:
        """Record the machine at the end of instant ``now``: ``busy`` nodes, ``queued`` jobs
        and the idle nodes of the ``reserved`` pools (by notice)."""
        self.time.append(now)
        self.busy.append(busy)
        self.queued.append(queued)
        self.reserved.append(sum([pool.count for pool in reserved.values()])
                             if reserved else 0)

    def series(self) -> Series:
        """The samples as the run's series, once the run is over: its counts are views of
        the arrays here, which then take no more samples (numpy holds their buffers)."""
        return Series(time=np.frombuffer(self.time, dtype=np.float64).copy(),
                      busy=np.asarray(self.busy, dtype=np.int64),
                      queued=np.asarray(self.queued, dtype=np.int64),
                      reserved=np.asarray(self.reserved, dtype=np.int64))
