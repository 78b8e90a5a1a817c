"""Why a task is not running (``metaq explain TASK``), in sentences a user can act on.

The answer is built from what anyone can read in the queue, without the batch system: the
task's state and reason, its place in the pick order, the live allocations (replayed from the
runners' event logs and leases by :mod:`metaq_py.report.allocations`) and the live notices. For a
waiting task each live allocation is checked in turn: machine, nodes and GPUs (the runner's own
:func:`~metaq_py.queue.fit.fit_problem`), then the wall clock left, then whether enough of its
nodes are idle or only held for a notice. A task waiting for a dependency (``AFTER``) is
told which one, and where that one is.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from metaq_py.durations import format_duration, format_time
from metaq_py.queue.admin import QueueAdmin
from metaq_py.queue.campaign.deps import Dependencies
from metaq_py.queue.disk.folders import PeopleIds
from metaq_py.queue.fit import fit_problem
from metaq_py.queue.index import Task
from metaq_py.queue.layout import PENDING, WORKING
from metaq_py.queue.logbook import read_logbook
from metaq_py.queue.notices import read_notices
from metaq_py.queue.store import Queue
from metaq_py.report.allocations import JobView, live_jobs
from metaq_py.report.joblog import read_job_logs
from metaq_py.words import counted

__all__ = ["Explanation", "explain"]

_AHEAD_SHOWN = 3


@dataclass(frozen=True, slots=True)
class Explanation:
    """Why ``task`` (its identity) is where it is: ``state`` is one of the queue's states and
    ``reasons`` are sentences, the most decisive first."""

    task: str
    state: str
    reasons: tuple[str, ...]


def explain(q: Queue, ref: str, *, now: float) -> Explanation:
    """Explain the task ``ref`` (its identity or a path to its file). Reads only."""
    admin = QueueAdmin(q)
    e = admin.find(ref)
    if e.state == PENDING:
        return Explanation(e.id, e.state, tuple(_waiting(q, e.id, now)))
    if e.state == WORKING:
        return Explanation(e.id, e.state, tuple(_running(q, e.id, now)))
    found = next((x for x in admin.entries(e.state, specs=False) if x.path == e.path), e)
    why = f": {found.reason}" if found.reason else ""
    shown = PeopleIds(q.root)(e.id)
    words = {
        "hold": [f"it is held; 'metaq release {shown}' lets it wait for a node again"],
        "finished": ["it has already finished (it exited with code 0)"],
        "failed": [f"it failed{why}", f"'metaq retry {shown}' sends it back to wait"],
        "rejected": [f"it was rejected as invalid{why}",
                     f"the file is now at {e.path}: fix it there, then 'metaq retry "
                     f"{shown}' checks it again and sends it back to wait"],
        "cancelled": [f"it was cancelled{why}", f"'metaq retry {shown}' sends it back to wait"],
    }
    return Explanation(e.id, e.state, tuple(_sentence(s) for s in words[e.state]))


def _running(q: Queue, task: str, now: float) -> list[str]:
    claim = next((c for c in q.leases(specs=True) if c.id == task), None)
    if claim is None:
        return [_sentence("it has just been claimed by a batch job")]
    views = {v.jobid: v for v in live_jobs(read_job_logs(q.root), [claim], now=now,
                                           stale_after=q.config.stale_after)}
    view = views.get(claim.jobid)
    where = f"job {claim.jobid} on {claim.machine}"
    out = [f"it is running in {where} since {format_time(claim.start)}"]
    run = view.running.get(task) if view else None
    if run is not None and run.hosts:
        out[0] += f", on {_hosts(run.hosts)}"
    age = now - claim.heartbeat
    if age > q.config.stale_after:
        out.append(f"its lease has not been renewed for {format_duration(round(age))}, so "
                   f"{where} is probably dead; the next runner takes the task back")
    return [_sentence(s) for s in out]


def _waiting(q: Queue, task: str, now: float) -> list[str]:
    scan = q.scan()
    order = list(scan.tasks)
    pos = next((i for i, t in enumerate(order) if t.id == task), None)
    if pos is None:
        bad = next((b for b in scan.invalid if b.id == task), None)
        why = bad.reason if bad else "it could not be read"
        return [_sentence(f"it is not a valid task and will be moved to rejected/: {why}")]
    t = order[pos]
    if t.not_before > now:
        last = _last_end(q, t)
        return [_sentence(f"it waits for its retry delay after {last}: it becomes eligible at "
                          f"{format_time(t.not_before)}, in {format_duration(t.not_before - now)}"
                          f", and other tasks run meanwhile")]
    if t.spec.after or t.spec.after_any:
        ready = Dependencies(q).check(t)
        if not ready.ready:
            after = ", ".join((*t.spec.after, *(f"{n} (to end)" for n in t.spec.after_any)))
            return [_sentence(ready.words),
                    _sentence(f"it starts once every task it names has "
                              f"{'ended' if not t.spec.after else 'finished'}: {after}"
                              if ready.failed is None else
                              "the next runner moves it to failed/; 'metaq retry' the "
                              "dependency first, then this task")]
    claims = q.leases()
    jobs = live_jobs(read_job_logs(q.root), claims, now=now, stale_after=q.config.stale_after)
    reasons: list[str] = []
    if not jobs:
        reasons.append("no batch job is running metaq on this queue now; submit one (metaq "
                       "jobscript slurm prints a job script to copy, or metaq alloc submits "
                       "them by itself), and it will pick tasks in order")
    else:
        reasons.extend(_against_jobs(t, jobs, now))
    reasons.extend(_notice_words(q, t, now))
    if pos > 0:
        named = PeopleIds(q.root)
        ahead = ", ".join(named(x.id) for x in order[:min(pos, _AHEAD_SHOWN)])
        more = f" and {pos - _AHEAD_SHOWN} more" if pos > _AHEAD_SHOWN else ""
        reasons.append(f"it is number {pos + 1} of {len(order)} waiting tasks, behind "
                       f"those ahead of it in queue order: {ahead}{more}")
    else:
        reasons.append(f"it is first of {len(order)} waiting tasks in pick order")
    return [_sentence(s) for s in reasons]


def _last_end(q: Queue, t: Task) -> str:
    """How the last run of the waiting task ``t`` ended, from its logbook."""
    book = read_logbook(t.path, os.lstat(t.path).st_ino) if os.path.lexists(t.path) else None
    last = book.history[-1] if book is not None and book.history else {}
    code, event = last.get("exit_code"), last.get("event", "ended")
    how = f"exit code {code}, {event}" if code is not None else str(event)
    return f"its last run ({how}; {counted(book.attempts if book else 0, 'failed run')} " \
           f"so far)"


def _against_jobs(t: Task, jobs: list[JobView], now: float) -> list[str]:
    """Why none of ``jobs`` runs ``t`` now, or which one should start it."""
    misfits: list[str] = []
    kinds: set[str] = set()
    fitting: list[JobView] = []
    for job in jobs:
        problem = fit_problem(t, nnodes=job.nodes, gpus_per_node=job.gpus_per_node,
                              machine=job.machine or "")
        if problem is not None:
            kinds.add("machine" if t.spec.machine not in (None, job.machine) else "size")
        elif t.walltime > job.time_left(now):
            kinds.add("time")
            problem = (f"it needs {format_duration(t.walltime)} of wall clock, and "
                       f"{_left(job, now)} is left")
        if problem is None:
            fitting.append(job)
        else:
            misfits.append(f"job {job.jobid}: {problem}")
    if not fitting:
        lead = {"size": "it is too big for every live allocation (nodes or GPUs)",
                "time": "not enough wall clock is left in any live allocation",
                "machine": "every live allocation is on another machine"}
        first = lead[kinds.pop()] if len(kinds) == 1 else "no live allocation can run it"
        return [f"{first}: {'; '.join(misfits)}"]
    out: list[str] = []
    need = t.spec.min_nodes
    for job in fitting:
        idle = job.idle()
        gpus_free = job.gpus - job.gpus_busy()
        if len(idle) >= need and gpus_free >= t.spec.gpus:
            out.append(f"job {job.jobid} has {len(idle)} idle nodes and {_left(job, now)} "
                       f"left, enough for it; it should start at that runner's next decision")
            continue
        held = {n: job.reserved_idle(n) for n in job.reserved}
        held = {n: hs for n, hs in held.items() if hs}
        if held and len(idle) + sum(map(len, held.values())) >= need:
            names = ", ".join(f"{len(hs)} for notice {n}" for n, hs in held.items())
            out.append(f"waiting behind a reservation: job {job.jobid} holds idle nodes "
                       f"({names}) until the on-demand work arrives or the notice is released")
            continue
        out.append(f"job {job.jobid} has {len(idle)} idle of {job.nodes} nodes and it needs "
                   f"{need}; {counted(len(job.running), 'task')} "
                   f"{'holds' if len(job.running) == 1 else 'hold'} the rest")
    return out


def _notice_words(q: Queue, t: Task, now: float) -> list[str]:
    if t.spec.notice is None:
        return []
    notice_files, _ = read_notices(q.root)
    match = next((r for r in notice_files if r.name == t.spec.notice), None)
    if match is None:
        return [f"its notice {t.spec.notice!r} is not live, so it runs as on-demand work "
                f"without a reservation"]
    return [f"it redeems notice {match.name!r}: {match.notice.nodes} nodes announced for "
            f"{format_time(match.notice.arrival)}"]


def _left(job: JobView, now: float) -> str:
    left = job.time_left(now)
    return "no time limit" if math.isinf(left) else format_duration(max(0, round(left)))


def _hosts(hosts: tuple[str, ...]) -> str:
    return f"host {hosts[0]}" if len(hosts) == 1 else f"hosts {', '.join(hosts)}"


def _sentence(text: str) -> str:
    text = text.strip()
    text = text[0].upper() + text[1:] if text else text
    return text if text.endswith((".", "?", "!")) else text + "."
