"""Whether a well-formed task is admitted to one particular queue.

The directives parser knows nothing of the queue; this module checks a parsed spec against the
queue's settings: the caps on nodes, GPUs and wall clock, and that ``LOG`` stays under one of
the log roots (a task must not be able to make the batch job's owner write anywhere).
"""

from __future__ import annotations

import os
from pathlib import Path

from metaq_py.durations import format_duration
from metaq_py.errors import TaskError
from metaq_py.queue.settings.config import QueueConfig
from metaq_py.task_spec import TaskSpec

__all__ = ["admit", "resolve_log"]


def resolve_log(log: str, *, root: Path, config: QueueConfig) -> Path | None:
    """The absolute path a ``LOG`` value names (relative ones are relative to the queue root),
    or ``None`` when it is not under any of the queue's log roots. Symlinks are resolved, so
    a link inside a log root cannot point the log elsewhere."""
    p = Path(log)
    target = os.path.realpath(p if p.is_absolute() else root.absolute() / p)
    jobs = os.path.realpath(root.absolute() / "jobs")
    parent = os.path.dirname(target)
    if parent == jobs or (os.path.dirname(parent) == jobs
                          and os.path.basename(target) == "events.jsonl"):
        # jobs/ holds one folder per job, and jobs/<jobid>/events.jsonl its accounting: a
        # task's output there would corrupt it.
        return None
    for base in config.log_roots:
        real = os.path.realpath(base)
        if target != real and os.path.commonpath([target, real]) == real:
            return Path(target)
    return None


def admit(spec: TaskSpec, *, root: Path, config: QueueConfig) -> None:
    """Raise :class:`TaskError` if ``spec`` asks for more than the queue allows, or logs
    outside the queue's log roots."""
    caps = config.caps
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
    if spec.log is not None and resolve_log(spec.log, root=root, config=config) is None:
        roots = ", ".join(config.log_roots)
        raise TaskError(spec.path, spec.line_of("LOG"),
                        f"LOG {spec.log} is outside the queue's log roots ({roots}); write the "
                        f"log under one of them or add a root to log_roots in metaq.yaml")
