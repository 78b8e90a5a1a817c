"""The cleaning rules that turn a raw trace into one a simulator can replay, and the report that
counts what each rule did.

The rules are the same for every trace format, applied in this order; a job removed by one
rule is counted under that rule only:

1. a job with no submit time is dropped;
2. a job whose runtime is unknown, or ``<= 0``, is dropped (jobs cancelled before starting);
3. a job with no allocated size takes its requested size; then a job whose size is still
   unknown, or ``<= 0``, is dropped;
4. a job with no requested walltime (unknown or ``<= 0``) is dropped, or gets an estimate
   (see :class:`WalltimeEstimate`): its runtime (``"runtime"``, a perfect estimate), a multiple
   of it (``"2x"``), or its queue's limit (``"limit"``: the largest walltime requested in the
   job's queue, else in the trace, else the largest runtime);
5. a job larger than the machine is dropped (it could never start), or, with
   ``oversize="clamp"``, shrunk to the machine;
6. a runtime beyond the requested walltime is capped at the walltime: the batch system kills
   the job there (on Theta the overrun is mostly teardown counted in END - START);
7. a job id that is unknown or repeats an earlier one is replaced by a fresh id above the
   largest, so every id is unique;
8. jobs out of submit order are sorted stably by submit time (equal submits keep file order);
9. only with ``dependencies``: a job's preceding job (SWF field 17) is kept when it names a job
   that comes before it in the cleaned trace; a reference to a job that cleaning dropped, to
   no job of the file, or to the job itself or a later one is cut (the column gets -1) and
   counted, so the dependencies left can never form a cycle. Without ``dependencies`` the
   column is left as read and nothing is counted.

Apart from these, a recorded wait below zero (a start that precedes the submit) is made
unknown and counted: the job still replays from its submit time, but its recorded wait is no
measurement to compare a simulation with (``metaq simulate --compare-recorded``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np

from sim.trace.columns import JobTable

MissingWalltime = str
"""How jobs without a requested walltime are treated: ``"drop"``, ``"runtime"``, ``"<k>x"``
(``k`` times the runtime) or ``"limit"``; parsed by :meth:`WalltimeEstimate.parse`."""
Oversize = Literal["drop", "clamp"]


@dataclass(frozen=True, slots=True)
class WalltimeEstimate:
    """The walltime given to a job that requested none. ``kind`` is ``drop`` (the job is
    dropped), ``runtime`` (``factor`` times its runtime; 1 is a perfect estimate) or ``limit``
    (its queue's limit, as a batch system applies when a user asks for nothing)."""

    kind: Literal["drop", "runtime", "limit"]
    factor: float = 1.0

    @classmethod
    def parse(cls, text: str) -> WalltimeEstimate:
        """``drop``, ``runtime``, ``limit`` or ``<k>x`` (a multiple ``k >= 1`` of the runtime)."""
        word = text.strip().lower()
        if word in ("drop", "runtime", "limit"):
            return cls(word)  # type: ignore[arg-type]
        if word.endswith("x"):
            try:
                factor = float(word[:-1])
            except ValueError:
                factor = math.nan
            if math.isfinite(factor) and factor >= 1:
                return cls("runtime", factor)
        raise ValueError(f"missing_walltime must be 'drop', 'runtime', 'limit' or a multiple "
                         f"of the runtime such as '2x', not {text!r}")

    def describe(self) -> str:
        """The estimate in words, for the summary."""
        if self.kind == "drop":
            return "jobs with no requested walltime are dropped"
        if self.kind == "limit":
            return "a job with no requested walltime gets its queue's limit"
        if self.factor == 1:
            return "a job with no requested walltime gets its runtime (a perfect estimate)"
        return f"a job with no requested walltime gets {self.factor:g} times its runtime"


@dataclass(frozen=True, slots=True)
class CleaningReport:
    """How many records each cleaning rule touched. ``records == kept + dropped`` always."""

    records: int
    kept: int
    no_submit: int = 0
    no_runtime: int = 0
    nonpositive_runtime: int = 0
    size_from_request: int = 0
    no_size: int = 0
    nonpositive_size: int = 0
    no_walltime: int = 0
    walltime_from_runtime: int = 0
    walltime_from_limit: int = 0
    oversize_dropped: int = 0
    oversize_clamped: int = 0
    capped_runtime: int = 0
    renumbered_ids: int = 0
    out_of_order: int = 0
    dependents: int = 0
    preceding_dropped: int = 0
    preceding_missing: int = 0
    preceding_later: int = 0
    negative_wait: int = 0
    machine_nodes: int = 0
    unit: str = "nodes"
    walltime_factor: float = 1.0

    @property
    def dropped(self) -> int:
        """Jobs removed by any rule."""
        return (self.no_submit + self.no_runtime + self.nonpositive_runtime + self.no_size
                + self.nonpositive_size + self.no_walltime + self.oversize_dropped)

    def lines(self) -> list[str]:
        """One human sentence per rule that touched at least one job, in rule order."""
        said = [
            (self.no_submit, "dropped {} jobs with no submit time"),
            (self.no_runtime, "dropped {} jobs with unknown runtime"),
            (self.nonpositive_runtime, "dropped {} jobs with runtime <= 0"),
            (self.size_from_request, "took the requested size for {} jobs with no allocated size"),
            (self.no_size, "dropped {} jobs with unknown size"),
            (self.nonpositive_size, "dropped {} jobs with size <= 0"),
            (self.no_walltime, "dropped {} jobs with no requested walltime"),
            (self.walltime_from_runtime,
             "gave {} jobs with no requested walltime their runtime as walltime"
             if self.walltime_factor == 1 else
             f"gave {{}} jobs with no requested walltime {self.walltime_factor:g} times their "
             "runtime as walltime"),
            (self.walltime_from_limit,
             "gave {} jobs with no requested walltime their queue's limit as walltime"),
            (self.oversize_dropped,
             f"dropped {{}} jobs larger than the machine ({self.machine_nodes} {self.unit})"),
            (self.oversize_clamped,
             f"shrank {{}} jobs larger than the machine to {self.machine_nodes} {self.unit}"),
            (self.capped_runtime, "capped {} runtimes at their requested walltime"),
            (self.negative_wait, "found {} jobs whose recorded start precedes their submit: "
                                 "their recorded wait is left unknown"),
            (self.renumbered_ids, "gave fresh ids to {} jobs whose id was unknown or repeated"),
            (self.out_of_order, "sorted {} jobs that were out of submit order"),
            (self.dependents, "kept the preceding job of {} jobs, which wait for its end "
                              "(--dependencies)"),
            (self.preceding_dropped,
             "cut the dependency of {} jobs whose preceding job was dropped; they keep their "
             "own submit time"),
            (self.preceding_missing,
             "cut the dependency of {} jobs whose preceding job is not in the trace; they keep "
             "their own submit time"),
            (self.preceding_later,
             "cut the dependency of {} jobs whose preceding job is themselves or a later job; "
             "they keep their own submit time"),
        ]
        return [template.format(count) for count, template in said if count]

    def to_dict(self) -> dict[str, int | float | str]:
        """The counts as plain data, for ``summary.json``."""
        data: dict[str, int | float | str] = asdict(self)
        data["dropped"] = self.dropped
        return data


def clean(table: JobTable, *, nodes: int, missing_walltime: MissingWalltime = "drop",
          oversize: Oversize = "drop", cap_runtime: bool = True,
          unit: str = "nodes", dependencies: bool = False) -> tuple[JobTable, CleaningReport]:
    """Apply the cleaning rules for a machine of ``nodes`` units; see the module docstring.

    ``unit`` names what sizes count (``nodes`` or ``processors``), for the report's sentences.
    ``dependencies`` applies rule 9 (the preceding jobs a simulation honours).

    In the result every job has a submit time, a runtime ``> 0``, a size in ``1..nodes`` (in
    the ``nodes`` column), a walltime ``> 0`` and (with ``cap_runtime``) a runtime no longer
    than it; ids are unique and rows are sorted by submit time.
    """
    if nodes < 1:
        raise ValueError(f"the machine needs at least one node, got {nodes}")
    counts: dict[str, int] = {}
    records = len(table)
    raw_ids = table.id

    def drop(name: str, bad: np.ndarray) -> None:
        nonlocal table
        counts[name] = int(bad.sum())
        if counts[name]:
            table = table.take(~bad)

    drop("no_submit", np.isnan(table.submit))
    drop("no_runtime", np.isnan(table.runtime))
    drop("nonpositive_runtime", table.runtime <= 0)

    from_request = table.nodes == -1
    counts["size_from_request"] = int((from_request & (table.requested_nodes != -1)).sum())
    table = table.with_columns(nodes=np.where(from_request, table.requested_nodes, table.nodes))
    drop("no_size", table.nodes == -1)
    drop("nonpositive_size", table.nodes <= 0)

    estimate = WalltimeEstimate.parse(missing_walltime)
    no_walltime = np.isnan(table.walltime) | (table.walltime <= 0)
    if estimate.kind == "drop":
        drop("no_walltime", no_walltime)
    elif estimate.kind == "runtime":
        counts["walltime_from_runtime"] = int(no_walltime.sum())
        table = table.with_columns(walltime=np.where(
            no_walltime, table.runtime * estimate.factor, table.walltime))
    else:
        counts["walltime_from_limit"] = int(no_walltime.sum())
        if counts["walltime_from_limit"]:
            table = table.with_columns(walltime=np.where(
                no_walltime, queue_limits(table, no_walltime), table.walltime))

    too_big = table.nodes > nodes
    if oversize == "drop":
        drop("oversize_dropped", too_big)
    elif oversize == "clamp":
        counts["oversize_clamped"] = int(too_big.sum())
        table = table.with_columns(nodes=np.minimum(table.nodes, nodes))
    else:
        raise ValueError(f"oversize must be 'drop' or 'clamp', not {oversize!r}")

    if cap_runtime:
        over = table.runtime > table.walltime
        counts["capped_runtime"] = int(over.sum())
        table = table.with_columns(runtime=np.minimum(table.runtime, table.walltime))

    early = table.wait < 0
    counts["negative_wait"] = int(early.sum())
    if counts["negative_wait"]:
        table = table.with_columns(wait=np.where(early, np.nan, table.wait))

    table, counts["renumbered_ids"] = _unique_ids(table)

    submit = table.submit
    if len(submit):
        running_max = np.maximum.accumulate(submit)
        counts["out_of_order"] = int((submit < running_max).sum())
        if counts["out_of_order"]:
            table = table.take(np.argsort(submit, kind="stable"))
    if dependencies:
        table = _resolve_preceding(table, raw_ids, counts)
    report = CleaningReport(records=records, kept=len(table), machine_nodes=nodes, unit=unit,
                            walltime_factor=estimate.factor, **counts)
    return table, report


def _unique_ids(table: JobTable) -> tuple[JobTable, int]:
    ids = table.id
    _, first = np.unique(ids, return_index=True)
    keep = np.zeros(len(ids), dtype=bool)
    keep[first] = True
    bad = ~keep | (ids == -1)
    count = int(bad.sum())
    if not count:
        return table, 0
    fresh = ids.copy()
    start = max(int(ids.max()), 0) + 1
    fresh[bad] = np.arange(start, start + count, dtype=np.int64)
    return table.with_columns(id=fresh), count


def _resolve_preceding(table: JobTable, raw_ids: np.ndarray,
                       counts: dict[str, int]) -> JobTable:
    """Rule 9: keep each job's preceding job only when it comes earlier in the cleaned trace;
    count the references cut, by reason, and the dependencies kept."""
    preceding = table.preceding_job
    named = preceding != -1
    ids = table.id
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    at = np.searchsorted(sorted_ids, preceding)
    found = named & (at < len(ids))
    found[found] = sorted_ids[at[found]] == preceding[found]
    row = np.full(len(ids), -1, dtype=np.int64)
    row[found] = order[at[found]]
    earlier = found & (row < np.arange(len(ids)))
    absent = named & ~found
    dropped = absent & np.isin(preceding, raw_ids)
    counts["dependents"] = int(earlier.sum())
    counts["preceding_dropped"] = int(dropped.sum())
    counts["preceding_missing"] = int((absent & ~dropped).sum())
    counts["preceding_later"] = int((found & ~earlier).sum())
    if not (named & ~earlier).any():
        return table
    return table.with_columns(preceding_job=np.where(earlier, preceding, -1))


def queue_limits(table: JobTable, no_walltime: np.ndarray) -> np.ndarray:
    """Each job's queue limit: the largest walltime requested in its queue; for a queue (or a
    trace) where nobody requested one, the largest runtime seen there instead."""
    limit = np.empty(len(table))
    has = ~no_walltime
    overall = (float(table.walltime[has].max()) if has.any() else
               float(np.nanmax(table.runtime)) if len(table) else 1.0)
    queues = table.queue
    for name in set(queues[no_walltime].tolist()):
        mine = np.fromiter((q == name for q in queues), dtype=bool, count=len(queues))
        asked = table.walltime[mine & has]
        limit[mine] = float(asked.max()) if len(asked) else (
            overall if has.any() else float(table.runtime[mine].max()))
    return limit
