"""PBS Professional / OpenPBS accounting logs: the files of ``server_priv/accounting/``.

Each line is ``MM/DD/YYYY HH:MM:SS;T;jobid;key=value key=value ...`` where ``T`` is the record
type. A job's ``E`` (end) record holds everything a replay needs, and is read:

- submit = ``qtime``; start = ``start``; runtime = ``resources_used.walltime`` (else
  ``end - start``); walltime = ``Resource_List.walltime``;
- size = ``Resource_List.nodect``, else the chunk count of ``Resource_List.select``
  (``2:ncpus=36+1:ncpus=4`` is 3 chunks, one chunk a node, as with ``place=scatter``); in
  processors, ``Resource_List.ncpus`` (else ``resources_used.ncpus``);
- ``Exit_status`` 0 is SWF status 1 (completed), anything else 0; ``account`` (else a
  ``project`` other than PBS's ``_pbs_project_default``) is the project, ``queue`` the queue;
- the id is the number before the server name (``1234.pbs01``); array subjobs
  (``1234[5].pbs01``) get fresh ids in cleaning, and an array's own summary record
  (``1234[].pbs01``) is skipped, since its subjobs are the jobs.

Other records are counted, not replayed: a job with an ``S`` (start) record and no ``E`` was
still running when the log ends; a ``D`` (delete) record with neither ``S`` nor ``E`` is a job
cancelled while queued; an ``E`` record without ``start`` is a job that never ran; each ``R``
(rerun) record is an earlier run of a requeued job, whose ``E`` record describes its last run
(with its first ``qtime``). Record times are read as UTC (see :mod:`sim.trace.formats.timefields`).
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Iterable

import numpy as np

from sim.trace.columns import JobTable, TraceError
from sim.trace.formats.textio import numbered_lines
from sim.trace.formats.timefields import duration

RECORD = re.compile(r"^(\d\d)/(\d\d)/(\d{4}) (\d\d):(\d\d):(\d\d);([A-Za-z]);([^;]*);?(.*)$")
DEFAULT_PROJECT = "_pbs_project_default"
COLUMNS = ("id", "submit", "wait", "runtime", "nodes", "requested_nodes", "walltime",
           "status")


def is_pbs(first_line: str) -> bool:
    """Whether a line looks like a PBS accounting record."""
    return RECORD.match(first_line.strip()) is not None


def read_pbs(path: str) -> tuple[JobTable, tuple[str, ...]]:
    """Read a PBS accounting file (plain or gzipped) into raw jobs and the reading notes."""
    return parse_pbs(numbered_lines(path), source=str(path))


def parse_pbs(lines: Iterable[tuple[int, str]], *, source: str,
              processors: bool = False) -> tuple[JobTable, tuple[str, ...]]:
    """Parse numbered accounting lines. Returns the jobs of the ``E`` records, in file order,
    and one sentence per kind of record that was counted instead of replayed."""
    numbers: dict[str, list[float]] = {c: [] for c in COLUMNS}
    texts: dict[str, list[str | None]] = {"user": [], "project": [], "queue": []}
    started: set[str] = set()
    deleted: set[str] = set()
    ended: set[str] = set()
    reruns = summaries = 0
    for number, text in lines:
        if not text.strip():
            continue
        match = RECORD.match(text.strip())
        if match is None:
            raise TraceError(source, number, "expected a PBS accounting record like "
                             "'04/18/2023 10:15:42;E;1234.server;key=value ...'.")
        kind, job_id, body = match.group(7), match.group(8), match.group(9)
        if kind == "S":
            started.add(job_id)
        elif kind == "D":
            deleted.add(job_id)
        elif kind == "R":
            reruns += 1
        if kind != "E":
            continue
        ended.add(job_id)
        if "[]" in job_id:
            summaries += 1
            continue
        fields = _fields(body, source, number)
        _append(numbers, texts, job_id, fields, processors, source, number)
    running = len(started - ended)
    cancelled = len(deleted - started - ended)
    never = sum(1 for r in numbers["runtime"] if math.isnan(r))
    said = [
        (summaries, "skipped {} job-array summary records (their subjobs are the jobs)"),
        (reruns, "counted {} earlier runs of requeued jobs (their E record is the last run)"),
        (running, "found {} jobs still running when the log ends (no E record)"),
        (cancelled, "found {} jobs deleted while queued (no E record)"),
        (never, "found {} jobs that ended without starting"),
    ]
    notes = tuple(t.format(c) for c, t in said if c)
    return _table(numbers, texts), notes


def _fields(body: str, source: str, line: int) -> dict[str, str]:
    try:
        words = shlex.split(body, posix=True)
    except ValueError:
        raise TraceError(source, line, "a quoted value is not closed.") from None
    out: dict[str, str] = {}
    for word in words:
        key, sep, value = word.partition("=")
        if sep:
            out[key] = value
    return out


def _append(numbers: dict[str, list[float]], texts: dict[str, list[str | None]], job_id: str,
            f: dict[str, str], processors: bool, source: str, line: int) -> None:
    def number(key: str) -> float:
        text = f.get(key)
        if text is None or text == "":
            return math.nan
        try:
            return float(text)
        except ValueError:
            raise TraceError(source, line, f"{key} should be a number, found {text!r}.") \
                from None

    def span(key: str) -> float:
        text = f.get(key)
        if text is None:
            return math.nan
        try:
            return duration(text)
        except ValueError:
            raise TraceError(source, line, f"{key} should be a duration like 01:00:00, found "
                             f"{text!r}.") from None

    submit, start, end = number("qtime"), number("start"), number("end")
    if start == 0:
        start = math.nan  # PBS writes start=0 for a job that never ran
    used = span("resources_used.walltime")
    runtime = math.nan if math.isnan(start) else used if not math.isnan(used) else end - start
    if processors:
        size = number("Resource_List.ncpus")
        size = number("resources_used.ncpus") if math.isnan(size) else size
    else:
        size = number("Resource_List.nodect")
        if math.isnan(size):
            size = _chunks(f.get("Resource_List.select"), source, line)
    exit_status = number("Exit_status")
    head = job_id.split(".", 1)[0]
    numbers["id"].append(float(head) if head.isdigit() else -1.0)
    numbers["submit"].append(submit)
    numbers["wait"].append(start - submit)
    numbers["runtime"].append(runtime)
    numbers["nodes"].append(size if not math.isnan(runtime) else math.nan)
    numbers["requested_nodes"].append(size)
    numbers["walltime"].append(span("Resource_List.walltime"))
    numbers["status"].append(-1.0 if math.isnan(exit_status) else float(exit_status == 0))
    project = f.get("account") or f.get("project")
    texts["user"].append(f.get("user") or None)
    texts["project"].append(None if project in (None, "", DEFAULT_PROJECT) else project)
    texts["queue"].append(f.get("queue") or None)


def _chunks(select: str | None, source: str, line: int) -> float:
    """The chunk count of a select statement: ``2:ncpus=36+1:ncpus=4`` is 3."""
    if not select:
        return math.nan
    total = 0
    for chunk in select.split("+"):
        head = chunk.split(":", 1)[0]
        if head.isdigit():
            total += int(head)
        elif "=" in head:
            total += 1  # a chunk without a count is one chunk
        else:
            raise TraceError(source, line, f"Resource_List.select {select!r} is not a select "
                             "statement like 2:ncpus=36.")
    return float(total)


def _table(numbers: dict[str, list[float]], texts: dict[str, list[str | None]]) -> JobTable:
    n = len(numbers["id"])
    columns: dict[str, np.ndarray] = {}
    for name in ("submit", "wait", "runtime", "walltime"):
        columns[name] = np.array(numbers[name], dtype=np.float64)
    for name in ("id", "nodes", "requested_nodes", "status"):
        values = np.array(numbers[name], dtype=np.float64)
        columns[name] = np.where(np.isnan(values), -1, values).astype(np.int64)
    for name, labels in texts.items():
        array = np.empty(n, dtype=object)
        array[:] = labels
        columns[name] = array
    return JobTable.empty(n).with_columns(**columns)
