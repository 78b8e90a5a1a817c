"""How a task is shown by the queue's commands: as JSON, and as lines for people.

``metaq check`` and ``metaq show`` print what a :class:`~metaq_py.task_spec.TaskSpec` asks for
(:func:`print_spec`), ``ls --json`` and ``show --json`` give an
:class:`~metaq_py.queue.admin.Entry` as JSON (:func:`entry_json`), and ``show`` prints a task's
logbook with local times, durations in words and the resources each run used
(:func:`print_history`). Nothing here reads the queue: the commands pass in what they read.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import typer

from metaq_py.cli.when import in_units, in_words, iso_local
from metaq_py.durations import format_duration
from metaq_py.queue.finding import Entry
from metaq_py.queue.logbook import USAGE_FIELDS
from metaq_py.task_spec import TaskShape, TaskSpec
from metaq_py.words import counted

if TYPE_CHECKING:
    from metaq_py.report.attempts import Attempt

__all__ = ["entry_json", "print_attempts", "print_history", "print_spec", "spec_json",
           "usage_words"]


def spec_json(spec: TaskSpec) -> dict[str, Any]:
    """``spec`` as JSON: its fields, the type as its word, without the line numbers."""
    data = asdict(spec)
    data.pop("lines", None)
    data["type"] = spec.type.value
    return data


def entry_json(e: Entry) -> dict[str, Any]:
    """A task as ``ls --json`` and ``show --json`` give it: where it is and what it asks for."""
    return {"task": e.id, "state": e.state, "folder": e.folder, "relpath": e.relpath,
            "path": str(e.path), "spec": spec_json(e.spec) if e.spec else None,
            "reason": e.reason, "machine": e.machine, "job": e.jobid, "attempts": e.attempts}


def print_history(submitted: float | None, history: list[dict[str, Any]], *,
                   now: float) -> None:
    """A task's logbook for people: local ISO 8601 times, and durations in words."""
    if submitted is not None:
        typer.echo(f"submitted: {iso_local(submitted)} ({in_words(max(0.0, now - submitted))} "
                   f"ago)")
    if history:
        typer.echo("history:")
    for h in history:
        when = h.get("time")
        if not isinstance(when, int | float):
            typer.echo("  " + ", ".join(f"{k} {v}" for k, v in h.items()))
            continue
        rest = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in h.items()
                         if k not in ("time", "event", *USAGE_FIELDS))
        after = (f" ({in_words(max(0.0, when - submitted))} after submission)"
                 if submitted is not None else "")
        used = usage_words(h)
        if used:
            rest = f"{rest}; used {used}" if rest else f"used {used}"
        typer.echo(f"  {iso_local(when)}  {h.get('event', '?')}"
                   + (f": {rest}" if rest else "") + after)


OUTCOME_WORDS = {"retry": "failed (retried)", "requeued": "requeued (not a failure)",
                 "preempted": "preempted (not a failure)",
                 "reclaimed": "taken back from a lost job",
                 "oom": "killed for passing its MEM (oom)"}
"""An ``end`` event's outcome as people read it, where its word alone would mislead."""


def print_attempts(attempts: list[Attempt], *, retries: int) -> None:
    """Every attempt of a task for people: when it started, on which nodes, for how long,
    how it ended, and where its output is (``RETRIES`` is ``retries``)."""
    if not attempts:
        return
    from metaq_py.report.attempts import retry_words

    typer.echo("attempts:")
    for a in attempts:
        nodes = ", ".join(a.hosts) or "unknown nodes"
        where = f"on {nodes} ({counted(len(a.hosts), 'node')})" if a.hosts else "on ?"
        if a.outcome is None:
            how = "running, or its job ended without a word"
        else:
            how = OUTCOME_WORDS.get(a.outcome, a.outcome) + (
                f", exit code {a.exit_code}" if a.exit_code is not None else "") + (
                f", killed by {a.signal}" if a.signal else "")
        ran = f", after {in_units(a.seconds)}" if a.seconds is not None else ""
        typer.echo(f"  {a.number}. {iso_local(a.start)}  job {a.job} {where}: {how}{ran} "
                   f"({retry_words(a.number, retries)})")
        for path in a.output:
            typer.echo(f"     output: {path}")


def usage_words(entry: dict[str, Any]) -> str | None:
    """What the run a logbook entry ends used, for people: CPU time in user and system mode,
    peak memory, and where the figures come from; ``None`` when the entry does not say."""
    user, system = entry.get("cpu_user_seconds"), entry.get("cpu_system_seconds")
    if not isinstance(user, int | float) or not isinstance(system, int | float):
        return None
    words = f"CPU {user:.2f} s user + {system:.2f} s system"
    rss = entry.get("max_rss_bytes")
    if isinstance(rss, int) and not isinstance(rss, bool):
        words += f", peak memory {_bytes(rss)}"
    whole = entry.get("memory_peak_bytes")
    if isinstance(whole, int) and not isinstance(whole, bool):
        words += f" (the whole task's, in its cgroup: {_bytes(whole)})"
    source = entry.get("usage_from")
    return words + (f", from {source}" if isinstance(source, str) else "")


def _bytes(n: int) -> str:
    """``n`` bytes in binary units, one decimal."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def shape_words(shape: TaskShape) -> str:
    """One shape of a task in words: its size, GPUs and wall clock."""
    if shape.cpus:
        size = f"{shape.cpus} cores of one node"
    elif shape.gpu_share:
        size = "a share of one node"
    else:
        size = f"{shape.nodes} node{'s' if shape.nodes != 1 else ''}"
    wc = format_duration(shape.min_wc_time) if shape.min_wc_time is not None \
        else "the queue default"
    gpus = f"{shape.gpus} GPU{'' if shape.gpus == 1 else 's'}"
    return f"{size}, {gpus}, for {wc}"


def print_spec(spec: TaskSpec, *, header: bool = True, words: bool = False) -> None:
    """What ``spec`` asks for, one setting a line; ``words`` adds its wall clock in words."""
    if header:
        typer.echo(f"{spec.path}: ok")
    rows = [("type", spec.type.value),
            ("nodes", f"{spec.min_nodes} to {spec.nodes}" if spec.min_nodes != spec.nodes
             else str(spec.nodes)),
            ("gpus", str(spec.gpus)),
            ("min_wc_time", format_duration(spec.min_wc_time)
             + (f" ({in_words(spec.min_wc_time)})" if words else "")
             if spec.min_wc_time is not None else "queue default")]
    if spec.cpus or spec.gpu_share:
        rows.insert(2, ("cpus", str(spec.cpus) if spec.cpus else "those that go with its GPUs"))
    for i, shape in enumerate(spec.shapes, start=1):
        rows.append((f"shape {i}", shape_words(shape)))
    for name in ("project", "log", "machine", "notice", "retries"):
        value = getattr(spec, name)
        if value is not None:
            rows.append((name, str(value)))
    if spec.array is not None:
        throttle = spec.array.partition("%")[2]
        rows.append(("array", spec.array + (f" (at most {throttle} at once)" if throttle
                                            else "")))
    if spec.after:
        rows.append(("after", " ".join(spec.after) + " (to finish)"))
    if spec.after_any:
        rows.append(("after_any", " ".join(spec.after_any) + " (to end, however)"))
    if spec.priority:
        rows.append(("priority", str(spec.priority)))
    if spec.setup:
        rows.append(("setup", format_duration(spec.setup)))
    if spec.checkpoint:
        rows.append(("checkpoint", f"every {format_duration(spec.checkpoint.interval)}, "
                                   f"costing {format_duration(spec.checkpoint.cost)}"))
    if spec.signal:
        rows.append(("signal", f"{spec.signal.name} {format_duration(spec.signal.before)} "
                               f"before the end"))
    if spec.resize:
        rows.append(("resize", spec.resize.mode + (f" ({spec.resize.signal})"
                                                   if spec.resize.signal else "")))
    if spec.header_only:
        rows.append(("header_only", "yes: later #METAQ lines are the script's own text"))
    for name, value in rows:
        typer.echo(f"  {name:<12} {value}")
