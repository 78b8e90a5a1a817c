"""Whether a well-formed task is admitted to one particular queue.

The directives parser knows nothing of the queue; this module checks a parsed spec against the
queue's settings: the caps on nodes, GPUs and wall clock, and where ``LOG`` may go. As in
METAQ, a task may log wherever its own owner may write (under the queue, its ``log/`` folder
included, or the owner's own folders; see :mod:`metaq_py.queue.disk.logfile`), except into the
queue's ``jobs/`` folder itself or a job's event log. ``log_roots`` in ``metaq.yaml`` tighten
this: when set, a log must also lie under one of them (or the queue's ``jobs/``).
"""

from __future__ import annotations

import os
from pathlib import Path

from metaq_py.durations import format_duration
from metaq_py.errors import TaskError
from metaq_py.queue.settings.config import QueueConfig
from metaq_py.task_spec import TaskSpec

__all__ = ["admit", "log_refusal", "resolve_log"]


def resolve_log(log: str, *, root: Path, config: QueueConfig) -> Path | None:
    """The absolute path a ``LOG`` value names (relative ones are relative to the queue root),
    or ``None`` when the queue refuses it whoever the owner: a file directly in ``jobs/`` or a
    job's ``events.jsonl``, or, with ``log_roots`` set, a path outside them. Links are
    resolved for these tests, so a link cannot point the log into ``jobs/`` or out of a
    root; the path itself is returned as written, for :func:`~metaq_py.queue.disk.logfile
    .open_log` to walk."""
    from metaq_py.queue.disk.logfile import log_target  # only a task with LOG needs it
    target = log_target(log, root)
    jobs = os.path.realpath(root.absolute() / "jobs")
    for where in {str(target), os.path.realpath(target)}:
        parent = os.path.dirname(where)
        if parent == jobs or (os.path.dirname(parent) == jobs
                              and os.path.basename(where) == "events.jsonl"):
            # jobs/ holds one folder per job, and jobs/<jobid>/events.jsonl its accounting: a
            # task's output there would corrupt it.
            return None
    if len(config.log_roots) <= 1:  # only jobs/, always there: no log_roots were set
        return target
    real = os.path.realpath(target)
    for base in config.log_roots:
        top = os.path.realpath(base)
        if real != top and os.path.commonpath([real, top]) == top:
            return target
    return None


def log_refusal(log: str, *, root: Path, config: QueueConfig) -> str:
    """The sentence that says why :func:`resolve_log` refused ``log``."""
    if len(config.log_roots) <= 1:
        return (f"LOG {log} would write into the queue's jobs/ folder or a job's event log, "
                f"which only the runner writes; log elsewhere, e.g. under the queue's log/")
    roots = ", ".join(config.log_roots)
    return (f"LOG {log} is outside the queue's log roots ({roots}); write the log under one "
            f"of them or add a root to log_roots in metaq.yaml")


def admit(spec: TaskSpec, *, root: Path, config: QueueConfig, owner: int | None = None) -> None:
    """Raise :class:`TaskError` if ``spec`` asks for more than the queue allows, or logs where
    the queue refuses or where the task's ``owner`` (a user id; ``None``: not checked) may not
    write."""
    caps = config.caps
    for i, shape in enumerate(spec.shapes, start=1):
        too_much = _over_caps(shape.nodes, shape.gpus, shape.min_wc_time, config)
        if too_much is not None:
            raise TaskError(spec.path, spec.shape_line(i), f"this SHAPE asks for {too_much}")
    if caps.nodes is not None and spec.min_nodes > caps.nodes:
        raise TaskError(spec.path, spec.line_of("NODES") or spec.line_of("MIN_NODES"),
                        f"the task needs {spec.min_nodes} nodes but this queue allows at most "
                        f"{caps.nodes} (caps.nodes in metaq.yaml)")
    if caps.gpus is not None and spec.gpus > caps.gpus:
        raise TaskError(spec.path, spec.line_of("GPUS"),
                        f"GPUS {spec.gpus} is more than this queue allows ({caps.gpus}, "
                        f"caps.gpus in metaq.yaml)")
    wc = spec.min_wc_time if spec.min_wc_time is not None else config.defaults.min_wc_time
    if caps.min_wc_time is not None and wc > caps.min_wc_time:
        raise TaskError(spec.path, spec.line_of("MIN_WC_TIME"),
                        f"MIN_WC_TIME {format_duration(wc)} is more than this queue allows "
                        f"({format_duration(caps.min_wc_time)}, caps.min_wc_time in metaq.yaml)")
    if spec.log is not None:
        from metaq_py.queue.disk.logfile import log_problem  # only a task with LOG needs it
        target = resolve_log(spec.log, root=root, config=config)
        why = log_refusal(spec.log, root=root, config=config) if target is None \
            else None if owner is None else log_problem(target, owner)
        if why is not None:
            raise TaskError(spec.path, spec.line_of("LOG"), why)


def _over_caps(nodes: int, gpus: int, min_wc_time: float | None,
               config: QueueConfig) -> str | None:
    """What a shape asks for beyond the queue's caps, in words, or ``None``."""
    caps = config.caps
    wc = min_wc_time if min_wc_time is not None else config.defaults.min_wc_time
    if caps.nodes is not None and nodes > caps.nodes:
        return f"{nodes} nodes, and this queue allows at most {caps.nodes} (caps.nodes)"
    if caps.gpus is not None and gpus > caps.gpus:
        return f"{gpus} GPUs, and this queue allows at most {caps.gpus} (caps.gpus)"
    if caps.min_wc_time is not None and wc > caps.min_wc_time:
        return (f"{format_duration(wc)}, and this queue allows at most "
                f"{format_duration(caps.min_wc_time)} (caps.min_wc_time)")
    return None
