"""The Standard Workload Format (Feitelson's Parallel Workloads Archive): reader and writer.

A data line holds 18 whitespace-separated numbers, in this order:

 1 job id, 2 submit time, 3 wait, 4 run time, 5 allocated processors (nodes on Theta),
 6 average CPU time, 7 used memory, 8 requested processors, 9 requested time (walltime),
 10 requested memory, 11 status, 12 user, 13 group, 14 executable, 15 queue, 16 partition,
 17 preceding job, 18 think time.

-1 means unknown. Lines starting with ``;`` are comments; those of the form ``; Key: value``
make up the header (``MaxNodes``, ``MaxProcs``, ``UnixStartTime`` ...). Blank lines are
ignored. Anything else that does not hold exactly 18 finite numbers is an error.
"""

from __future__ import annotations

import gzip
import io
import math
import re
import warnings
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import numpy as np

from sim.trace.columns import (
    COLUMNS,
    FLOAT_COLUMNS,
    INT_COLUMNS,
    TEXT_COLUMNS,
    JobTable,
    TraceError,
)
from sim.trace.formats.textio import GZIP_MAGIC, numbered_lines

FIELD_NAMES = (
    "job id", "submit time", "wait time", "run time", "allocated processors",
    "average CPU time", "used memory", "requested processors", "requested time",
    "requested memory", "status", "user id", "group id", "executable number", "queue number",
    "partition number", "preceding job number", "think time",
)
# The JobTable column that holds each SWF field, in field order (project has no SWF field).
FIELD_COLUMNS = COLUMNS[:18]
_INTEGER_FIELDS = tuple(i for i, c in enumerate(FIELD_COLUMNS) if c in INT_COLUMNS)
_TEXT_FIELDS = tuple(i for i, c in enumerate(FIELD_COLUMNS) if c in TEXT_COLUMNS)
_FLOAT_FIELDS = tuple(i for i, c in enumerate(FIELD_COLUMNS) if c in FLOAT_COLUMNS)
_NUMERIC_HEADER_KEYS = {
    "UnixStartTime": "unix_start_time", "MaxNodes": "max_nodes", "MaxProcs": "max_procs",
    "MaxJobs": "max_jobs", "MaxRecords": "max_records", "MaxRuntime": "max_runtime",
    "MaxMemory": "max_memory",
}


@dataclass(frozen=True, slots=True)
class SwfHeader:
    """The ``; Key: value`` comments of an SWF file.

    The numeric keys the simulator uses are parsed; every entry, in file order and with
    repeats (``Note``, ``Queue`` ...), is kept in ``entries``.
    """

    unix_start_time: int | None = None
    max_nodes: int | None = None
    max_procs: int | None = None
    max_jobs: int | None = None
    max_records: int | None = None
    max_runtime: int | None = None
    max_memory: int | None = None
    time_zone_string: str | None = None
    entries: tuple[tuple[str, str], ...] = ()

    @property
    def machine_nodes(self) -> int | None:
        """The machine size the header states: MaxNodes, else MaxProcs."""
        return self.max_nodes if self.max_nodes is not None else self.max_procs


def read_swf(path: str | Path) -> tuple[SwfHeader, JobTable]:
    """Read an SWF file (plain or gzipped) into its header and its raw, uncleaned records.

    A well-formed file is read by :func:`fast_swf` (numpy's C parser, about 20 times the
    line-by-line speed); anything it cannot vouch for is read again by :func:`parse_swf`,
    which gives the same table or the one-sentence error naming the line.
    """
    try:
        data = Path(path).read_bytes()
    except OSError:
        data = b""  # parse_swf's reader turns the failure into a TraceError
    fast = fast_swf(data, source=str(path)) if data else None
    return fast if fast is not None else parse_swf(numbered_lines(path), source=str(path))


_COMMENT_LINE = re.compile(r"^[ \t]*(;[^\n]*)$", re.MULTILINE)


def fast_swf(data: bytes, *, source: str) -> tuple[SwfHeader, JobTable] | None:
    """Parse a whole SWF file's bytes (plain or gzipped) at C speed, or return ``None`` when
    the file is anything but plain well-formed SWF (a bad record, a carriage return, a label
    that is not a whole number, a truncated stream ...), for :func:`parse_swf` to judge."""
    try:
        if data[:2] == GZIP_MAGIC:
            data = zlib.decompress(data, 31)
        text = data.decode("utf-8")
    except (zlib.error, UnicodeDecodeError):
        return None
    if "\r" in text:
        return None
    comments = _leading_comments(text)
    semicolons = text.count(";")
    if sum(c.count(";") for c in comments) != semicolons:
        # comments further down too (rare): find every comment line
        comments = _COMMENT_LINE.findall(text)
        if sum(c.count(";") for c in comments) != semicolons:
            return None  # a ';' inside a record
    numeric: dict[str, int] = {}
    entries: list[tuple[str, str]] = []
    try:
        for comment in comments:
            entry = _header_entry(comment.strip(), source, 0, numeric)
            if entry is not None:
                entries.append(entry)
    except TraceError:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "input contained no data"
            values = np.loadtxt(io.StringIO(text), comments=";", dtype=np.float64, ndmin=2)
    except ValueError:
        return None
    if values.size == 0:
        values = values.reshape(0, 18)
    if values.shape[1] != 18 or not np.isfinite(values).all():
        return None
    whole = values[:, list(_INTEGER_FIELDS + _TEXT_FIELDS)]
    if not np.array_equal(whole, np.floor(whole)):
        return None
    time_zone = next((v for k, v in entries if k == "TimeZoneString"), None)
    header = SwfHeader(time_zone_string=time_zone, entries=tuple(entries),
                       **{_NUMERIC_HEADER_KEYS[k]: v for k, v in numeric.items()})
    return header, _fast_table(values)


def _leading_comments(text: str) -> list[str]:
    """The comment lines of the header block at the top of the file (where SWF puts them)."""
    out: list[str] = []
    start = 0
    while True:
        end = text.find("\n", start)
        line = text[start:] if end < 0 else text[start:end]
        stripped = line.strip()
        if stripped.startswith(";"):
            out.append(stripped)
        elif stripped:
            return out
        if end < 0:
            return out
        start = end + 1


def _fast_table(values: np.ndarray) -> JobTable:
    data: dict[str, np.ndarray] = {}
    n = len(values)
    for i, name in enumerate(FIELD_COLUMNS):
        column = values[:, i]
        if name in FLOAT_COLUMNS:
            array = column.copy()
            array[array == -1] = np.nan
        elif name in INT_COLUMNS:
            array = column.astype(np.int64)
        elif (column == -1).all():
            array = np.full(n, None, dtype=object)
        else:
            uniques, codes = np.unique(column, return_inverse=True)
            labels = np.empty(len(uniques), dtype=object)
            labels[:] = [None if v == -1 else str(int(v)) for v in uniques.tolist()]
            array = labels[codes.reshape(-1)] if n else np.empty(0, dtype=object)
        data[name] = array
    data["project"] = np.full(n, None, dtype=object)
    return JobTable(**data)


def parse_swf(lines: Iterable[tuple[int, str]], *, source: str) -> tuple[SwfHeader, JobTable]:
    """Parse numbered SWF lines; ``source`` names the file in error messages."""
    numeric_header: dict[str, int] = {}
    entries: list[tuple[str, str]] = []
    time_zone: str | None = None
    columns: list[list[float]] = [[] for _ in range(18)]
    texts: list[list[str | None]] = [[] for _ in range(18)]
    isfinite = math.isfinite
    for number, text in lines:
        stripped = text.strip()
        if not stripped:
            continue
        if stripped.startswith(";"):
            entry = _header_entry(stripped, source, number, numeric_header)
            if entry is not None:
                entries.append(entry)
                if entry[0] == "TimeZoneString":
                    time_zone = entry[1]
            continue
        tokens = stripped.split()
        if len(tokens) != 18:
            raise TraceError(source, number,
                             f"expected 18 fields in an SWF record, found {len(tokens)}.")
        try:
            values = [float(t) for t in tokens]
        except ValueError:
            values = []
        if len(values) != 18 or not all(map(isfinite, values)):
            field, token = _first_bad(tokens)
            raise TraceError(source, number,
                             f"field {field + 1} ({FIELD_NAMES[field]}) should be a number, "
                             f"found {token!r}.")
        for i in _INTEGER_FIELDS:
            if not values[i].is_integer():
                raise TraceError(source, number,
                                 f"field {i + 1} ({FIELD_NAMES[i]}) should be a whole number, "
                                 f"found {tokens[i]!r}.")
        for i in _FLOAT_FIELDS:
            columns[i].append(values[i])
        for i in _INTEGER_FIELDS:
            columns[i].append(values[i])
        for i in _TEXT_FIELDS:
            v = values[i]
            texts[i].append(None if v == -1 else (str(int(v)) if v.is_integer() else tokens[i]))
    header = SwfHeader(time_zone_string=time_zone, entries=tuple(entries),
                       **{_NUMERIC_HEADER_KEYS[k]: v for k, v in numeric_header.items()})
    return header, _table(columns, texts)


def _header_entry(line: str, source: str, number: int,
                  numeric: dict[str, int]) -> tuple[str, str] | None:
    body = line.lstrip(";").strip()
    key, sep, value = body.partition(":")
    key, value = key.strip(), value.strip()
    if not sep or not key or " " in key:
        return None  # a free-text comment, not a header entry
    if key in _NUMERIC_HEADER_KEYS:
        try:
            parsed = float(value)
        except ValueError:
            parsed = math.nan
        if not math.isfinite(parsed) or not parsed.is_integer():
            raise TraceError(source, number,
                             f"header entry {key} should be a whole number, found {value!r}.")
        numeric[key] = int(parsed)
    return key, value


def _first_bad(tokens: list[str]) -> tuple[int, str]:
    for i, token in enumerate(tokens):
        try:
            if math.isfinite(float(token)):
                continue
        except ValueError:
            pass
        return i, token
    raise AssertionError("no bad token")  # pragma: no cover - callers found one


def _table(columns: list[list[float]], texts: list[list[str | None]]) -> JobTable:
    data: dict[str, np.ndarray] = {}
    for i, name in enumerate(FIELD_COLUMNS):
        if name in FLOAT_COLUMNS:
            array = np.array(columns[i], dtype=np.float64)
            array[array == -1] = np.nan
        elif name in INT_COLUMNS:
            array = np.array(columns[i], dtype=np.float64).astype(np.int64)
        else:
            array = np.empty(len(texts[i]), dtype=object)
            array[:] = texts[i]
        data[name] = array
    n = len(data["id"])
    data["project"] = np.full(n, None, dtype=object)
    return JobTable(**data)


# --- writing -----------------------------------------------------------------------------


def write_swf(table: JobTable, target: str | Path | TextIO, *,
              header: SwfHeader | None = None) -> None:
    """Write ``table`` as SWF to a path (gzipped when it ends in ``.gz``) or an open text file.

    Unknown values become -1. Identity labels that are not numbers (an ALCF queue name, say)
    are written as small integer codes in first-seen order, and each code's label is recorded
    in a ``; Note:`` header line, so nothing is lost. The ``project`` column has no SWF field
    and is written the same way, as notes.
    """
    if isinstance(target, str | Path):
        path = Path(target)
        if path.suffix == ".gz":
            with gzip.open(path, "wt", encoding="utf-8") as zipped:
                _write(table, zipped, header)
        else:
            with open(path, "w", encoding="utf-8") as stream:
                _write(table, stream, header)
    else:
        _write(table, target, header)


def _format_number(value: float) -> str:
    if math.isnan(value) or value == -1:
        return "-1"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def _text_codes(column: np.ndarray, name: str, notes: list[str]) -> list[str]:
    codes: dict[str, int] = {}
    out: list[str] = []
    for label in column:
        if label is None:
            out.append("-1")
            continue
        try:
            number = float(label)
        except ValueError:
            number = math.nan
        if math.isfinite(number) and number >= 0:
            out.append(label)
            continue
        if label not in codes:
            codes[label] = len(codes) + 1
            notes.append(f"; Note: {name} {codes[label]} is {label!r}")
        out.append(str(codes[label]))
    return out


def _write(table: JobTable, stream: TextIO, header: SwfHeader | None) -> None:
    notes: list[str] = []
    rendered: list[list[str]] = []
    for name in FIELD_COLUMNS:
        column = getattr(table, name)
        if name in TEXT_COLUMNS:
            rendered.append(_text_codes(column, name, notes))
        elif name in INT_COLUMNS:
            rendered.append([str(int(v)) for v in column])
        else:
            rendered.append([_format_number(float(v)) for v in column])
    if header is not None:
        for key, value in header.entries:
            stream.write(f"; {key}: {value}\n")
    for note in notes:
        stream.write(note + "\n")
    for j, project in enumerate(table.project):
        if project is not None:
            stream.write(f"; Note: project of job {int(table.id[j])} is {project!r}\n")
    for row in zip(*rendered, strict=True):
        stream.write(" ".join(row) + "\n")
