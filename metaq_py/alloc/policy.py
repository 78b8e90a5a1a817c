"""Whether to submit an allocation for a queue now, and its size: a pure function, no I/O.

:func:`decide` takes what waits (:class:`Waiting`), this queue's allocations the batch system
knows (:class:`Known`), the settings (:class:`~metaq_py.queue.settings.config.AllocSettings`)
and the time of the last failed submission, and returns a :class:`Submit` or a
:class:`Refuse`, each with its reason in one sentence. The rules, in order:

1. a task must wait (``empty``) whose dependencies are met (``blocked``: tasks that wait
   only for unmet ``AFTER`` dependencies could run nothing in a new allocation; their turn
   comes when the dependency has finished);
2. fewer than ``max_queued`` allocations waiting to start (``queued``), and fewer than
   ``max_allocations`` queued or running (``limit``);
3. no failed submission within ``backoff`` (``backoff``);
4. some waiting task must fit an allocation the settings allow (``no-fit``): at least its
   smallest size in nodes, at most ``max_nodes``, and its ``MIN_WC_TIME`` plus ``margin``
   within ``max_walltime``. Never submitting an allocation that could run none of the waiting
   tasks is the point (HyperQueue's issue #248 is the counter-example).

The size is then taken from the tasks that fit: enough nodes for the largest of them (its
``NODES``, cut at ``max_nodes``) and for the backlog (the node-seconds of all of them spread
over the walltime), and a walltime covering the longest ``MIN_WC_TIME`` plus ``margin``;
both are kept within the settings' ranges.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from metaq_py.durations import format_duration
from metaq_py.queue.settings.config import AllocSettings
from metaq_py.words import counted

__all__ = ["Decision", "Known", "Refuse", "Submit", "Waiting", "decide"]


@dataclass(frozen=True, slots=True)
class Waiting:
    """One waiting task as sizing sees it: ``least`` nodes it can start on (``MIN_NODES`` of
    a malleable task, else ``NODES``), ``nodes`` it asks for, and its ``walltime``
    (``MIN_WC_TIME`` or the queue's default), in seconds."""

    task: str
    least: int
    nodes: int
    walltime: float


@dataclass(frozen=True, slots=True)
class Known:
    """One of this queue's allocations as the batch system reports it now: ``queued`` is true
    while it waits to start."""

    jobid: str
    queued: bool


@dataclass(frozen=True, slots=True)
class Submit:
    """Submit one allocation of ``nodes`` nodes for ``walltime`` seconds, because ``reason``;
    ``fits`` is how many of the waiting tasks it could run."""

    nodes: int
    walltime: float
    fits: int
    reason: str


@dataclass(frozen=True, slots=True)
class Refuse:
    """Submit nothing; ``code`` names the rule (``empty``, ``blocked``, ``limit``, ``queued``,
    ``backoff``, ``no-fit``) and ``reason`` says it in one sentence."""

    code: str
    reason: str


Decision = Submit | Refuse


def fits(task: Waiting, settings: AllocSettings) -> bool:
    """Whether an allocation the settings allow could run ``task``."""
    return (task.least <= settings.max_nodes
            and task.walltime + settings.margin <= settings.max_walltime)


def decide(waiting: Sequence[Waiting], known: Sequence[Known], settings: AllocSettings, *,
           now: float, last_failure: float | None = None, blocked: int = 0) -> Decision:
    """What to do for this queue now; see the module text for the rules. ``waiting`` are the
    tasks that could start now; ``blocked`` counts those that wait for a dependency."""
    if not waiting:
        if blocked:
            return Refuse("blocked", f"{_wait(blocked)}, each for a dependency not yet "
                                     f"finished, and none other")
        return Refuse("empty", "no task waits")
    queued = sum(1 for k in known if k.queued)
    if queued >= settings.max_queued:
        return Refuse("queued", f"{counted(queued, 'allocation')} of this queue "
                                f"{'waits' if queued == 1 else 'wait'} to start, the most "
                                f"alloc.max_queued allows")
    if len(known) >= settings.max_allocations:
        return Refuse("limit", f"{counted(len(known), 'allocation')} of this queue "
                               f"{'is' if len(known) == 1 else 'are'} queued or running, the "
                               f"most alloc.max_allocations allows")
    if last_failure is not None and now < last_failure + settings.backoff:
        wait = format_duration(math.ceil(last_failure + settings.backoff - now))
        return Refuse("backoff", f"a submission failed less than alloc.backoff ago; the "
                                 f"next try is in {wait}")
    fitting = [t for t in waiting if fits(t, settings)]
    if not fitting:
        return Refuse("no-fit", _no_fit(waiting, settings))
    longest = max(t.walltime for t in fitting)
    # Whole minutes, as batch systems count them (SLURM rounds a limit up to the minute).
    walltime = min(60.0 * math.ceil(max(longest + settings.margin, settings.min_walltime) / 60),
                   settings.max_walltime)
    largest = max(min(t.nodes, settings.max_nodes) for t in fitting)
    node_seconds = sum(min(t.nodes, settings.max_nodes) * t.walltime for t in fitting)
    backlog = math.ceil(node_seconds / walltime)
    nodes = min(max(largest, backlog, settings.min_nodes), settings.max_nodes)
    fit = "fits" if len(fitting) == 1 else "fit"
    reason = (f"{_wait(len(waiting))}, {len(fitting)} of which {fit}: {counted(nodes, 'node')} for "
              f"the largest ({largest}) and the backlog ({backlog}), "
              f"{format_duration(walltime)} for the longest MIN_WC_TIME "
              f"({format_duration(longest)}) plus alloc.margin")
    return Submit(nodes, walltime, len(fitting), reason)


def _wait(count: int) -> str:
    """``1 task waits``, ``3 tasks wait``."""
    return f"{counted(count, 'task')} {'waits' if count == 1 else 'wait'}"


def _no_fit(waiting: Sequence[Waiting], settings: AllocSettings) -> str:
    """Why none of ``waiting`` fits, naming the setting to raise."""
    small = [t for t in waiting if t.least <= settings.max_nodes]
    if not small:
        smallest = min(waiting, key=lambda t: t.least)
        return (f"no waiting task fits: the smallest ({smallest.task}) needs "
                f"{counted(smallest.least, 'node')} and alloc.max_nodes is {settings.max_nodes}")
    shortest = min(small, key=lambda t: t.walltime)
    return (f"no waiting task fits: the shortest small enough ({shortest.task}) needs "
            f"{format_duration(shortest.walltime)} plus alloc.margin "
            f"{format_duration(settings.margin)}, more than alloc.max_walltime "
            f"{format_duration(settings.max_walltime)}")
