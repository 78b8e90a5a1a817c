"""The values a job trace is made of: one job's row, the whole table of them, and the error
raised when a trace file cannot be read.

A trace is held as a column table (:class:`JobTable`): one numpy array per field, so that a
million-job synthetic workload fits in memory and is cleaned, sorted and retyped with vector
operations. :class:`TraceJob` is the readable view of one row.

Unknown values follow the Standard Workload Format's "-1 means unknown" convention, mapped to
the natural Python marker: ``None`` in a :class:`TraceJob`, ``NaN`` in float columns, ``-1`` in
integer columns and ``None`` in the text (identity) columns.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields

import numpy as np


class TraceError(ValueError):
    """A trace file could not be read. The message is one sentence naming the file and line."""

    def __init__(self, source: str, line: int | None, problem: str) -> None:
        where = f"{source}, line {line}" if line is not None else source
        super().__init__(f"{where}: {problem}")
        self.source = source
        self.line = line
        self.problem = problem


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One job as the machine recorded it (the 18 SWF fields, plus the project when known).

    Times are seconds; ``submit`` is on the trace's own clock (epoch seconds for Theta).
    ``runtime`` is the job's real run (end minus start), ``walltime`` the limit the user
    requested. ``nodes`` is what the job ran on, ``requested_nodes`` what it asked for.
    ``status`` uses SWF's codes (1 completed, 0 failed, 5 cancelled). Identity fields (user,
    group, executable, queue, partition, project) are opaque labels: SWF numbers written as
    text, or the anonymised ids of an ALCF log.
    """

    id: int
    submit: float | None
    wait: float | None = None
    runtime: float | None = None
    nodes: int | None = None
    cpu_time: float | None = None
    memory: float | None = None
    requested_nodes: int | None = None
    walltime: float | None = None
    requested_memory: float | None = None
    status: int | None = None
    user: str | None = None
    group: str | None = None
    executable: str | None = None
    queue: str | None = None
    partition: str | None = None
    preceding_job: int | None = None
    think_time: float | None = None
    project: str | None = None

    @property
    def size(self) -> int | None:
        """The node count a simulation gives this job: what it ran on, else what it asked for."""
        return self.nodes if self.nodes is not None else self.requested_nodes


FLOAT_COLUMNS = ("submit", "wait", "runtime", "cpu_time", "memory", "walltime",
                 "requested_memory", "think_time")
INT_COLUMNS = ("id", "nodes", "requested_nodes", "status", "preceding_job")
TEXT_COLUMNS = ("user", "group", "executable", "queue", "partition", "project")
COLUMNS = tuple(f.name for f in fields(TraceJob))


def _float_or_none(x: float) -> float | None:
    return None if math.isnan(x) else x


def _int_or_none(x: int) -> int | None:
    return None if x == -1 else x


@dataclass(frozen=True, slots=True, eq=False)
class JobTable:
    """A trace as columns: ``table.submit[i]`` is the submit time of row ``i``.

    Every column has the same length. The arrays are owned by the table and must not be
    modified; operations that change rows (:meth:`take`, :meth:`with_columns`) return a new
    table.
    """

    id: np.ndarray
    submit: np.ndarray
    wait: np.ndarray
    runtime: np.ndarray
    nodes: np.ndarray
    cpu_time: np.ndarray
    memory: np.ndarray
    requested_nodes: np.ndarray
    walltime: np.ndarray
    requested_memory: np.ndarray
    status: np.ndarray
    user: np.ndarray
    group: np.ndarray
    executable: np.ndarray
    queue: np.ndarray
    partition: np.ndarray
    preceding_job: np.ndarray
    think_time: np.ndarray
    project: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.id)
        for name in COLUMNS:
            column = getattr(self, name)
            if len(column) != n:
                raise ValueError(f"column {name} has {len(column)} rows, expected {n}")

    def __len__(self) -> int:
        return len(self.id)

    def __iter__(self) -> Iterator[TraceJob]:
        return (self.job(i) for i in range(len(self)))

    def job(self, i: int) -> TraceJob:
        """Row ``i`` as a :class:`TraceJob`, with unknown values as ``None``."""
        values: dict[str, object] = {}
        for name in FLOAT_COLUMNS:
            values[name] = _float_or_none(float(getattr(self, name)[i]))
        for name in INT_COLUMNS:
            values[name] = _int_or_none(int(getattr(self, name)[i]))
        for name in TEXT_COLUMNS:
            values[name] = getattr(self, name)[i]
        values["id"] = int(self.id[i])
        return TraceJob(**values)  # type: ignore[arg-type]

    def take(self, rows: np.ndarray) -> JobTable:
        """The table restricted to ``rows`` (an index array or boolean mask), in that order."""
        return JobTable(**{name: getattr(self, name)[rows] for name in COLUMNS})

    def with_columns(self, **columns: np.ndarray) -> JobTable:
        """A copy with some columns replaced."""
        current = {name: getattr(self, name) for name in COLUMNS}
        current.update(columns)
        return JobTable(**current)

    @classmethod
    def empty(cls, n: int) -> JobTable:
        """``n`` rows with every value unknown (the id column is ``1..n``)."""
        columns: dict[str, np.ndarray] = {}
        for name in FLOAT_COLUMNS:
            columns[name] = np.full(n, np.nan)
        for name in INT_COLUMNS:
            columns[name] = np.full(n, -1, dtype=np.int64)
        for name in TEXT_COLUMNS:
            columns[name] = np.full(n, None, dtype=object)
        columns["id"] = np.arange(1, n + 1, dtype=np.int64)
        return cls(**columns)

    @classmethod
    def from_columns(cls, **given: Sequence[object] | np.ndarray) -> JobTable:
        """Build a table from some columns; the rest are unknown. ``None`` means unknown."""
        n = len(next(iter(given.values()))) if given else 0
        columns = {name: getattr(cls.empty(n), name) for name in COLUMNS}
        for name, values in given.items():
            if name in FLOAT_COLUMNS:
                columns[name] = np.array([np.nan if v is None else v for v in values],
                                         dtype=np.float64)
            elif name in INT_COLUMNS:
                columns[name] = np.array([-1 if v is None else v for v in values],
                                         dtype=np.int64)
            elif name in TEXT_COLUMNS:
                array = np.empty(n, dtype=object)
                array[:] = list(values)
                columns[name] = array
            else:
                raise ValueError(f"unknown column {name!r}")
        return cls(**columns)

    @classmethod
    def from_jobs(cls, jobs: Sequence[TraceJob]) -> JobTable:
        """The table holding ``jobs`` as rows, in order."""
        return cls.from_columns(**{name: [getattr(j, name) for j in jobs] for name in COLUMNS})
