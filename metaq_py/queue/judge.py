"""Judging a task file: the one place that decides whether a script may run from a queue.

Four questions, always asked in this order, each only if the one before passed:

1. can the file be read (a regular, executable file, not vanished, not a dangling link)?
2. can the queue trust it (see :mod:`metaq_py.queue.settings.trust`)? Asked first of what was read,
   so an untrusted file is never parsed;
3. does its ``#METAQ`` header parse (:func:`~metaq_py.directives.parse_header`)?
4. does the queue admit it (:func:`~metaq_py.queue.settings.admission.admit`: caps, log roots)?

The scan of the task folders, a claim, the rejection of settled invalid files, ``metaq
submit``, ``metaq check`` and ``metaq retry`` all judge through :func:`judge`; what differs
between them is only which questions they ask (a script outside the queue has no trust rule
to meet, and without a queue nothing is admitted).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from metaq_py.directives import HEADER_LIMIT, parse_header, read_head, read_script
from metaq_py.errors import TaskError
from metaq_py.queue.disk.fileio import name_problem
from metaq_py.queue.settings.admission import admit
from metaq_py.queue.settings.config import QueueConfig
from metaq_py.queue.settings.trust import Trust
from metaq_py.task_spec import TaskSpec

__all__ = ["Head", "Verdict", "folders_problem", "judge", "judge_in_queue"]

Head = tuple[bytes, bool, os.stat_result]
"""A task file's header as :func:`~metaq_py.directives.read_head` returns it: the first bytes,
whether the file goes on past them, and the ``stat`` of the opened file."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """What :func:`judge` found. Exactly one of ``spec`` (the task may run) and ``error`` (one
    sentence naming the file and the problem) is set.

    ``opened`` is the ``stat`` of the file as it was read, ``None`` when it could not be read
    at all. ``content`` says whether the problem is in what the file says (its header, or
    what the queue makes of it), which may change while the file is still being written, as
    opposed to the file itself (unreadable, vanished, untrusted).
    """

    spec: TaskSpec | None
    error: TaskError | None
    opened: os.stat_result | None
    content: bool = False
    data: bytes | None = None
    """The whole file as it was read and judged, when asked for (``whole``)."""

    def accepted(self) -> TaskSpec:
        """The spec of a task that may run; raises the :class:`TaskError` of one that may not."""
        if self.error is not None:
            raise self.error
        assert self.spec is not None
        return self.spec


def judge(path: str | os.PathLike[str], *, root: Path | None = None,
          config: QueueConfig | None = None, trust: Trust | None = None,
          folder_problem: str | None = None, head: Head | None = None,
          whole: bool = False, header_only: bool = False) -> Verdict:
    """Judge the task file at ``path`` (see the module's docstring for the questions).

    ``config`` asks for the admission to the queue at ``root`` (both or neither), ``trust``
    for its trust rule. ``folder_problem`` is a trust problem already found with a folder
    above the file: it refuses the file whatever the file itself, once the file has been read.
    ``head`` is the header already read (by a caller that needs the bytes too), to judge
    exactly those bytes. With ``whole``, the whole file is read (at most
    :data:`~metaq_py.directives.SCRIPT_LIMIT` bytes) and kept in the verdict: the bytes a
    runner then runs. ``header_only`` reads the header as if it said ``#METAQ HEADER_ONLY``
    (``metaq submit --header-only``).
    """
    if (root is None) != (config is None):
        raise ValueError("judge: give the queue's root and config together, or neither")
    name = str(path)
    data = None
    if head is None:
        try:
            if whole:
                data, st = read_script(name)
                head = (data[:HEADER_LIMIT], len(data) > HEADER_LIMIT, st)
            else:
                head = read_head(name)
        except TaskError as e:  # TaskVanished among them: callers tell it apart
            return Verdict(None, e, None)
    first, truncated, opened = head
    why = folder_problem
    if why is None and trust is not None:
        why = trust.problem(opened, "the task file")
    if why is not None:
        return Verdict(None, TaskError(name, None, why), opened)
    try:
        spec = parse_header(first, path=name, truncated=truncated, header_only=header_only)
        if root is not None and config is not None:
            admit(spec, root=root, config=config, owner=opened.st_uid)
    except TaskError as e:
        return Verdict(None, e, opened, content=True)
    return Verdict(spec, None, opened, data=data)


def judge_in_queue(path: str | os.PathLike[str], *, root: Path, config: QueueConfig,
                   trust: Trust, whole: bool = False, folders_trusted: bool = False) -> Verdict:
    """Judge the task file at ``path`` as the queue at ``root`` runs it: a name the queue can
    keep, a symlink (if it is one) that is trusted and points to a file, every folder from the
    file up to the root trusted (unless the caller knows them trusted: ``folders_trusted``),
    and then the file itself (:func:`judge`)."""
    name = str(path)
    why = name_problem(os.path.basename(name), path=name)
    if why is None:
        try:
            lst = os.lstat(name)
        except OSError:
            lst = None
        if lst is not None and stat.S_ISLNK(lst.st_mode):
            why = trust.problem(lst, "the symlink")
            if why is None and os.path.isdir(name):
                why = "this is a symlink to a folder, which the queue never follows"
        if why is None and not folders_trusted:
            why = folders_problem(Path(name).parent, root=root, trust=trust)
    if why is not None:
        return Verdict(None, TaskError(name, None, why), None)
    return judge(path, root=root, config=config, trust=trust, whole=whole)


def folders_problem(folder: Path, *, root: Path, trust: Trust) -> str | None:
    """Why a task in ``folder`` cannot be trusted because of a folder between it and the queue
    root (both included), or ``None``."""
    # On strings, not Paths: this runs at every claim, and pathlib's parents and comparisons
    # cost more than the lstat calls. Both paths are normalised Paths, made absolute as
    # Path.absolute() does (the current folder prepended, nothing resolved).
    top = _absolute(str(root))
    here = _absolute(str(folder))
    inside = here.startswith(top.rstrip("/") + "/")
    while True:
        try:
            st = os.lstat(here)
        except OSError:
            return None  # gone: the file's own read says so
        what = "the queue folder" if here == top else f"the folder {here}"
        why = trust.problem(st, what)
        if why is not None or here == top or not inside:
            return why
        here = os.path.dirname(here)


def _absolute(path: str) -> str:
    if path.startswith("/"):
        return path
    return os.getcwd() if path == "." else os.path.join(os.getcwd(), path)
