"""SLURM accounting: the output of ``sacct --parsable2`` (``|``-separated, no trailing bar).

Read as a site would produce it::

    sacct --parsable2 --allusers --duplicates \\
        -o JobIDRaw,Submit,Start,End,Elapsed,Timelimit,NNodes,AllocCPUS,State,Account,User,Partition

with or without ``--noheader`` (without a header the columns must be those, in that order).
``JobID`` may stand in for ``JobIDRaw``; ``Group`` is read when present; other columns are
ignored. What sacct prints, and how
each is read:

- **job steps** (``123.batch``, ``123.extern``, ``123.0``) are parts of a job, not jobs: skipped
  and counted;
- **array members** (``123_4``; a pending array's ``123_[5-9]``) are jobs of their own; their
  id is not a number, so cleaning gives them fresh ids;
- **heterogeneous jobs** (``123+0``, ``123+1``) are one job: the components are merged into it,
  sizes added, the earliest submit and start and the latest end kept;
- **requeued jobs** appear once per run with ``--duplicates``: the last run is the job, with the
  first run's submit time (the user submitted once); earlier runs are counted;
- a job **still running** (``RUNNING``, End ``Unknown``) or **never started** (``PENDING``, or
  ``CANCELLED by 0`` before starting, Start ``Unknown`` or ``None``) has no runtime, so cleaning
  drops it, and the reading notes say how many of each;
- runtime is ``Elapsed`` (``[DD-]HH:MM:SS``), else End - Start; the walltime is ``Timelimit``,
  whose ``UNLIMITED`` and ``Partition_Limit`` mean "none requested" (the queue's limit applies,
  see the cleaning's missing-walltime estimate);
- size is ``NNodes`` (``AllocCPUS`` when the trace is read in processors); account is the
  project, partition the queue; ``State`` maps to SWF status: COMPLETED 1, CANCELLED 5, any
  other end 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from sim.trace.columns import JobTable, TraceError
from sim.trace.formats.timefields import duration, timestamp

DEFAULT_COLUMNS = ("JobIDRaw", "Submit", "Start", "End", "Elapsed", "Timelimit", "NNodes",
                   "AllocCPUS", "State", "Account", "User", "Partition")
"""The columns of ``--noheader`` output, in order: those of the documented command."""
NEEDED = ("Submit", "Start", "End", "NNodes", "State")
NO_LIMIT = frozenset({"UNLIMITED", "PARTITION_LIMIT"})


@dataclass(slots=True)
class _Job:
    """One job being assembled from its sacct lines."""

    label: str
    submit: float
    start: float
    end: float
    elapsed: float
    walltime: float
    nodes: int
    cpus: int
    state: str
    account: str | None
    user: str | None
    partition: str | None
    group: str | None = None
    runs: int = 1
    parts: list[str] = field(default_factory=list)


def is_sacct(first_line: str) -> bool:
    """Whether a first line looks like ``sacct --parsable2`` output (header or record)."""
    cells = first_line.split("|")
    if len(cells) < 5:
        return False
    return cells[0].strip() in ("JobIDRaw", "JobID") or cells[0].strip()[:1].isdigit()


def parse_sacct(lines: Iterable[tuple[int, str]], *, source: str,
                processors: bool = False) -> tuple[JobTable, tuple[str, ...]]:
    """Parse numbered sacct lines; sizes are ``AllocCPUS`` when ``processors``, else
    ``NNodes``. Returns the jobs in file order and one sentence per reading rule applied."""
    names: tuple[str, ...] | None = None
    jobs: dict[str, _Job] = {}
    steps = requeued = het = 0
    cut: tuple[int, int] | None = None  # (line, fields) of a short line, if it is the last
    for number, text in lines:
        if not text.strip():
            continue
        if cut is not None:
            raise _short(source, *cut, names)
        cells = text.rstrip("\r").split("|")
        if names is None:
            if cells[0].strip() in ("JobIDRaw", "JobID"):
                names = tuple(c.strip() for c in cells)
                missing = [c for c in NEEDED if c not in names]
                if missing:
                    raise TraceError(source, number, "the sacct header lacks the column(s) "
                                     f"{', '.join(missing)}.")
                continue
            names = DEFAULT_COLUMNS
        if len(cells) < len(names):
            cut = (number, len(cells))
            continue
        if len(cells) != len(names):
            raise _short(source, number, len(cells), names)
        row = dict(zip(names, (c.strip() for c in cells), strict=True))
        label = row.get("JobIDRaw") or row.get("JobID") or ""
        if "." in label:
            steps += 1
            continue
        job = _job(row, label, source, number, headed=names is not DEFAULT_COLUMNS)
        base, plus, _ = label.partition("+")
        key = base if plus else label
        earlier = jobs.get(key)
        if earlier is None:
            jobs[key] = job
        elif plus and earlier.parts and job.label not in earlier.parts:
            het += 1
            _merge_component(earlier, job)
        else:
            requeued += 1
            job.submit = _min(earlier.submit, job.submit)
            job.runs = earlier.runs + 1
            jobs[key] = job  # a requeued het job gathers its components again
        if plus and not jobs[key].parts:
            jobs[key].parts.append(job.label)
    notes = _notes(jobs.values(), steps, requeued, het)
    if cut is not None:
        notes = (f"the dump ends cut short: its last line (line {cut[0]}) has {cut[1]} of "
                 f"{len(names or DEFAULT_COLUMNS)} fields, and was skipped (1 line)", *notes)
    return _table(list(jobs.values()), processors), notes


def _short(source: str, line: int, found: int, names: tuple[str, ...] | None) -> TraceError:
    return TraceError(source, line, f"expected {len(names or DEFAULT_COLUMNS)} '|'-separated "
                      f"fields as in the header, found {found}.")


def _job(row: dict[str, str], label: str, source: str, line: int, *,
         headed: bool = True) -> _Job:
    """One line's job. Without a header (``headed`` false) the columns are read in the
    documented order, and a value that does not fit its column says so."""
    order = "" if headed else (" (without a header the columns must be "
                               f"{'|'.join(DEFAULT_COLUMNS)}, in that order: print the "
                               "header, or keep the documented command's order)")

    def read(name: str, parse: object) -> float:
        text = row.get(name, "")
        try:
            return parse(text)  # type: ignore[operator, no-any-return]
        except ValueError:
            raise TraceError(source, line, f"column {name} should be a time, found "
                             f"{text!r}{order}.") from None

    def count(name: str) -> int:
        text = row.get(name, "")
        if not text:
            return -1
        try:
            return int(text)
        except ValueError:
            raise TraceError(source, line, f"column {name} should be a whole number, found "
                             f"{text!r}{order}.") from None

    limit = row.get("Timelimit", "")
    return _Job(
        label=label, submit=read("Submit", timestamp), start=read("Start", timestamp),
        end=read("End", timestamp), elapsed=read("Elapsed", duration),
        walltime=math.nan if limit.upper() in NO_LIMIT else read("Timelimit", duration),
        nodes=count("NNodes"), cpus=count("AllocCPUS"), state=row.get("State", "").upper(),
        account=row.get("Account") or None, user=row.get("User") or None,
        partition=row.get("Partition") or None, group=row.get("Group") or None)


def _merge_component(job: _Job, part: _Job) -> None:
    job.parts.append(part.label)
    job.submit = _min(job.submit, part.submit)
    job.start = _min(job.start, part.start)
    job.end = max(job.end, part.end) if not math.isnan(part.end) else job.end
    job.elapsed = max(job.elapsed, part.elapsed) if not math.isnan(part.elapsed) else \
        job.elapsed
    job.nodes += max(part.nodes, 0)
    job.cpus += max(part.cpus, 0)


def _min(a: float, b: float) -> float:
    return b if math.isnan(a) else a if math.isnan(b) else min(a, b)


def _never_started(job: _Job) -> bool:
    """Pending, requeued and not yet restarted, or cancelled while pending (sacct prints
    Start ``Unknown`` or ``None``, or Start = End with nothing elapsed and no CPUs)."""
    if job.state.startswith(("PENDING", "REQUEUED")) or math.isnan(job.start):
        return True
    return job.state.startswith("CANCELLED") and job.elapsed == 0 and job.cpus <= 0


def _runtime(job: _Job) -> float:
    """The job's run, or NaN when it is still running or never started."""
    if job.state.startswith(("RUNNING", "SUSPENDED")) or _never_started(job):
        return math.nan
    if not math.isnan(job.elapsed) and (job.elapsed > 0 or math.isnan(job.end)):
        return job.elapsed
    return job.end - job.start


def _status(state: str) -> int:
    if state.startswith("COMPLETED"):
        return 1
    if state.startswith("CANCELLED"):
        return 5
    return 0


def _table(jobs: list[_Job], processors: bool) -> JobTable:
    n = len(jobs)
    runtime = np.array([_runtime(j) for j in jobs], dtype=np.float64)
    submit = np.array([j.submit for j in jobs], dtype=np.float64)
    start = np.array([j.start for j in jobs], dtype=np.float64)
    sizes = np.array([j.cpus if processors else j.nodes for j in jobs], dtype=np.int64)
    ids = np.array([int(j.label) if j.label.isdigit() else
                    int(j.label.partition("+")[0]) if j.label.partition("+")[0].isdigit()
                    else -1 for j in jobs], dtype=np.int64)

    def labels(values: list[str | None]) -> np.ndarray:
        array = np.empty(n, dtype=object)
        array[:] = values
        return array

    started = ~np.isnan(runtime)
    return JobTable.empty(n).with_columns(
        id=ids, submit=submit, wait=np.where(started, start - submit, np.nan),
        runtime=runtime, nodes=np.where(started, sizes, -1), requested_nodes=sizes,
        walltime=np.array([j.walltime for j in jobs], dtype=np.float64),
        status=np.array([_status(j.state) for j in jobs], dtype=np.int64),
        user=labels([j.user for j in jobs]), group=labels([j.group for j in jobs]),
        project=labels([j.account for j in jobs]),
        queue=labels([j.partition for j in jobs]))


def _notes(jobs: Iterable[_Job], steps: int, requeued: int, het: int) -> tuple[str, ...]:
    running = never = 0
    for job in jobs:
        if _never_started(job):
            never += 1
        elif job.state.startswith(("RUNNING", "SUSPENDED")):
            running += 1
    said = [
        (steps, "skipped {} job-step lines (such as 123.batch), which are parts of jobs"),
        (het, "merged {} heterogeneous-job components into their jobs"),
        (requeued, "folded {} earlier runs of requeued jobs into their last run"),
        (running, "found {} jobs still running when the log was written (no runtime yet)"),
        (never, "found {} jobs that never started (pending, or cancelled while pending)"),
    ]
    return tuple(template.format(count) for count, template in said if count)
