"""The ALCF job log: the ``DIM_JOB_COMPOSITE`` CSV export ALCF publishes per machine and year
(``ANL-ALCF-DJC-THETA_20220101_20221231.csv`` and the like), plain or gzipped.

Columns used (others are ignored): ``COBALT_JOBID``, ``QUEUED_TIMESTAMP``, ``START_TIMESTAMP``,
``END_TIMESTAMP``, ``RUNTIME_SECONDS``, ``WALLTIME_SECONDS``, ``NODES_USED``,
``NODES_REQUESTED``, ``USERNAME_GENID``, ``PROJECT_NAME_GENID``, ``QUEUE_NAME``,
``MACHINE_PARTITION``, ``EXIT_STATUS``. Timestamps are ``YYYY-MM-DD HH:MM:SS`` in UTC (ISO 8601
with a ``T`` or fractional seconds is accepted too, as are plain epoch seconds).

The mapping is the one the Theta SWF conversions used, so that a CSV and its SWF give the same
trace: runtime is END minus START (``RUNTIME_SECONDS`` only when a timestamp is missing), wait
is START minus QUEUED. ``EXIT_STATUS`` 0 becomes SWF status 1 (completed) and any other code
status 0 (failed).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from sim.trace.columns import JobTable, TraceError
from sim.trace.formats.textio import numbered_lines

REQUIRED = ("QUEUED_TIMESTAMP", "WALLTIME_SECONDS")
SIZE_COLUMNS = ("NODES_USED", "NODES_REQUESTED")
MARKER = "QUEUED_TIMESTAMP"


def read_alcf_csv(path: str | Path) -> JobTable:
    """Read an ALCF ``DIM_JOB_COMPOSITE`` CSV (plain or gzipped) into raw, uncleaned records."""
    return parse_alcf_csv(numbered_lines(path), source=str(path))


def parse_alcf_csv(lines: Iterable[tuple[int, str]], *, source: str) -> JobTable:
    """Parse numbered CSV lines; ``source`` names the file in error messages."""
    tracker = _LineTracker(lines)
    reader = csv.reader(tracker)
    try:
        names = next(reader)
    except StopIteration:
        raise TraceError(source, 1, "the file is empty; expected an ALCF CSV header.") from None
    names = [n.strip().upper() for n in names]
    missing = [c for c in REQUIRED if c not in names]
    if not any(c in names for c in SIZE_COLUMNS):
        missing.append(" or ".join(SIZE_COLUMNS))
    if "END_TIMESTAMP" not in names and "RUNTIME_SECONDS" not in names:
        missing.append("END_TIMESTAMP or RUNTIME_SECONDS")
    if missing:
        raise TraceError(source, 1, f"the CSV header lacks the column(s) {', '.join(missing)}.")
    index = {name: i for i, name in enumerate(names)}
    out: dict[str, list[object]] = {k: [] for k in (
        "id", "submit", "wait", "runtime", "nodes", "requested_nodes", "walltime", "status",
        "user", "project", "queue", "partition")}
    for row in reader:
        line = tracker.first_line_of_record
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(names):
            raise TraceError(source, line,
                             f"expected {len(names)} comma-separated fields, found {len(row)}.")
        cell = _Cells(row, index, source, line)
        queued = cell.time("QUEUED_TIMESTAMP")
        start = cell.time("START_TIMESTAMP")
        end = cell.time("END_TIMESTAMP")
        runtime = end - start if not (math.isnan(start) or math.isnan(end)) else \
            cell.number("RUNTIME_SECONDS")
        exit_status = cell.number("EXIT_STATUS")
        job_id = cell.number("COBALT_JOBID")
        if not (math.isnan(job_id) or job_id.is_integer()):
            raise TraceError(source, line,
                             f"COBALT_JOBID should be a whole number, found {job_id!r}.")
        out["id"].append(len(out["id"]) + 1 if math.isnan(job_id) else int(job_id))
        out["submit"].append(queued)
        out["wait"].append(start - queued)
        out["runtime"].append(runtime)
        out["nodes"].append(cell.whole("NODES_USED"))
        out["requested_nodes"].append(cell.whole("NODES_REQUESTED"))
        out["walltime"].append(cell.number("WALLTIME_SECONDS"))
        out["status"].append(-1 if math.isnan(exit_status) else int(exit_status == 0))
        out["user"].append(cell.label("USERNAME_GENID"))
        out["project"].append(cell.label("PROJECT_NAME_GENID"))
        out["queue"].append(cell.label("QUEUE_NAME"))
        out["partition"].append(cell.label("MACHINE_PARTITION"))
    return _table(out)


def _table(out: dict[str, list[object]]) -> JobTable:
    n = len(out["id"])
    table = JobTable.empty(n)
    columns: dict[str, np.ndarray] = {}
    for name in ("submit", "wait", "runtime", "walltime"):
        columns[name] = np.array(out[name], dtype=np.float64)
    for name in ("id", "nodes", "requested_nodes", "status"):
        columns[name] = np.array(out[name], dtype=np.int64)
    for name in ("user", "project", "queue", "partition"):
        array = np.empty(n, dtype=object)
        array[:] = out[name]
        columns[name] = array
    return table.with_columns(**columns)


class _LineTracker:
    """Feeds text lines to ``csv.reader`` and remembers where each record began, since a
    quoted field may span several lines."""

    def __init__(self, lines: Iterable[tuple[int, str]]) -> None:
        self._lines = iter(lines)
        self.first_line_of_record = 0

    def __iter__(self) -> Iterator[str]:
        inside_quotes = False
        for number, text in self._lines:
            # csv.reader asks for a line only when it needs one, so a record starts on any
            # line that does not continue a quoted field left open by the line before.
            if not inside_quotes:
                self.first_line_of_record = number
            if text.count('"') % 2:
                inside_quotes = not inside_quotes
            yield text + "\n"


class _Cells:
    """Typed access to the cells of one CSV record, with errors naming file, line and column."""

    def __init__(self, row: list[str], index: dict[str, int], source: str, line: int) -> None:
        self.row, self.index, self.source, self.line = row, index, source, line

    def raw(self, column: str) -> str:
        i = self.index.get(column)
        return "" if i is None else self.row[i].strip()

    def number(self, column: str) -> float:
        text = self.raw(column)
        if not text or text.upper() in ("NULL", "NA", "NAN", "NONE"):
            return math.nan
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise TraceError(self.source, self.line,
                             f"column {column} should be a number, found {text!r}.")
        return value

    def whole(self, column: str) -> int:
        value = self.number(column)
        if math.isnan(value):
            return -1
        if not value.is_integer():
            raise TraceError(self.source, self.line,
                             f"column {column} should be a whole number, found {value!r}.")
        return int(value)

    def time(self, column: str) -> float:
        text = self.raw(column)
        if not text or text.upper() in ("NULL", "NA", "NONE"):
            return math.nan
        try:
            return float(text)
        except ValueError:
            pass
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise TraceError(self.source, self.line,
                             f"column {column} should be a timestamp like "
                             f"'2022-01-01 07:14:14', found {text!r}.") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        return moment.timestamp()

    def label(self, column: str) -> str | None:
        text = self.raw(column)
        return text or None
