"""``metaq submit``: scripts checked and copied into the queue, all or nothing.

A submission is one plan made whole before anything is written: each script judged as the
queue will judge it, its ``AFTER`` names resolved against the queue and the scripts submitted
along (:mod:`metaq_py.queue.campaign.deps`), cycles and twins refused, and then each written
under a hidden name and linked to its real one (an array as a folder of index files,
:mod:`metaq_py.queue.campaign.arrays`). :class:`Submitter` needs only the queue's
:class:`~metaq_py.queue.layout.Layout`: submit moves no task, so the runner's moves
(:mod:`metaq_py.queue.claiming`, :mod:`metaq_py.queue.store`) are never loaded for it.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from metaq_py.directive_keys import INDEX, parse_array
from metaq_py.directives import HEADER_LIMIT, read_script
from metaq_py.errors import QueueError, TaskError
from metaq_py.queue.campaign.deps import Resolver, find_cycle, rewrite_after
from metaq_py.queue.disk.fileio import NAME_MAX, Refused, name_problem, read_regular, write_all
from metaq_py.queue.disk.folders import SCRIPT_FILE, is_array, make_folders
from metaq_py.queue.finding import files_in, locate
from metaq_py.queue.index import Index
from metaq_py.queue.judge import Head, judge
from metaq_py.queue.layout import HOLD, PENDING, WORKING, Layout
from metaq_py.task_spec import TaskSpec

__all__ = ["MAX_FOLDER_NAME", "Submitter"]


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
    """The script's bytes as submitted, which :meth:`Submitter._refuse_twins` compares."""
    grows: bool = False
    """Whether it adds indices to an array already in the queue."""

    @property
    def ident(self) -> str:
        return f"{self.folder}/{self.rel}"


def _for_index(name: str, index: int | None) -> str:
    return name if index is None else name.replace(INDEX, str(index))


class Submitter:
    """``metaq submit`` on ``queue``. Cheap to create; it keeps nothing of its own."""

    def __init__(self, queue: Layout) -> None:
        self.queue = queue

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
        folder = folder or q.config.default_folder
        if folder not in q.config.folders:
            raise QueueError(f"{folder!r} is not a task folder of this queue; use one of "
                             f"{', '.join(q.config.folders)}")
        plans = [self._plan(Path(s), folder, sub, array, after, header_only, force, max_fails,
                            again) for s in scripts]
        grown = next((p for p in plans if p.grows), None)
        if hold and grown is not None:
            raise QueueError(f"--hold cannot add indices to the array {grown.ident}; submit "
                             f"them, then hold them: metaq hold '{grown.rel}[{grown.spec.array}]'")
        if not again:
            self._refuse_twins(plans)
        coming = {p.ident: self._indices_after(p) for p in plans}
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
        return [self._write(p, resolver, hold, again) for p in plans]

    def _plan(self, src: Path, folder: str, sub: str | None, array: str | None,
              after: tuple[str, ...], header_only: bool, force: bool,
              max_fails: int | None = None, again: bool = True) -> _Plan:
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
        indices = None
        if spec.array is not None:
            try:
                indices = parse_array(spec.array)[0]
            except ValueError as e:
                raise QueueError(f"--array {e}") from None
        grows = indices is not None and self._grows(src, data, f"{folder}/{rel}", indices,
                                                    again)
        where = None if grows else locate(q, folder, rel, states=(PENDING, HOLD, WORKING))
        if not grows and (where is not None or (q.root / folder / rel).is_dir() or
                          (q.root / HOLD / folder / rel).is_dir() or
                          is_array(q.root, f"{folder}/{rel}")):
            what = f" ({where.state}: {where.path})" if where is not None else ""
            raise QueueError(f"a task {folder}/{rel} is already in the queue{what}; use "
                             f"--folder or another name")
        if indices is None:
            _refuse_array_words(src, spec)
        return _Plan(src, data, spec, folder, rel, indices, after, original, grows)

    def _grows(self, src: Path, data: bytes, ident: str, indices: tuple[int, ...],
               again: bool) -> bool:
        """Whether ``indices`` of the script ``data`` add to an array ``ident`` already in
        the queue (:mod:`metaq_py.queue.campaign.extend`); its refusal is raised here."""
        if not is_array(self.queue.root, ident):
            return False
        from metaq_py.queue.campaign.arrays import read_array  # only a growing array
        from metaq_py.queue.campaign.extend import extension_problem

        info = read_array(self.queue.root, ident)
        why = "its .array cannot be read" if info is None else \
            extension_problem(self.queue, info, data, src.name, indices, again=again)
        if why is not None:
            raise QueueError(why if info is not None else
                             f"{ident} is an array in the queue, but {why}; use --folder or "
                             f"another name")
        return True

    def _indices_after(self, p: _Plan) -> tuple[int, ...] | None:
        """The indices ``p``'s identity will have once submitted: an array it grows keeps
        its own."""
        if not p.grows or p.indices is None:
            return p.indices
        from metaq_py.queue.campaign.arrays import read_array  # only a growing array

        info = read_array(self.queue.root, p.ident)
        old = info.indices if info is not None else ()
        return (*old, *(i for i in p.indices if i not in set(old)))

    def _refuse_twins(self, plans: list[_Plan]) -> None:
        """Refuse the submission when a script's content is already waiting, held or
        running in the queue (a generator run twice), saying where: files of another size
        are never read, and an array's script is read once."""
        sizes: dict[int, list[_Plan]] = {}
        for p in plans:
            sizes.setdefault(len(p.original), []).append(p)
        q = self.queue
        paths = [t.path for t in Index(q.root, q.config, clock=q.clock).scan().tasks] + \
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

    def _write(self, p: _Plan, resolver: Resolver, hold: bool, again: bool) -> Path:
        q = self.queue
        dst = q.path_of(HOLD if hold else PENDING, p.folder, p.rel)
        make_folders(q.root, dst.parent)  # a link planted at --folder's name is set aside
        mode = (os.stat(p.src).st_mode & 0o755) | 0o700

        near = p.ident.rpartition("/")[0]

        def resolved(names: tuple[str, ...], index: int | None) -> tuple[str, ...]:
            return tuple(d for n in names
                         for d in resolver.resolve(_for_index(n, index), near=near))

        if p.grows:
            assert p.indices is not None
            from metaq_py.queue.campaign.extend import extend_array  # only a growing array
            return extend_array(
                q, p.data, p.spec, array_id=p.ident, indices=p.indices, mode=mode,
                now=q.clock.now(), again=again,
                resolve=lambda i: (resolved(p.spec.after, i), resolved(p.spec.after_any, i)))
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


def _refuse_array_words(src: Path, spec: TaskSpec) -> None:
    """Refuse a script that is no array but uses what only an array has."""
    if any(INDEX in n for n in (*spec.after, *spec.after_any)):
        raise TaskError(str(src), spec.line_of("AFTER"), f"{INDEX} stands for the index "
                        f"of an array task, and this script is not an array")
    elif any(INDEX in n for n in spec.creates):
        raise TaskError(str(src), spec.line_of("CREATES"), f"CREATES uses {INDEX}, which "
                        f"only a task array has; add an ARRAY line or --array")
    elif spec.max_fails is not None:
        raise TaskError(str(src), spec.line_of("MAX_FAILS"), "MAX_FAILS applies only to "
                        "a task array; add an ARRAY line or --array")


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
