"""Dependencies between tasks: ``#METAQ AFTER NAME`` and ``AFTER_ANY`` (``metaq submit
--after NAME``), as SLURM's ``--dependency=afterok`` and ``afterany``.

A name is a task's identity (``todo/prop.sh``), a script name found in a task folder
(``prop.sh``), an array or some of its indices (``prop.sh``, ``prop.sh[3]``, ``prop.sh[0-9]``,
see :mod:`metaq_py.queue.campaign.arrays`), or a glob over identities (``todo/prop-*``). ``metaq
submit`` resolves every name (:class:`Resolver`) when the task is submitted: a name that
matches no task is refused, so are cycles, and the queued copy of the script names exactly
the identities found (an array stays one name). So every runner, in every allocation, reads
the same dependencies from the file; a script put into a task folder by hand has its names
resolved by each reader instead.

Whether a waiting task may start (:class:`Dependencies`) is read from the queue's folders
alone, by ``stat``: a dependency is where its identity sits (its task folder, ``hold/``,
``finished/``, ``failed/``, ...) or, while it runs, where a job's folder in ``working/`` holds
a claim of its file name whose lease names it; an array by listing its folder in each done
state. The verdicts are remembered, and worked out again only when a task has ended
somewhere (the tally's files, :mod:`metaq_py.queue.tally`, change then), when the waiting
tasks changed, or every :data:`RECHECK` seconds, so a runner's pass costs no walk of history.
A dependency that ended in ``failed/``, ``rejected/`` or ``cancelled/`` fails its dependents
for good: they move to ``failed/`` with the reason "dependency X failed".
"""

from __future__ import annotations

import fnmatch
import glob
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from metaq_py.directive_keys import parse_indices
from metaq_py.errors import QueueError
from metaq_py.queue.disk.folders import PeopleIds
from metaq_py.queue.index import Task
from metaq_py.queue.layout import (
    CANCELLED,
    DONE_STATES,
    FAILED,
    FINISHED,
    HOLD,
    PENDING,
    REJECTED,
    WORKING,
    Layout,
)
from metaq_py.queue.lease import find_claim

if TYPE_CHECKING:
    from metaq_py.queue.campaign.arrays import ArrayInfo
    from metaq_py.queue.claiming import ClaimingQueue

__all__ = ["RECHECK", "Dependencies", "Readiness", "Resolver", "find_cycle", "rewrite_after"]

RECHECK = 10.0
"""Seconds after which a waiting task's dependencies are looked at again even though no sign
of a change was seen (a tally that could not be written, a clock step)."""

_GLOB = frozenset("*?[")
_WORDS = {PENDING: "waiting", HOLD: "held", WORKING: "running", FINISHED: "finished",
          FAILED: "failed", REJECTED: "rejected", CANCELLED: "cancelled", "missing": "missing"}
_ENDED_BADLY = {FAILED: "failed", REJECTED: "was rejected", CANCELLED: "was cancelled"}


# --- names -----------------------------------------------------------------------------------


class Resolver:
    """Turns the names a task gives into identities of the queue at ``root``. ``coming`` are
    identities about to be submitted with it (an array's with its indices)."""

    def __init__(self, queue: Layout, coming: dict[str, tuple[int, ...] | None] | None = None
                 ) -> None:
        self.q = queue
        self.coming = dict(coming or {})
        self._arrays: dict[str, ArrayInfo | None] = {}
        self.named = PeopleIds(queue.root)
        """An identity as people write it (an index of an array as ``todo/prop.sh[13]``)."""

    def array(self, ident: str) -> tuple[int, ...] | None:
        """The indices of the array ``ident``, or ``None`` if it is not one."""
        if ident in self.coming:
            return self.coming[ident]
        if ident not in self._arrays:
            from metaq_py.queue.campaign.arrays import read_array  # only a name with [...]
            self._arrays[ident] = read_array(self.q.root, ident)
        info = self._arrays[ident]
        return None if info is None else info.indices

    def resolve(self, name: str, *, near: str | None = None) -> list[str]:
        """The identities ``name`` stands for (an array as one), in a stable order. A name
        without its task folder is looked for first among the scripts submitted along, then
        in ``near`` (the folder of the task that names it, ``todo/batch2``), then right in
        each task folder, then as an array deeper in one; two found at one step are refused
        with both named. Raises :class:`QueueError` when it names nothing in the queue."""
        from metaq_py.queue.campaign.arrays import split_ref  # only AFTER names need it
        base, sel = split_ref(name)
        found: list[str] = []
        if sel is not None:
            for ident in self._named(base, near, lambda c: self.array(c) is not None):
                indices = self.array(ident)
                if indices is None:
                    continue
                if sel == "*":
                    return [ident]
                wanted = parse_indices(sel)
                have = set(indices)
                missing = [i for i in wanted if i not in have]
                if missing:
                    raise QueueError(f"{name!r} names index {missing[0]}, which the array "
                                     f"{ident} does not have")
                return [f"{ident}/{i}" for i in wanted]
        elif _GLOB.isdisjoint(name):
            for ident in self._named(name, near, lambda c: c in self.coming or
                                     self.array(c) is not None or self.where(c) is not None):
                return [ident]
        else:
            found = self._glob(name)
        if not found:
            raise QueueError(f"AFTER {name!r} names no task, array or glob match in the queue "
                             f"{self.q.root}; 'metaq ls' lists the tasks")
        return found

    def _named(self, name: str, near: str | None, fits: Callable[[str], bool]) -> list[str]:
        """The one identity a name stands for among those that ``fits`` (see
        :meth:`resolve`), as a list of one; none found, an empty list."""
        name = name.strip("/")
        folders = self.q.config.folders
        if name.split("/", 1)[0] in folders:
            return [name] if fits(name) else []
        # Loaded only here: the names a runner reads were resolved at submit, folder and all.
        from metaq_py.queue.finding import NAMED_SHOWN, arrays_below

        steps = (lambda: [c for c in self.coming if c.endswith("/" + name)],
                 lambda: [f"{near}/{name}"] if near else [],
                 lambda: [f"{f}/{name}" for f in folders],
                 lambda: [a for f in folders for a in arrays_below(self.q.root, f, name)])
        for step in steps:
            hits = list(dict.fromkeys(c for c in step() if fits(c)))
            if len(hits) > 1:
                raise QueueError(f"AFTER {name!r} could mean {len(hits)} tasks: "
                                 f"{', '.join(hits[:NAMED_SHOWN])}"
                                 f"{' and more' if len(hits) > NAMED_SHOWN else ''}; name "
                                 f"one in full, such as {hits[0]}")
            if hits:
                return hits
        return []

    def _candidates(self, name: str) -> list[str]:
        folders = self.q.config.folders
        name = name.strip("/")
        if name.split("/", 1)[0] in folders:
            return [name]
        return [f"{f}/{name}" for f in folders]

    def where(self, ident: str) -> str | None:
        """The state the task ``ident`` is in (``missing`` never: ``None`` then)."""
        root = self.q.root
        if os.path.isfile(root / ident):
            return PENDING
        folder, _, relpath = ident.partition("/")
        if any(os.path.lexists(p) for p in self.q.held_paths(folder, relpath)):
            return HOLD
        for state in DONE_STATES:
            if os.path.lexists(root / state / ident):
                return state
        for job in _job_folders(root):
            if find_claim(job, folder, relpath, self.q.config.folders) is not None:
                return WORKING
        return None

    def _glob(self, pattern: str) -> list[str]:
        """Every identity matching ``pattern`` (with or without its task folder) in any state,
        or among those coming: a walk of the matching folders, for ``submit`` only."""
        pats = self._candidates(pattern)
        root = self.q.root
        tops = [root, root / HOLD, *(root / s for s in DONE_STATES)]
        found: dict[str, None] = {}
        for top in tops:
            for pat in pats:
                for hit in sorted(glob.glob(os.path.join(glob.escape(str(top)), pat))):
                    ident = os.path.relpath(hit, top).replace(os.sep, "/")
                    if hit.endswith(".reason"):
                        continue
                    if os.path.isdir(hit):
                        if os.path.exists(os.path.join(root, ident, ".array")):
                            found[ident] = None
                        continue
                    found[ident] = None
        for claim in self.q.leases():  # a running task's identity is in its lease
            array = claim.id.rpartition("/")[0]
            if any(_globbed(claim.id, p) for p in pats):
                found[claim.id] = None
            elif any(_globbed(array, p) for p in pats) and \
                    os.path.exists(os.path.join(root, array, ".array")):
                found[array] = None
        for ident in self.coming:
            if any(fnmatch.fnmatchcase(ident, p) for p in pats):
                found[ident] = None
        return list(found)


def _globbed(ident: str, pattern: str) -> bool:
    """Whether ``glob`` would match the identity ``ident`` with ``pattern`` (part by part: a
    ``*`` never reaches across a ``/``)."""
    parts, pats = ident.split("/"), pattern.split("/")
    return len(parts) == len(pats) and all(fnmatch.fnmatchcase(a, p)
                                           for a, p in zip(parts, pats, strict=True))


def rewrite_after(data: bytes, resolve: Callable[[tuple[str, ...]], tuple[str, ...]],
                  extra: tuple[str, ...] = ()) -> bytes:
    """``data`` (a script) with each ``AFTER`` and ``AFTER_ANY`` line of its header naming the
    identities ``resolve`` gives for its names, and a line ``AFTER`` for the ``extra`` names
    (``--after``) right after the shebang."""
    lines = data.split(b"\n")
    for n in range(1, len(lines)):
        text = lines[n].strip()
        if text and not text.startswith(b"#"):
            break
        words = re.sub(rb"\s#.*$", b"", text).split()
        if len(words) > 2 and words[0] == b"#METAQ" and words[1] in (b"AFTER", b"AFTER_ANY"):
            names = tuple(w.decode() for w in words[2:])
            lines[n] = b" ".join([*words[:2], *(i.encode() for i in resolve(names))])
    if extra:
        lines.insert(1, b" ".join([b"#METAQ AFTER", *(i.encode() for i in resolve(extra))]))
    return b"\n".join(lines)


def _job_folders(root: Path) -> list[Path]:
    """``working/<machine>/<jobid>/`` of every job holding claims."""
    out: list[Path] = []
    try:
        with os.scandir(root / WORKING) as machines:
            for m in machines:
                if m.name[0] != "." and m.is_dir(follow_symlinks=False):
                    with os.scandir(m.path) as jobs:
                        out.extend(Path(j.path) for j in jobs
                                   if j.name[0] != "." and j.is_dir(follow_symlinks=False))
    except OSError:
        pass
    return out


def find_cycle(edges: Mapping[str, Iterable[str]]) -> list[str] | None:
    """A cycle in the graph ``edges`` (task -> the tasks it waits for), as the list of its
    tasks with the first repeated at the end, or ``None``."""
    state: dict[str, int] = {}
    for start in edges:
        if state.get(start):
            continue
        stack: list[tuple[str, list[str]]] = [(start, list(edges.get(start, ())))]
        path = [start]
        state[start] = 1
        while stack:
            node, todo = stack[-1]
            if not todo:
                stack.pop()
                path.pop()
                state[node] = 2
                continue
            nxt = todo.pop()
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if not state.get(nxt) and nxt in edges:
                state[nxt] = 1
                path.append(nxt)
                stack.append((nxt, list(edges[nxt])))
    return None


# --- readiness -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Readiness:
    """Whether a waiting task may start. ``ready`` false: ``waits_for`` names the first
    dependency not yet met and ``state`` says where it is (``waiting``, ``running``, ...,
    or for an array how many of its indices are done); ``failed`` is set, with the reason,
    when a dependency failed for good. ``named`` is ``waits_for`` as people write it
    (``todo/prop.sh[13]``), when that differs."""

    ready: bool
    waits_for: str | None = None
    state: str | None = None
    failed: str | None = None
    named: str | None = None

    @property
    def words(self) -> str:
        """One clause for people: why the task waits or failed."""
        if self.failed is not None:
            return self.failed
        if self.ready:
            return "its dependencies are met"
        return f"it waits for its dependency {self.named or self.waits_for}, which is " \
            f"{self.state}"


READY = Readiness(True)


class Dependencies:
    """The readiness of the waiting tasks of ``queue`` that have dependencies, remembered
    between looks (see the module's description). For one process."""

    def __init__(self, queue: ClaimingQueue) -> None:
        self.q = queue
        self._seen: dict[str, tuple[Task, Readiness, tuple]] = {}
        self._sign: tuple | None = None

    def new_look(self) -> None:
        """Start a new look at the queue: signs of change are read again at the next check."""
        self._sign = None

    def check(self, task: Task) -> Readiness:
        """Whether ``task`` may start now, as far as its dependencies go."""
        spec = task.spec
        if not spec.after and not spec.after_any:
            return READY
        if self._sign is None:
            self._sign = self._signs()
        hit = self._seen.get(task.id)
        if hit is not None and hit[0] is task and (hit[1].ready or hit[2] == self._sign):
            return hit[1]  # met dependencies stay met: what finished never comes back
        verdict = self._judge(task)
        self._seen[task.id] = (task, verdict, self._sign)
        if len(self._seen) > 4 * 65536:
            self._seen.clear()
        return verdict

    def fail(self, task: Task, verdict: Readiness) -> Path | None:
        """Move ``task``, whose dependency failed for good, to ``failed/`` with the reason;
        ``None`` if someone moved it first."""
        from metaq_py.queue.moves import history_entry, logbook_of  # a runner's move

        q = self.q
        now = q.clock.now()
        logbook = logbook_of(task.path, now=now)
        logbook = replace(logbook, history=(*logbook.history,
                                            history_entry("failed", now=now,
                                                          reason=verdict.failed)))
        self._seen.pop(task.id, None)
        return q.move(task.path, q.path_of(FAILED, task.folder, task.relpath),
                      reason=verdict.failed, logbook=logbook)

    def _signs(self) -> tuple:
        """What changes when a task ends anywhere: the tally's files; plus the waiting tasks
        and the time, in :data:`RECHECK` steps."""
        from metaq_py.queue.tally import summary_dir  # only waiting for readiness reads the tally
        sign: list[object] = [self.q.index.serial, int(self.q.clock.now() // RECHECK)]
        try:
            with os.scandir(summary_dir(self.q.root) / "tally") as it:
                for e in it:
                    st = e.stat(follow_symlinks=False)
                    sign.append((e.name, st.st_size, st.st_mtime_ns))
        except OSError:
            pass
        with_base = summary_dir(self.q.root) / "base.json"
        try:
            st = os.stat(with_base)
            sign.append((st.st_ino, st.st_mtime_ns))
        except OSError:
            pass
        return tuple(sorted(sign, key=repr))

    def _judge(self, task: Task) -> Readiness:
        look = Resolver(self.q)
        waiting: Readiness | None = None
        for names, need in ((task.spec.after, (FINISHED,)), (task.spec.after_any, DONE_STATES)):
            for name in names:
                try:
                    idents = look.resolve(name)
                except QueueError:
                    waiting = waiting or Readiness(False, name, "not in the queue")
                    continue
                for ident in idents:
                    verdict = self._one(look, ident, need)
                    if verdict.failed is not None:
                        return verdict
                    if not verdict.ready:
                        waiting = waiting or verdict
        return waiting or READY

    def _one(self, look: Resolver, ident: str, need: tuple[str, ...]) -> Readiness:
        indices = look.array(ident)
        if indices is None:
            state = look.where(ident) or "missing"
            if state in need:
                return READY
            shown = look.named(ident)
            if state in _ENDED_BADLY and need == (FINISHED,):
                return Readiness(False, ident, _WORDS[state], failed=f"dependency {shown} "
                                 f"{_ENDED_BADLY[state]}")
            return Readiness(False, ident, _WORDS[state],
                             named=shown if shown != ident else None)
        names = {str(i) for i in indices}
        done = 0
        for state in DONE_STATES:
            ended = names.intersection(_names(self.q.root / state / ident))
            if state in need:
                done += len(ended)
            elif ended and need == (FINISHED,):
                first = min(ended, key=int)
                return Readiness(False, ident, _WORDS[state], failed=f"dependency "
                                 f"{ident}[{first}] {_ENDED_BADLY[state]}")
        if done >= len(names):
            return READY
        what = "finished" if need == (FINISHED,) else "ended"
        return Readiness(False, ident, f"an array with {done} of {len(names)} indices {what}")


def _names(folder: Path) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []
