"""A queue opened from Python, and tasks submitted to it without script files written by hand.

:func:`open_queue` opens a queue as every ``metaq`` command does; :meth:`TaskQueue.submit`
makes one task from keyword arguments named as the directives (``nodes``, ``gpus``,
``min_wc_time``, ...) and a command, a script body or a :class:`~metaq_py.api.kinds.TaskKind`.
The script is written to a private temporary folder and handed to
:meth:`~metaq_py.queue.submit.Submitter.submit` there, the very path ``metaq submit`` takes:
the same judgement (:mod:`metaq_py.queue.judge`), the same admission to the queue, the same
resolution of ``AFTER`` names and the same arrays. So a value ``metaq submit`` refuses in a
file is refused here with the same sentence; only the place differs (the task's name, since
the file was never the person's).
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from metaq_py.api.kinds import TaskKind
from metaq_py.api.script import Directives, Duration, Names, Shape, script_text
from metaq_py.errors import QueueError, TaskError
from metaq_py.hybrid import Kind
from metaq_py.queue.admin import QueueAdmin
from metaq_py.queue.disk.fileio import write_all
from metaq_py.queue.finding import STATE_WORDS
from metaq_py.queue.settings.config import CONFIG_NAME
from metaq_py.queue.store import Queue
from metaq_py.queue.submit import Submitter

__all__ = ["Submitted", "TaskQueue", "open_queue"]


@dataclass(frozen=True, slots=True)
class Submitted:
    """A task just submitted: its identity in the queue (``todo/prop_100.sh``, what other
    tasks name in ``after``) and where its file (or, for an array, its folder) is."""

    id: str
    path: Path


def open_queue(path: str | os.PathLike[str]) -> TaskQueue:
    """The queue at ``path``, as ``metaq --queue PATH`` opens it: a :class:`QueueError` says
    why the folder is not a queue (make one with ``metaq init``)."""
    q = Queue(path)
    q.require()
    # The same rule as the commands': a folder with none of a queue's parts is not one.
    parts = (CONFIG_NAME, *q.config.folders, "hold", "working", "finished")
    if not any(os.path.lexists(q.root / part) for part in parts):
        raise QueueError(f"{q.root} is not a queue (it has no metaq.yaml and no task "
                         f"folders); create one with 'metaq init {q.root}'")
    return TaskQueue(q)


class TaskQueue:
    """A queue to submit tasks to from Python (see :func:`open_queue`)."""

    def __init__(self, queue: Queue) -> None:
        self.queue = queue
        self.admin = QueueAdmin(queue)

    @property
    def root(self) -> Path:
        """The queue's folder."""
        return self.queue.root

    # --- asking about tasks, as metaq show and metaq ls do --------------------------------

    def state(self, task: str) -> str:
        """Where the task ``task`` is, as people say it: ``waiting``, ``held``, ``running``,
        ``finished``, ``failed``, ``rejected`` or ``cancelled``. ``task`` is named as on the
        command line: ``prop_13.sh``, ``todo/prop_13.sh``, ``prop.sh[13]``. A
        :class:`QueueError` says when it names no task, or several."""
        return STATE_WORDS[self.admin.find(task).state]

    def finished(self, task: str) -> bool:
        """Whether the task ``task`` (see :meth:`state`) has finished (exited 0)."""
        return self.state(task) == "finished"

    def tasks(self, state: str) -> list[str]:
        """The identities of the tasks in ``state`` (``failed``, ``waiting``, ... or a
        folder's name such as ``pending``), an index of an array as ``todo/prop.sh/13``: the
        tasks ``metaq ls STATE --json`` lists."""
        folder = {word: name for name, word in STATE_WORDS.items()}.get(state, state)
        if folder not in STATE_WORDS:
            raise QueueError(f"{state!r} is not a state; use one of "
                             f"{', '.join(STATE_WORDS.values())}")
        return [e.id for e in self.admin.entries(folder, specs=False)]

    def submit(  # one keyword per directive and per placement flag of metaq submit
        self, name: str, *,
        command: str | Sequence[str] | None = None,
        script: str | None = None,
        kind: TaskKind | None = None,
        shell: str | None = None,
        nodes: int | None = None,
        gpus: int | None = None,
        cpus: int | None = None,
        exclusive: bool = False,
        min_wc_time: Duration | None = None,
        project: str | None = None,
        log: str | None = None,
        machine: str | None = None,
        type: Kind | str | None = None,  # the directive TYPE (shadows the builtin here)
        min_nodes: int | None = None,
        priority: int | None = None,
        setup: Duration | None = None,
        checkpoint: tuple[Duration, Duration] | str | None = None,
        signal: str | None = None,
        notice: str | None = None,
        retries: int | None = None,
        resize: str | None = None,
        array: str | None = None,
        after: Names | None = None,
        after_any: Names | None = None,
        shapes: Sequence[Shape] | None = None,
        header_only: bool = False,
        folder: str | None = None,
        hold: bool = False,
        priority_folder: bool = False,
    ) -> Submitted:
        """Submit one task named ``name`` (its file name in the queue, such as ``prop.sh``).

        What it runs is exactly one of: ``command`` (one shell line, or a command as its
        words), ``script`` (the body of a script, after its header) or ``kind`` (a
        :class:`TaskKind` instance: its steps, and its directives as defaults for the keywords
        here). ``shell`` is the script's interpreter (``/bin/bash``, or the kind's).

        The directive keywords mean what their ``#METAQ`` keys mean (``docs/user-guide.md``);
        durations are seconds or text such as ``"2h"``; ``after`` and ``after_any`` take a
        name or a list of names; ``shapes`` lists the other shapes the task accepts
        (:class:`Shape`, one ``SHAPE`` line each); ``header_only`` lets the body hold
        ``#METAQ`` lines of its own (``HEADER_ONLY``). ``folder``, ``hold`` and
        ``priority_folder`` are ``metaq submit``'s ``--folder`` (a sub-folder inside the task
        folder), ``--hold`` and
        ``--priority``. Raises :class:`TaskError` or :class:`QueueError` with the sentence
        ``metaq submit`` would print; nothing is submitted then.
        """
        asked = Directives(
            nodes=nodes, gpus=gpus, min_wc_time=min_wc_time, project=project, log=log,
            machine=machine, type=type, min_nodes=min_nodes, priority=priority, setup=setup,
            checkpoint=checkpoint, signal=signal, notice=notice, retries=retries,
            resize=resize, cpus=cpus, exclusive=exclusive, array=array, after=after,
            after_any=after_any, shapes=shapes, header_only=header_only)
        if sum(x is not None for x in (command, script, kind)) != 1:
            raise TaskError(name, None, "give exactly one of command, script and kind: what "
                                        "the task runs")
        if kind is not None:
            directives = kind.directives().merged(asked)
            body, made_by = kind.body(), kind.describe()
            shell = shell or kind.shell
        else:
            directives, made_by = asked, "metaq_py's TaskQueue.submit"
            if command is not None:
                body = [command if isinstance(command, str) else shlex.join(command)]
            else:
                assert script is not None
                body = script.splitlines()
        text = script_text(directives, body, name=name, shell=shell or "/bin/bash",
                           made_by=made_by)
        target = "priority" if priority_folder else None
        if target is not None and target not in self.queue.config.folders:
            raise QueueError(f"this queue has no priority folder; its task folders are "
                             f"{', '.join(self.queue.config.folders)}")
        return self._submit_text(name, text, folder=target, sub=folder, hold=hold)

    def _submit_text(self, name: str, text: str, *, folder: str | None, sub: str | None,
                     hold: bool) -> Submitted:
        """Write ``text`` as the script ``name`` in a private folder and submit it there."""
        if not name or "/" in name or name in (".", ".."):
            raise QueueError(f"the task name {name!r} must be a file name without '/'; give "
                             f"sub-folders with folder=")
        staging = Path(tempfile.mkdtemp(prefix="metaq-api-"))
        try:
            src = staging / name
            fd = os.open(src, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o755)
            try:
                write_all(fd, text.encode())
            finally:
                os.close(fd)
            try:
                dst = Submitter(self.queue).submit(src, folder=folder, sub=sub, hold=hold)
            except TaskError as e:
                # The file was never the person's: name the task, not the staging path.
                raise TaskError(name, None, e.message) from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        rel = dst.relative_to(self.queue.root)
        ident = "/".join(rel.parts[1:] if rel.parts[0] == "hold" else rel.parts)
        return Submitted(ident, dst)
