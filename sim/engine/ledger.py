"""The engine's ledger: every job's outcome as columns, written in place during a run."""

from __future__ import annotations

import math
from array import array

import numpy as np

from metaq_py.policy.model import Job, JobId
from sim.run.metrics import KIND_CODE, Columns


class Ledger:
    """Every job's outcome as columns, one row per submitted job in submit order.

    A row is opened at submit, not started and not ended (NaN); the engine then writes the
    job's start, preemptions, shrinks, lost work and end into it in place. ``version`` is the
    engine's own bookkeeping: bumped whenever the job's end moves, so that a finish scheduled
    earlier on the agenda is recognised as stale. The metrics compute on the columns
    (:class:`~sim.run.metrics.Columns`), and :class:`~sim.run.metrics.JobOutcome` objects are
    built from them only when someone reads them (:class:`~sim.run.result.Outcomes`): a compact
    ledger costs a few array stores per job, and a million jobs take tens of bytes each instead
    of a few hundred.
    """

    def __init__(self) -> None:
        self.id: list[JobId] = []
        self.kind = array("b")
        self.size, self.preemptions, self.shrinks = array("q"), array("q"), array("q")
        self.version = array("q")
        self.submit, self.runtime = array("d"), array("d")
        self.charged = array("d")  # checkpoint time in the runtime that is not useful work
        self.start, self.end, self.lost = array("d"), array("d"), array("d")

    def __len__(self) -> int:
        return len(self.id)

    def open(self, job: Job, charged: float = 0.0) -> int:
        """A job was submitted: open its row, not started, not ended (NaN); return the row.
        ``charged`` is the checkpoint time its runtime holds that is not useful work."""
        self.id.append(job.id)
        self.kind.append(KIND_CODE[job.kind])
        self.size.append(job.size)
        self.submit.append(job.submit)
        self.runtime.append(job.runtime if job.runtime is not None else job.walltime)
        self.charged.append(charged)
        self.start.append(math.nan)
        self.end.append(math.nan)
        self.lost.append(0.0)
        self.preemptions.append(0)
        self.shrinks.append(0)
        self.version.append(0)
        return len(self.id) - 1

    def columns(self) -> Columns:
        """The rows as arrays."""
        def floats(a: array[float]) -> np.ndarray:
            return np.frombuffer(a, dtype=np.float64).copy()

        start, submit, runtime = floats(self.start), floats(self.submit), floats(self.runtime)
        size = np.frombuffer(self.size, dtype=np.int64).copy()
        return Columns(
            kind=np.frombuffer(self.kind, dtype=np.int8).copy(), size=size, submit=submit,
            start=start, end=floats(self.end), runtime=runtime,
            useful=(runtime - floats(self.charged)) * size,
            preemptions=np.frombuffer(self.preemptions, dtype=np.int64).copy(),
            shrinks=np.frombuffer(self.shrinks, dtype=np.int64).copy(), lost=floats(self.lost),
            instant=start == submit)
