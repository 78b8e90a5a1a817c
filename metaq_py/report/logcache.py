"""What ``metaq status`` needs from each batch job's event log, read once per change of the
log rather than on every call.

A past job's log never changes again (a reclaim may add a line to it, once), yet a queue
gathers one per batch job, and replaying a thousand of them takes seconds. So each log is
boiled down to a :class:`JobDigest` (its job as it stands, if it could still be live; the
jobs it says were reclaimed as dead; the notices its runner released as expired; its runs
counted by outcome; the lines that could not be read), kept in
``jobs/.summary/joblogs.json`` under the log's inode, size and modification time. A later
call reads only the logs whose key changed: one ``stat`` per past job. The file is a cache:
it is written only where the queue's ``jobs/.summary/`` folder exists and is writable,
replaced whole (last writer wins), and a damaged or missing one is rebuilt.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from metaq_py.queue.disk.fileio import read_regular, replace_file
from metaq_py.queue.tally import summary_dir
from metaq_py.report.allocations import JobView, RunningTask, job_view
from metaq_py.report.joblog import EVENTS_NAME, JobLog, read_job_log

__all__ = ["JobDigest", "digest", "job_digests"]

CACHE_NAME = "joblogs.json"
VERSION = 2
CACHE_LIMIT = 64 * 1024 * 1024
"""The largest cache file (bytes) that is read; a larger one is rebuilt."""


@dataclass(frozen=True, slots=True)
class JobDigest:
    """One job's event log, boiled down. ``view`` is ``None`` when the job can never be live
    again (it never started metaq, its runner stopped, or its allocation had ended when the
    log was read); ``dead`` are the job ids its ``reclaim`` events name; ``expired`` maps each
    notice its runner released as expired to the latest such release; ``outcomes`` counts its
    ``end`` events by outcome (``oom``, ``timeout``, ...)."""

    jobid: str
    view: JobView | None
    dead: tuple[str, ...] = ()
    expired: dict[str, float] | None = None
    problems: tuple[str, ...] = ()
    outcomes: dict[str, int] | None = None


def digest(log: JobLog, *, now: float) -> JobDigest:
    """The digest of ``log`` as read at ``now``."""
    view = job_view(log)
    if view is not None and (view.stopped is not None
                             or (view.end is not None and view.end <= now)):
        view = None
    dead = sorted({str(e["jobid"]) for e in log.of("reclaim") if "jobid" in e})
    expired: dict[str, float] = {}
    for e in log.of("release"):
        if e.get("reason") == "expired" and isinstance(e.get("notice"), str):
            expired[e["notice"]] = max(expired.get(e["notice"], 0.0), float(e["time"]))
    outcomes: dict[str, int] = {}
    for e in log.of("end"):
        if isinstance(e.get("outcome"), str):
            outcomes[e["outcome"]] = outcomes.get(e["outcome"], 0) + 1
    return JobDigest(log.jobid, view, tuple(dead), expired, log.problems, outcomes)


def job_digests(root: str | os.PathLike[str], *, now: float) -> list[JobDigest]:
    """The digest of every job's event log under ``<root>/jobs/``, by job id, reading only
    the logs that changed since the cache was written (see the module's description)."""
    root = Path(root)
    jobs = root / "jobs"
    try:
        with os.scandir(jobs) as it:
            names = sorted(e.name for e in it if e.is_dir() and not e.name.startswith("."))
    except (FileNotFoundError, NotADirectoryError):
        return []
    cache_path = summary_dir(root) / CACHE_NAME
    cached = _load(cache_path)
    fresh: dict[str, Any] = {}
    out: list[JobDigest] = []
    changed = False
    for name in names:
        path = jobs / name / EVENTS_NAME
        try:
            st = os.stat(path)
        except OSError:
            continue
        key = [st.st_ino, st.st_size, st.st_mtime_ns]
        hit = cached.get(name)
        if hit is not None and hit.get("key") == key:
            with contextlib.suppress(ValueError, TypeError, KeyError, AttributeError):
                out.append(_from_json(name, hit["digest"]))
                fresh[name] = hit
                continue
        d = digest(read_job_log(path, jobid=name), now=now)
        out.append(d)
        fresh[name] = {"key": key, "digest": _to_json(d)}
        changed = True
    if changed or len(fresh) != len(cached):
        _store(cache_path, fresh)
    return out


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(read_regular(path, limit=CACHE_LIMIT)[0])
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(data, dict) or data.get("version") != VERSION:
        return {}
    jobs = data.get("jobs")
    return jobs if isinstance(jobs, dict) else {}


def _store(path: Path, jobs: dict[str, Any]) -> None:
    """Replace the cache, where the queue's ``jobs/.summary/`` folder exists and is writable."""
    folder = path.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        return
    with contextlib.suppress(OSError):
        replace_file(path, json.dumps({"version": VERSION, "jobs": jobs}).encode())


def _to_json(d: JobDigest) -> dict[str, Any]:
    return {"view": asdict(d.view) if d.view is not None else None, "dead": list(d.dead),
            "expired": d.expired or {}, "problems": list(d.problems),
            "outcomes": d.outcomes or {}}


def _from_json(jobid: str, data: dict[str, Any]) -> JobDigest:
    v = data["view"]
    view = None
    if v is not None:
        running = {k: RunningTask(**{**r, "hosts": tuple(r["hosts"]),
                                     "lent": {t: tuple(hs) for t, hs in r["lent"].items()}})
                   for k, r in v["running"].items()}
        view = JobView(**{**v, "hosts": tuple(v["hosts"]), "running": running,
                          "reserved": {n: tuple(hs) for n, hs in v["reserved"].items()}})
    return JobDigest(jobid, view, tuple(data["dead"]),
                     {str(k): float(t) for k, t in data["expired"].items()},
                     tuple(data["problems"]),
                     {str(k): int(n) for k, n in data["outcomes"].items()})
