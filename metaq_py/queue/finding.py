"""Finding tasks in every state: :class:`Entry` (a task file in some state, as ``metaq ls``,
``status`` and ``show`` list it), the task files of each state's folders, where a task is now
(:func:`locate`), and a task found by its bare file name (``metaq show prop_42.sh``).

A state keeps a task's identity in its path (``hold/<folder>/<relpath>``,
``finished/<folder>/<relpath>``, ...), except ``working/``, where a running task sits under
its file name and its lease keeps the identity (:mod:`metaq_py.queue.lease`); a file put
into ``hold/`` by hand is a held task of the default task folder
(:meth:`~metaq_py.queue.layout.Layout.held_identity`). Reads only; for people's commands,
never for a runner's pass.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from metaq_py.errors import QueueError
from metaq_py.queue.disk.folders import ARRAY_FILE, ENDED_ARRAYS, subfolders, task_files
from metaq_py.queue.layout import (
    CANCELLED,
    FAILED,
    FINISHED,
    HOLD,
    PENDING,
    REJECTED,
    STATES,
    WORKING,
    Layout,
)
from metaq_py.task_spec import TaskSpec

__all__ = ["NAMED_SHOWN", "STATE_WORDS", "Entry", "arrays_below", "by_name", "files_in",
           "locate", "tasks_named"]

STATE_WORDS = {PENDING: "waiting", HOLD: "held", WORKING: "running", FINISHED: "finished",
               FAILED: "failed", REJECTED: "rejected", CANCELLED: "cancelled"}
"""Each state as people say it: a task is waiting, held, running, finished, ..."""

NAMED_SHOWN = 5
"""How many of the tasks that share a file name an error names (the rest are counted)."""


@dataclass(frozen=True, slots=True)
class Entry:
    """A task file in some state, as listed by ``metaq ls`` and ``metaq status``.

    ``spec`` is ``None`` when the script does not parse (``reason`` then says why, for a
    waiting task). ``reason`` is the ``.reason`` text of a failed, rejected or cancelled task.
    ``machine`` and ``jobid`` are set for claimed tasks.
    """

    state: str
    folder: str
    relpath: str
    path: Path
    spec: TaskSpec | None
    reason: str | None = None
    machine: str | None = None
    jobid: str | None = None
    attempts: int = 0
    not_before: float = 0.0
    """For a waiting task, the end of its retry delay (0: none)."""

    @property
    def id(self) -> str:
        return f"{self.folder}/{self.relpath}"


def tasks_named(q: Layout, name: str, *, states: tuple[str, ...] = STATES) -> list[Entry]:
    """Every task of ``q`` in ``states`` whose file name (the last part of its relative path)
    is ``name``, by state in the order given, then by identity. Walks the folders of those
    states: for a person's command, never for a runner."""
    out: list[Entry] = []
    for state in states:
        if state == WORKING:
            out += sorted((Entry(WORKING, c.folder, c.relpath, c.path, None,
                                 machine=c.machine, jobid=c.jobid)
                           for c in q.leases() if c.relpath.rpartition("/")[2] == name),
                          key=lambda e: e.id)
            continue
        out += sorted((Entry(state, folder, rel, path, None)
                       for folder, rel, path in files_in(q, state)
                       if rel.rpartition("/")[2] == name), key=lambda e: e.id)
    return out


def files_in(q: Layout, state: str) -> Iterator[tuple[str, str, Path]]:
    """(folder, relpath, path) of every task file of ``q`` in ``state`` (not ``working``),
    as found in its folders; in ``hold/``, files put there by hand as METAQ users do too
    (see :meth:`~metaq_py.queue.layout.Layout.held_identity`)."""
    if state == HOLD:
        for rel, path in task_files(q.root / HOLD):
            yield (*q.held_identity(rel), path)
        return
    for folder in q.config.folders if state == PENDING else subfolders(q.root / state):
        top = q.root / folder if state == PENDING else q.root / state / folder
        for rel, path in task_files(top):
            yield folder, rel, path


def locate(q: Layout, folder: str, relpath: str, *, states: tuple[str, ...] = STATES
           ) -> Entry | None:
    """Where the task ``folder/relpath`` of ``q`` is now, looking in ``states`` in that
    order."""
    for state in states:
        if state == WORKING:
            for claim in q.leases():
                if claim.folder == folder and claim.relpath == relpath:
                    return Entry(WORKING, folder, relpath, claim.path, None,
                                 machine=claim.machine, jobid=claim.jobid)
            continue
        paths = (q.held_paths(folder, relpath) if state == HOLD
                 else [q.path_of(state, folder, relpath)])
        for path in paths:
            if os.path.lexists(path) and not path.is_dir():
                return Entry(state, folder, relpath, path, None)
    return None


def by_name(q: Layout, name: str, states: tuple[str, ...]) -> Entry:
    """The one task in ``states`` whose file name is ``name``; else a :class:`QueueError`
    names those that have it, or says that none does."""
    found = tasks_named(q, name, states=states)
    if len(found) == 1:
        return found[0]
    wanted = " or ".join(STATE_WORDS[s] for s in states)
    if found:
        which = ", ".join(f"{e.id} ({STATE_WORDS[e.state]})" for e in found[:NAMED_SHOWN])
        if len(found) > NAMED_SHOWN:
            which += f" and {len(found) - NAMED_SHOWN} more"
        raise QueueError(f"{len(found)} tasks are called {name!r}: {which}; name one by its "
                         f"<folder>/<path>")
    elsewhere = [] if states == STATES else tasks_named(q, name)
    where = ("; " + ", ".join(f"{e.id} is {STATE_WORDS[e.state]}" for e in elsewhere)
             if elsewhere else "; 'metaq ls' lists the tasks")
    raise QueueError(f"no task called {name!r} is {wanted}{where}")


def arrays_below(root: Path, folder: str, name: str) -> Iterator[str]:
    """The identities of the arrays in the task folder ``folder`` of the queue at ``root``,
    at any depth, whose path ends with ``name`` (``prop.sh``, ``batch2/prop.sh``): found by a
    walk of its sub-folders that never enters an array nor follows a link. For a person's
    command, when ``name`` is not an array right below a task folder."""
    tail = tuple(p for p in name.split("/") if p)
    waiting = list(_arrays_in(root / folder, folder, tail, lambda _p: False))
    yield from waiting
    # An array whose last index ended keeps its files beside its finished indices; the
    # folders there of arrays still waiting hold only indices, and are not entered.
    for ident in _arrays_in(root / ENDED_ARRAYS / folder, folder, tail,
                            lambda where: os.path.lexists(root.joinpath(*where, ARRAY_FILE))):
        if ident not in waiting:  # moved there while this walk went on
            yield ident


def _arrays_in(top_folder: Path, folder: str, tail: tuple[str, ...],
               skip: Callable[[tuple[str, ...]], bool]) -> Iterator[str]:
    """The arrays below ``top_folder`` (the task folder ``folder``'s place in a state)
    whose identity ends with ``tail``; a folder of identity parts ``where`` for which
    ``skip`` says so is not entered."""
    stack: list[tuple[Path, tuple[str, ...]]] = [(top_folder, (folder,))]
    while stack:
        top, parts = stack.pop()
        try:
            with os.scandir(top) as it:
                subs = sorted((e.name for e in it if e.name[0] != "." and
                               e.is_dir(follow_symlinks=False)), reverse=True)
        except OSError:
            continue
        for sub in subs:
            path, where = top / sub, (*parts, sub)
            if os.path.lexists(path / ARRAY_FILE):
                if len(where) > len(tail) and where[-len(tail):] == tail:
                    yield "/".join(where)
            elif not skip(where):
                stack.append((path, where))
