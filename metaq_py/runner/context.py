"""What every part of one runner shares: its queue, its allocation, its clock, its voice."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from metaq_py.batch import Allocation, BatchSystem
from metaq_py.clock import Clock
from metaq_py.queue.store import Queue
from metaq_py.runner.events import EventWriter
from metaq_py.runner.options import RunOptions

__all__ = ["Context"]


@dataclass(slots=True, eq=False)
class Context:
    """The surroundings of one :class:`~metaq_py.runner.loop.Runner`, handed to each of its
    parts. ``alloc`` is what the batch system said at start-up; ``end`` is when the allocation
    ends (``math.inf`` without a limit), the one field that changes: it is asked again at each
    heartbeat, since an operator may move the limit. ``host`` is the batch node's name,
    ``say`` tells a person what happens (on standard error), and ``named`` gives a task's
    identity as people write it there (``todo/prop.sh[13]`` for an index of an array,
    :class:`~metaq_py.queue.disk.folders.PeopleIds`)."""

    queue: Queue
    batch: BatchSystem
    alloc: Allocation
    options: RunOptions
    clock: Clock
    events: EventWriter
    say: Callable[[str], None]
    host: str
    end: float
    named: Callable[[str], str]

    @property
    def jobid(self) -> str:
        return self.alloc.jobid

    @property
    def machine(self) -> str:
        return self.alloc.machine

    @property
    def job_dir(self) -> Path:
        """This batch job's folder in the queue (``jobs/<jobid>``)."""
        return self.queue.job_dir(self.alloc.jobid)

    def hosts(self, node_ids: tuple[int, ...]) -> tuple[str, ...]:
        """The host names of Cluster node ids (node ``i`` is the allocation's ``i``-th host)."""
        nodes = self.alloc.nodes
        return tuple(nodes[i] for i in node_ids)
