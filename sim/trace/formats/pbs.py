"""PBS accounting logs, the files of ``server_priv/accounting/``: PBS Professional / OpenPBS,
Torque and Cray PBS.

Each line is ``MM/DD/YYYY HH:MM:SS;T;jobid;key=value key=value ...`` where ``T`` is the record
type. A job's ``E`` (end) record holds everything a replay needs, and is read:

- submit = ``qtime``; start = ``start``; runtime = ``resources_used.walltime`` (else
  ``end - start``); walltime = ``Resource_List.walltime``;
- size: as the dialect of the record means it (PBS Pro's ``select`` chunks and ``nodect``,
  Torque's ``nodes=N:ppn=M``, ``unique_node_count`` and ``total_execution_slots``, Cray's
  ``mppwidth`` / ``mppnppn`` / ``mppdepth``; see :mod:`sim.trace.formats.pbs_dialects`).
  Where a record's fields disagree, a reading note counts the records; a log whose records
  are of several dialects is read as its most common one, and the others are skipped and
  counted;
- ``Exit_status`` 0 is SWF status 1 (completed), anything else 0; ``account`` (else a
  ``project`` other than PBS's ``_pbs_project_default``) is the project, ``queue`` the queue,
  ``user`` and ``group`` the user and group;
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
from collections import Counter
from collections.abc import Iterable

import numpy as np

from sim.trace.columns import JobTable, TraceError
from sim.trace.formats.pbs_dialects import (
    DISAGREEMENTS,
    Dialect,
    DialectError,
    dialect_of,
    mixed_sentence,
    size_of,
)
from sim.trace.formats.timefields import duration

RECORD = re.compile(r"^(\d\d)/(\d\d)/(\d{4}) (\d\d):(\d\d):(\d\d);([A-Za-z]);([^;]*);?(.*)$")
DEFAULT_PROJECT = "_pbs_project_default"
COLUMNS = ("id", "submit", "wait", "runtime", "nodes", "requested_nodes", "walltime",
           "status")


def is_pbs(first_line: str) -> bool:
    """Whether a line looks like a PBS accounting record."""
    return RECORD.match(first_line.strip()) is not None


def parse_pbs(lines: Iterable[tuple[int, str]], *, source: str, processors: bool = False,
              procs_per_node: int | None = None) -> tuple[JobTable, tuple[str, ...]]:
    """Parse numbered accounting lines. Returns the jobs of the ``E`` records, in file order,
    and one sentence per kind of record that was counted instead of replayed, per kind of
    disagreement between a record's size fields, and for a log of mixed dialects."""
    records: list[tuple[int, str, dict[str, str]]] = []
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
        records.append((number, job_id, _fields(body, source, number)))
    dialects: Counter[Dialect] = Counter()
    for _, _, fields in records:
        found = dialect_of(fields)
        if found is not None:
            dialects[found] += 1
    kept = dialects.most_common(1)[0][0] if dialects else None
    numbers: dict[str, list[float]] = {c: [] for c in COLUMNS}
    texts: dict[str, list[str | None]] = {"user": [], "group": [], "project": [], "queue": []}
    disagreements: Counter[str] = Counter()
    for number, job_id, fields in records:
        if dialect_of(fields) not in (kept, None):
            continue
        try:
            size = size_of(fields, kept, processors=processors, procs_per_node=procs_per_node)
        except DialectError as e:
            raise TraceError(source, number, str(e)) from None
        disagreements.update(size.disagreements)
        _append(numbers, texts, job_id, fields, (size.ran, size.asked), source, number)
    running = len(started - ended)
    cancelled = len(deleted - started - ended)
    never = sum(1 for r in numbers["runtime"] if math.isnan(r))
    said = [
        (summaries, "skipped {} job-array summary records (their subjobs are the jobs)"),
        (reruns, "counted {} earlier runs of requeued jobs (their E record is the last run)"),
        (running, "found {} jobs still running when the log ends (no E record)"),
        (cancelled, "found {} jobs deleted while queued (no E record)"),
        (never, "found {} jobs that ended without starting"),
        *((disagreements[k], "found {} " + text) for k, text in DISAGREEMENTS.items()),
    ]
    notes = [t.format(c) for c, t in said if c]
    if len(dialects) > 1 and kept is not None:
        notes.insert(0, mixed_sentence(dialects, kept))
    return _table(numbers, texts), tuple(notes)


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
            f: dict[str, str], sizes: tuple[float, float], source: str, line: int) -> None:
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
    ran, asked = sizes
    exit_status = number("Exit_status")
    head = job_id.split(".", 1)[0]
    numbers["id"].append(float(head) if head.isdigit() else -1.0)
    numbers["submit"].append(submit)
    numbers["wait"].append(start - submit)
    numbers["runtime"].append(runtime)
    numbers["nodes"].append(ran if not math.isnan(runtime) else math.nan)
    numbers["requested_nodes"].append(asked)
    numbers["walltime"].append(span("Resource_List.walltime"))
    numbers["status"].append(-1.0 if math.isnan(exit_status) else float(exit_status == 0))
    project = f.get("account") or f.get("project")
    texts["user"].append(f.get("user") or None)
    texts["group"].append(f.get("group") or None)
    texts["project"].append(None if project in (None, "", DEFAULT_PROJECT) else project)
    texts["queue"].append(f.get("queue") or None)


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
