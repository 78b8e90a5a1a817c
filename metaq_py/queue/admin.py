"""The people's commands on a queue: submit, hold, release, cancel, retry, and finding and
listing tasks in every state (``metaq submit``, ``hold``, ``ls``, ``show``, ``explain``, ...).

A batch job's runner never needs any of this: it works through :class:`~metaq_py.queue.store
.Queue` alone (scan, claim, heartbeat, finish, requeue, reclaim). :class:`QueueAdmin` wraps a
``Queue`` and moves tasks only through its one move (:meth:`~metaq_py.queue.store.Queue.move`),
so a person's move races a runner's exactly as two runners race: one rename wins.

A person names a task by its identity ``<folder>/<relpath>`` (``todo/sub/run.sh``), by a
path to its file anywhere in the queue, or by its bare file name (``run.sh``) when only one
task has it. What is found is an :class:`~metaq_py.queue.finding.Entry`
(:mod:`metaq_py.queue.finding`).

Over 500 lines, for now: a submission is one all-or-nothing plan (each script checked, its
``AFTER`` names resolved against the queue and the scripts beside it, twins refused, then
written), and the moves reuse its finding of tasks. The submit half is the part to split off,
with ``Queue``'s finish half (:mod:`metaq_py.queue.store`), in the round that finishes issue 36.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from metaq_py.directive_keys import INDEX, parse_indices
from metaq_py.directives import HEADER_LIMIT, read_script
from metaq_py.errors import QueueError, TaskError
from metaq_py.queue.campaign.deps import Resolver, find_cycle, rewrite_after
from metaq_py.queue.disk.fileio import (
    NAME_MAX,
    Refused,
    name_problem,
    read_regular,
    replace_file,
    write_all,
)
from metaq_py.queue.disk.folders import (
    CANCEL_SUFFIX,
    SCRIPT_FILE,
    companion,
    make_folders,
    read_reason,
)
from metaq_py.queue.finding import (
    NAMED_SHOWN,
    STATE_WORDS,
    Entry,
    arrays_below,
    by_name,
    files_in,
    tasks_named,
)
from metaq_py.queue.judge import Head, judge
from metaq_py.queue.layout import (
    CANCELLED,
    DONE_STATES,
    FAILED,
    FINISHED,
    HOLD,
    PENDING,
    REJECTED,
    STATES,
    WORKING,
)
from metaq_py.queue.logbook import Logbook, find_logbook
from metaq_py.queue.moves import history_entry, inode_of, logbook_of
from metaq_py.queue.settings.trust import user_name
from metaq_py.queue.store import Moved, Queue
from metaq_py.task_spec import TaskSpec

if TYPE_CHECKING:
    from metaq_py.queue.campaign.arrays import ArrayInfo

__all__ = ["Entry", "QueueAdmin", "tasks_named"]


@dataclass(frozen=True, slots=True)
class _Plan:
    """A script about to be submitted: its bytes, spec (``--after`` and ``--array`` in it),
    where it goes, its indices if it is an array, and the ``AFTER`` names given on the
    command line (``extra``), which its queued copy gets as a line of their own."""

    src: Path
    data: bytes
    spec: TaskSpec
    folder: str
    rel: str
    indices: tuple[int, ...] | None
    extra: tuple[str, ...]
    original: bytes = b""
    """The script's bytes as submitted, which :meth:`QueueAdmin._refuse_twins` compares."""

    @property
    def ident(self) -> str:
        return f"{self.folder}/{self.rel}"


def _for_index(name: str, index: int | None) -> str:
    return name if index is None else name.replace(INDEX, str(index))


class QueueAdmin:
    """The people's commands on ``queue``. Cheap to create; it keeps nothing of its own."""

    def __init__(self, queue: Queue) -> None:
        self.queue = queue

    # --- submitting ------------------------------------------------------------------------

    def submit(self, script: str | os.PathLike[str], *, folder: str | None = None,
               sub: str | None = None, hold: bool = False, array: str | None = None,
               after: tuple[str, ...] = (), header_only: bool = False, force: bool = False,
               again: bool = True, max_fails: int | None = None) -> Path:
        """Submit one script (see :meth:`submit_all`)."""
        return self.submit_all([script], folder=folder, sub=sub, hold=hold, array=array,
                               after=after, header_only=header_only, force=force,
                               again=again, max_fails=max_fails)[0]

    def submit_all(self, scripts: Sequence[str | os.PathLike[str]], *, folder: str | None = None,
                   sub: str | None = None, hold: bool = False, array: str | None = None,
                   after: tuple[str, ...] = (), header_only: bool = False,
                   force: bool = False, again: bool = True,
                   max_fails: int | None = None) -> list[Path]:
        """Validate ``scripts`` and copy them into the queue, all or nothing: into ``folder``
        (default ``todo``, or the last task folder), below sub-folder ``sub``, or into
        ``hold/`` with ``hold``. ``array`` (or the script's ``ARRAY``) queues one task per index
        (:mod:`metaq_py.queue.campaign.arrays`); ``after`` adds ``AFTER`` names. Every
        ``AFTER`` and ``AFTER_ANY`` name is resolved against the queue and the scripts
        submitted along (:mod:`metaq_py.queue.campaign.deps`): an unknown name or a cycle
        refuses them all. A ``#METAQ`` line below a script's first command refuses it, unless
        ``header_only`` (``--header-only``) says such lines are the script's own: its queued
        copy then says ``#METAQ HEADER_ONLY`` right after the shebang, so that every later
        judgement of it agrees. ``force`` (``--force``) does the same with ``#METAQ FORCE``:
        the task runs even when every output it ``CREATES`` exists. A script whose content is
        already waiting, held or running in the queue is refused, saying where, unless
        ``again``: ``metaq submit`` refuses it unless told ``--again``; from Python, as
        always, a script is queued as often as it is submitted.

        A plain task is written under a hidden temporary name in its folder and then linked to
        its real name, so no scan ever sees half a file and an existing task is never
        overwritten. Raises :class:`TaskError` or :class:`QueueError`; nothing is written then
        (of a later script's failure to be written, only that script and those after it).
        """
        q = self.queue
        q.require()
        folder = folder or self.default_folder
        if folder not in q.config.folders:
            raise QueueError(f"{folder!r} is not a task folder of this queue; use one of "
                             f"{', '.join(q.config.folders)}")
        plans = [self._plan(Path(s), folder, sub, array, after, header_only, force, max_fails)
                 for s in scripts]
        if not again:
            self._refuse_twins(plans)
        coming = {p.ident: p.indices for p in plans}
        if len(coming) < len(plans):
            raise QueueError("two of the scripts would have the same name in the queue; "
                             "submit them with different --folder")
        resolver = Resolver(q, coming)
        edges: dict[str, list[str]] = {}
        for p in plans:
            names = (*p.spec.after, *p.spec.after_any)
            first = p.indices[0] if p.indices else None
            near = p.ident.rpartition("/")[0]
            deps = [d for n in names for d in resolver.resolve(_for_index(n, first), near=near)]
            edges[p.ident] = [d if d in coming else d.rpartition("/")[0] for d in deps]
        cycle = find_cycle(edges)
        if cycle is not None:
            raise QueueError(f"these tasks would wait for each other for ever: "
                             f"{' -> '.join(cycle)}; drop one AFTER")
        return [self._write(p, resolver, hold) for p in plans]

    def _plan(self, src: Path, folder: str, sub: str | None, array: str | None,
              after: tuple[str, ...], header_only: bool, force: bool,
              max_fails: int | None = None) -> _Plan:
        q = self.queue
        data, head = _read_whole(src)
        original = data
        spec = judge(src, root=q.root, config=q.config, head=head,
                     header_only=header_only).accepted()
        if header_only and spec.line_of("HEADER_ONLY") is None:
            shebang, _, rest = data.partition(b"\n")
            data = b"%s\n#METAQ HEADER_ONLY\n%s" % (shebang, rest)
        if force and not spec.force:
            shebang, _, rest = data.partition(b"\n")
            data = b"%s\n#METAQ FORCE\n%s" % (shebang, rest)
            spec = replace(spec, force=True)
        spec = replace(spec, after=(*spec.after, *after), array=array or spec.array,
                       max_fails=max_fails or spec.max_fails)
        rel = _relpath(sub, src.name)
        too_long = name_problem(src.name, path=q.root / folder / rel)
        if too_long is not None:
            raise TaskError(str(src), None, too_long)
        where = self.locate(folder, rel, states=(PENDING, HOLD, WORKING))
        if where is not None or (q.root / folder / rel).is_dir() or \
                (q.root / HOLD / folder / rel).is_dir():
            what = f" ({where.state}: {where.path})" if where is not None else ""
            raise QueueError(f"a task {folder}/{rel} is already in the queue{what}; use "
                             f"--folder or another name")
        indices = None
        if spec.array is not None:
            try:
                indices = parse_indices(spec.array)
            except ValueError as e:
                raise QueueError(f"--array {e}") from None
        elif any(INDEX in n for n in (*spec.after, *spec.after_any)):
            raise TaskError(str(src), spec.line_of("AFTER"), f"{INDEX} stands for the index "
                            f"of an array task, and this script is not an array")
        elif any(INDEX in n for n in spec.creates):
            raise TaskError(str(src), spec.line_of("CREATES"), f"CREATES uses {INDEX}, which "
                            f"only a task array has; add an ARRAY line or --array")
        elif spec.max_fails is not None:
            raise TaskError(str(src), spec.line_of("MAX_FAILS"), "MAX_FAILS applies only to "
                            "a task array; add an ARRAY line or --array")
        return _Plan(src, data, spec, folder, rel, indices, after, original)

    def _refuse_twins(self, plans: list[_Plan]) -> None:
        """Refuse the submission when a script's content is already waiting, held or
        running in the queue (a generator run twice), saying where: files of another size
        are never read, and an array's script is read once."""
        sizes: dict[int, list[_Plan]] = {}
        for p in plans:
            sizes.setdefault(len(p.original), []).append(p)
        q = self.queue
        paths = [t.path for t in q.scan().tasks] + \
            [path for _f, _r, path in files_in(q, HOLD)] + [c.path for c in q.leases()]
        arrays: dict[Path, bool] = {}
        for path in paths:
            parent = path.parent
            if parent not in arrays:
                arrays[parent] = os.path.lexists(parent / SCRIPT_FILE)
            elif arrays[parent]:
                continue  # an array's script is read once
            if arrays[parent]:
                path = parent / SCRIPT_FILE
            try:
                size = os.lstat(path).st_size
                if size not in sizes:
                    continue
                data = read_regular(path, limit=size + 1)[0]
            except (OSError, Refused):
                continue
            for p in sizes[size]:
                if data == p.original and self._same_work(p, parent, arrays[parent]):
                    shown = parent if arrays[parent] else path
                    raise QueueError(f"{p.src} is already in the queue, with the same content, "
                                     f"at {shown.relative_to(q.root)}; submit it with --again "
                                     f"to queue it once more")

    def _same_work(self, p: _Plan, where: Path, array: bool) -> bool:
        """Whether ``p``, whose script has the same bytes as the task at ``where`` (an
        array's folder when ``array``), would queue the same work again: a standalone task
        and an array's index are different work, and so are new indices of an array
        (a campaign grown by a week of configurations)."""
        if (p.indices is not None) != array:
            return False
        if p.indices is None:
            return True
        from metaq_py.queue.campaign.arrays import read_array  # only an array has indices

        info = read_array(self.queue.root, str(where.relative_to(self.queue.root)))
        return info is None or bool(set(info.indices) & set(p.indices))

    def _write(self, p: _Plan, resolver: Resolver, hold: bool) -> Path:
        q = self.queue
        dst = q.path_of(HOLD if hold else PENDING, p.folder, p.rel)
        make_folders(q.root, dst.parent)  # a link planted at --folder's name is set aside
        mode = (os.stat(p.src).st_mode & 0o755) | 0o700

        near = p.ident.rpartition("/")[0]

        def resolved(names: tuple[str, ...], index: int | None) -> tuple[str, ...]:
            return tuple(d for n in names
                         for d in resolver.resolve(_for_index(n, index), near=near))

        if p.indices is not None:
            assert p.spec.array is not None
            from metaq_py.queue.campaign.arrays import make_array  # only an array needs it
            return make_array(
                p.data, p.spec, dst=dst, array_id=p.ident, indices_text=p.spec.array,
                mode=mode, now=q.clock.now(),
                resolve=lambda i: (resolved(p.spec.after, i), resolved(p.spec.after_any, i)))
        data = p.data
        if p.spec.after or p.spec.after_any:
            data = rewrite_after(data, lambda names: resolved(names, None), p.extra)
        tmp = dst.with_name(f".{dst.name}.{secrets.token_hex(4)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        try:
            write_all(fd, data)
            os.fsync(fd)
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
        try:
            os.link(tmp, dst)
        except FileExistsError:
            raise QueueError(f"a task {p.ident} appeared at {dst} meanwhile; nothing was "
                             f"written") from None
        finally:
            tmp.unlink(missing_ok=True)
        return dst

    @property
    def default_folder(self) -> str:
        """Where ``submit`` puts a task by default: ``todo`` if it is a task folder, else the
        last (least urgent) task folder."""
        folders = self.queue.config.folders
        return "todo" if "todo" in folders else folders[-1]

    # --- moving ----------------------------------------------------------------------------

    def hold(self, ref: str) -> Moved:
        """Park a waiting task in ``hold/``."""
        e = self.find(ref, states=(PENDING,))
        return self._relocate(e, HOLD, HOLD)

    def hold_rest(self, array_id: str, *, max_fails: int) -> int:
        """After ``max_fails`` failed indices of the array ``array_id`` (``MAX_FAILS``), park
        its indices still waiting in ``hold/``, each with one sentence saying why; how many
        were parked (0 while fewer have failed). ``metaq release`` lets them wait again."""
        try:
            failed = len(self.select(f"{array_id}[*]", states=(FAILED,)))
        except QueueError:
            return 0
        if failed < max_fails:
            return 0
        try:
            waiting = self.select(f"{array_id}[*]", states=(PENDING,))
        except QueueError:
            return 0
        why = (f"held: {failed} indices of the array {array_id} failed, which reaches its "
               f"MAX_FAILS {max_fails}; 'metaq release {array_id}' runs the rest")
        held = 0
        for e in waiting:
            with contextlib.suppress(QueueError):
                self._relocate(e, HOLD, HOLD, reason=why)
                held += 1
        return held

    def release(self, ref: str) -> Moved:
        """Let a held task wait in its folder again."""
        e = self.find(ref, states=(HOLD,))
        return self._relocate(e, PENDING, e.folder)

    def cancel(self, ref: str) -> Moved:
        """Cancel a waiting or held task (to ``cancelled/``, with a reason), or ask the job
        running a claimed task to stop it (``Moved.state`` is then ``working``)."""
        e = self.find(ref, states=(PENDING, HOLD, WORKING))
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.queue.clock.now()))
        reason = f"cancelled by {_user()} at {when}"
        if e.state == WORKING:
            # Never through a link planted at the request's name (replaced, not followed).
            replace_file(companion(e.path, CANCEL_SUFFIX), (reason + "\n").encode())
            return Moved(WORKING, e.path)
        return self._relocate(e, CANCELLED, CANCELLED, reason=reason)

    def retry(self, ref: str) -> Moved:
        """Send a failed, rejected or cancelled task back to its folder with its attempt count
        reset; it is checked again first, and stays where it is if still invalid."""
        q = self.queue
        e = self.find(ref, states=(FAILED, REJECTED, CANCELLED))
        # Trust is left to the scan, as for any task put in a folder.
        judge(e.path, root=q.root, config=q.config).accepted()
        now = q.clock.now()
        logbook = logbook_of(e.path, now=now, packed=q.packed)
        logbook = replace(logbook, attempts=0,
                         history=(*logbook.history, history_entry("retried", now=now, by=_user())))
        return self._relocate(e, PENDING, e.folder, logbook=logbook)

    def _relocate(self, e: Entry, state: str, moved_to: str, *, reason: str | None = None,
                  logbook: Logbook | None = None) -> Moved:
        """Move the task of ``e`` to ``state`` (with ``reason`` and ``logbook``, see
        :meth:`~metaq_py.queue.store.Queue.move`); ``moved_to`` names where it went."""
        moved = self.queue.move(e.path, self.queue.path_of(state, e.folder, e.relpath),
                                reason=reason, logbook=logbook)
        if moved is None:
            raise QueueError(f"{e.id} was moved by someone else meanwhile; nothing was done")
        return Moved(moved_to, moved)

    # --- finding and listing ---------------------------------------------------------------

    def locate(self, folder: str, relpath: str, *, states: tuple[str, ...] = STATES
               ) -> Entry | None:
        """Where the task ``folder/relpath`` is now, looking in ``states`` in that order."""
        for state in states:
            if state == WORKING:
                for claim in self.queue.leases():
                    if claim.folder == folder and claim.relpath == relpath:
                        return Entry(WORKING, folder, relpath, claim.path, None,
                                     machine=claim.machine, jobid=claim.jobid)
                continue
            paths = (self.queue.held_paths(folder, relpath) if state == HOLD
                     else [self.queue.path_of(state, folder, relpath)])
            for path in paths:
                if os.path.lexists(path) and not path.is_dir():
                    return Entry(state, folder, relpath, path, None)
        return None

    def array_of(self, ref: str) -> ArrayInfo | None:
        """The array ``ref`` names without its ``[...]``: its identity (``todo/run.sh``) or
        its script's name in a task folder (``run.sh``); ``None`` if it names none."""
        from metaq_py.queue.campaign.arrays import read_array, split_ref  # not for submit
        base = split_ref(ref)[0].strip("/")
        folders = self.queue.config.folders
        names = [base] if base.split("/", 1)[0] in folders else [f"{f}/{base}" for f in folders]
        for name in names:
            info = read_array(self.queue.root, name)
            if info is not None:
                return info
        if base.split("/", 1)[0] in folders or not base or base in (".", ".."):
            return None
        # An array submitted with --folder sits deeper: todo/batch2/prop.sh.
        found = [info for f in folders for ident in arrays_below(self.queue.root, f, base)
                 if (info := read_array(self.queue.root, ident)) is not None]
        if len(found) > 1:
            raise QueueError(f"{len(found)} arrays are called {base!r}: "
                             f"{', '.join(i.id for i in found[:NAMED_SHOWN])}"
                             f"{' and more' if len(found) > NAMED_SHOWN else ''}; name one "
                             f"by its <folder>/<path>, such as {found[0].id}")
        return found[0] if found else None

    def select(self, ref: str, *, states: tuple[str, ...]) -> list[Entry]:
        """The tasks in ``states`` that ``ref`` names: one task (see :meth:`find`), or the
        indices of an array (``run.sh``, ``run.sh[*]``, ``run.sh[17]``, ``run.sh[0-9]``)
        that are in ``states``. Raises :class:`QueueError` when that is none."""
        info = self.array_of(ref)
        if info is None:
            return [self.find(ref, states=states)]
        from metaq_py.queue.campaign.arrays import split_ref  # not for submit
        sel = split_ref(ref)[1]
        indices = info.indices if sel in (None, "*") else parse_indices(sel or "")
        folder, _, rel = info.id.partition("/")
        found = [e for i in indices
                 if (e := self.locate(folder, f"{rel}/{i}", states=states)) is not None]
        if not found:
            wanted = " or ".join(STATE_WORDS[s] for s in states)
            raise QueueError(f"no task of the array {info.id} named by {ref!r} is {wanted}")
        return found

    def find(self, ref: str, *, states: tuple[str, ...] = STATES) -> Entry:
        """The task a person means by ``ref``: its identity ``<folder>/<relpath>`` (such as
        ``todo/sub/run.sh``), a path to its file anywhere in the queue (``working/`` too), one
        index of an array (``run.sh[17]``), or its bare file name (``run.sh``) when exactly
        one task in ``states`` has that name
        (:func:`~metaq_py.queue.finding.tasks_named`)."""
        from metaq_py.queue.campaign.arrays import split_ref  # not for submit
        info = self.array_of(ref)
        sel = split_ref(ref)[1]
        if info is not None and sel is not None and sel.isdigit():
            ref = f"{info.id}/{int(sel)}"
        try:
            folder, rel = self._parse_ref(ref)
        except QueueError:
            if len(Path(ref).parts) != 1 or ref in ("..", "."):
                raise
            return by_name(self.queue, ref, states)
        e = self.locate(folder, rel, states=states)
        if e is None:
            wanted = " or ".join(STATE_WORDS[s] for s in states)
            anywhere = self.locate(folder, rel)
            where = (f"; it is {STATE_WORDS[anywhere.state]}" if anywhere
                     else "; 'metaq ls' lists the tasks")
            raise QueueError(f"no task {folder}/{rel} is {wanted}{where}")
        return e

    def _parse_ref(self, ref: str) -> tuple[str, str]:
        root, folders = self.queue.root, self.queue.config.folders
        parts = Path(ref).parts
        if Path(ref).is_absolute() or os.path.lexists(ref):
            with contextlib.suppress(ValueError):
                parts = Path(os.path.abspath(ref)).relative_to(root.absolute()).parts
        if len(parts) > 1 and parts[0] == HOLD and ".." not in parts:
            parts = tuple("/".join(self.queue.held_identity("/".join(parts[1:]))).split("/"))
        elif parts and parts[0] in DONE_STATES:
            parts = parts[1:]
        elif len(parts) > 3 and parts[0] == WORKING and ".." not in parts:
            # A running task's path says nothing of its folder: its lease does.
            parts = tuple("/".join(self.queue.identity_of(root.joinpath(*parts))).split("/"))
        if len(parts) < 2 or parts[0] not in folders or ".." in parts:
            raise QueueError(f"{ref!r} does not name a task; give <folder>/<path> such as "
                             f"todo/run.sh, with a folder among {', '.join(folders)}")
        return parts[0], "/".join(parts[1:])

    def entries(self, state: str, *, specs: bool = True) -> Iterator[Entry]:
        """The tasks in ``state`` (one of :data:`~metaq_py.queue.store.STATES`). For
        ``pending`` this includes invalid files, with their reason and no spec. Read-only."""
        q = self.queue
        if state == PENDING:
            scan = q.scan()
            for t in scan.tasks:
                yield Entry(PENDING, t.folder, t.relpath, t.path, t.spec, attempts=t.attempts,
                            not_before=t.not_before)
            for bad in scan.invalid:
                yield Entry(PENDING, bad.folder, bad.relpath, bad.path, None, reason=bad.reason)
            return
        if state == WORKING:
            for c in q.leases(specs=specs):
                yield Entry(WORKING, c.folder, c.relpath, c.path, c.spec, machine=c.machine,
                            jobid=c.jobid, attempts=c.attempts)
            return
        if state not in STATES:
            raise QueueError(f"{state!r} is not a state; use one of {', '.join(STATES)}")
        packed = q.packed if state in DONE_STATES else None  # only done tasks' are packed
        for folder, rel, path in files_in(q, state):
            spec = judge(path).spec if specs else None
            reason = None
            if state != HOLD and state != FINISHED:
                reason = read_reason(path)
            logbook = find_logbook(path, inode_of(path), packed)
            yield Entry(state, folder, rel, path, spec, reason=reason,
                        attempts=logbook.attempts if logbook else 0)


def _user() -> str:
    """Who runs this command: the process's uid, never ``$USER`` (anyone may set that)."""
    return user_name(os.getuid())


MAX_FOLDER_NAME = NAME_MAX - len(".planted-000000")
"""The longest sub-folder name (bytes) ``--folder`` takes: room is left for the suffix
:func:`~metaq_py.queue.disk.folders.make_folders` gives a planted file it moves aside."""


def _relpath(sub: str | None, name: str) -> str:
    """The task's path inside its task folder: ``--folder`` ``sub`` and the script's
    ``name``, each part a visible name that the file system can hold, with no control
    characters (a newline in a name breaks every listing of the queue)."""
    parts = [p for p in Path(sub).parts] if sub else []
    if sub and (Path(sub).is_absolute() or any(p in ("..", ".") or p.startswith(".")
                                               for p in parts)):
        raise QueueError(f"--folder {sub!r} must be a relative path inside the task folder, "
                         f"without hidden parts or ..")
    for part in parts:
        if not part.isprintable():
            raise QueueError(f"--folder {sub!r} holds a control character (such as a newline); "
                             f"use printable names")
        if len(os.fsencode(part)) > MAX_FOLDER_NAME:
            raise QueueError(f"--folder: the part {part[:20]!r}... is {len(os.fsencode(part))} "
                             f"bytes long; a folder name may have at most {MAX_FOLDER_NAME}")
    if name.startswith("."):
        raise QueueError(f"{name!r} is a hidden name, which the queue never runs; rename it")
    if not name.isprintable():
        raise QueueError(f"{name!r} holds a control character (such as a newline); rename it")
    return "/".join([*parts, name])


def _read_whole(src: Path) -> tuple[bytes, Head]:
    """The whole script, with the same checks (and messages) as a task in the queue, and its
    header as :func:`~metaq_py.directives.read_head` read it."""
    whole, st = read_script(src)
    return whole, (whole[:HEADER_LIMIT], len(whole) > HEADER_LIMIT, st)
