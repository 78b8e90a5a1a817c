"""One task's output, as ``metaq log`` prints it: from its batch jobs' stream files
(:mod:`metaq_py.queue.streams`), or from its log files where the queue writes one per task.

The jobs a task ran in are named by its logbook (every state change names its job; a done
task's is packed, :mod:`metaq_py.queue.logbook`) and, while it runs, by the folder of its
claim. Only those jobs' stream files are read, so a task's output is found without reading
the whole campaign's.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from metaq_py.errors import QueueError
from metaq_py.queue.disk.fileio import Refused
from metaq_py.queue.disk.folders import relative_parts
from metaq_py.queue.finding import Entry
from metaq_py.queue.layout import DONE_STATES, WORKING
from metaq_py.queue.logbook import find_logbook
from metaq_py.queue.store import Queue
from metaq_py.queue.streams import STDERR, Frame, Torn, read_frames, stream_files

__all__ = ["OutputReader", "jobs_of"]


def jobs_of(q: Queue, e: Entry) -> list[str]:
    """The batch jobs ``e``'s task ran in, in the order it ran there."""
    jobs: list[str] = []
    try:
        inode = os.lstat(e.path).st_ino
    except OSError:
        inode = -1
    book = find_logbook(e.path, inode, q.packed if e.state in DONE_STATES else None)
    for h in book.history if book is not None else ():
        job = h.get("job")
        if isinstance(job, str) and job not in jobs:
            jobs.append(job)
    parts = relative_parts(e.path, q.root)
    if parts[0] == WORKING and len(parts) > 3 and parts[2] not in jobs:
        jobs.append(parts[2])
    return jobs


@dataclass
class OutputReader:
    """Reads one task's frames from its jobs' stream files, remembering where each file was
    left, so that ``--follow`` reads only what is new. What is torn, and files that are not
    stream files (a FIFO, a link planted there), are noted in ``problems``, one sentence
    each, and skipped."""

    q: Queue
    task: str
    jobs: list[str]
    stderr_only: bool = False
    offsets: dict[Path, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def frames(self) -> Iterator[Frame]:
        """The task's frames not read before, in the order written, per job."""
        for job in self.jobs:
            try:
                folder = self.q.job_dir(job)
            except QueueError:  # a logbook naming no job this queue could have had
                continue
            for path in stream_files(folder):
                yield from self._file(path)

    def _file(self, path: Path) -> Iterator[Frame]:
        start = self.offsets.get(path, 0)
        if start < 0:
            return  # refused before
        try:
            for item in read_frames(path, task=self.task, start=start):
                if isinstance(item, Torn):
                    self.problems.append(item.sentence())
                    self.offsets[path] = item.offset + item.size
                    continue
                self.offsets[path] = item.end
                if not self.stderr_only or item.stream == STDERR:
                    yield item
        except Refused as e:
            self.problems.append(f"{e}; skipped")
            self.offsets[path] = -1
