"""The cleaning rules that turn a raw trace into one a simulator can replay, and the report that
counts what each rule did.

The rules are the same for every trace format, applied in this order; a job removed by one
rule is counted under that rule only:

1. a job with no submit time is dropped;
2. a job whose runtime is unknown, or ``<= 0``, is dropped (jobs cancelled before starting);
3. a job with no allocated size takes its requested size; then a job whose size is still
   unknown, or ``<= 0``, is dropped;
4. a job with no requested walltime (unknown or ``<= 0``) is dropped, or, with
   ``missing_walltime="runtime"``, gets its runtime as walltime (a perfect estimate);
5. a job larger than the machine is dropped (it could never start), or, with
   ``oversize="clamp"``, shrunk to the machine;
6. a runtime beyond the requested walltime is capped at the walltime: the batch system kills
   the job there (on Theta the overrun is mostly teardown counted in END - START);
7. a job id that is unknown or repeats an earlier one is replaced by a fresh id above the
   largest, so every id is unique;
8. jobs out of submit order are sorted stably by submit time (equal submits keep file order).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np

from sim.trace.columns import JobTable

MissingWalltime = Literal["drop", "runtime"]
Oversize = Literal["drop", "clamp"]


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
    oversize_dropped: int = 0
    oversize_clamped: int = 0
    capped_runtime: int = 0
    renumbered_ids: int = 0
    out_of_order: int = 0
    machine_nodes: int = 0

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
             "gave {} jobs with no requested walltime their runtime as walltime"),
            (self.oversize_dropped,
             f"dropped {{}} jobs larger than the machine ({self.machine_nodes} nodes)"),
            (self.oversize_clamped,
             f"shrank {{}} jobs larger than the machine to {self.machine_nodes} nodes"),
            (self.capped_runtime, "capped {} runtimes at their requested walltime"),
            (self.renumbered_ids, "gave fresh ids to {} jobs whose id was unknown or repeated"),
            (self.out_of_order, "sorted {} jobs that were out of submit order"),
        ]
        return [template.format(count) for count, template in said if count]

    def to_dict(self) -> dict[str, int]:
        """The counts as plain data, for ``summary.json``."""
        data = asdict(self)
        data["dropped"] = self.dropped
        return data


def clean(table: JobTable, *, nodes: int, missing_walltime: MissingWalltime = "drop",
          oversize: Oversize = "drop", cap_runtime: bool = True) -> tuple[JobTable,
                                                                         CleaningReport]:
    """Apply the cleaning rules for a machine of ``nodes`` nodes; see the module docstring.

    In the result every job has a submit time, a runtime ``> 0``, a size in ``1..nodes`` (in
    the ``nodes`` column), a walltime ``> 0`` and (with ``cap_runtime``) a runtime no longer
    than it; ids are unique and rows are sorted by submit time.
    """
    if nodes < 1:
        raise ValueError(f"the machine needs at least one node, got {nodes}")
    counts: dict[str, int] = {}
    records = len(table)

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

    no_walltime = np.isnan(table.walltime) | (table.walltime <= 0)
    if missing_walltime == "drop":
        drop("no_walltime", no_walltime)
    elif missing_walltime == "runtime":
        counts["walltime_from_runtime"] = int(no_walltime.sum())
        table = table.with_columns(walltime=np.where(no_walltime, table.runtime, table.walltime))
    else:
        raise ValueError(f"missing_walltime must be 'drop' or 'runtime', not {missing_walltime!r}")

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

    table, counts["renumbered_ids"] = _unique_ids(table)

    submit = table.submit
    if len(submit):
        running_max = np.maximum.accumulate(submit)
        counts["out_of_order"] = int((submit < running_max).sum())
        if counts["out_of_order"]:
            table = table.take(np.argsort(submit, kind="stable"))
    report = CleaningReport(records=records, kept=len(table), machine_nodes=nodes, **counts)
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
