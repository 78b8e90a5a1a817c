"""Everything a decision may look at: :class:`Snapshot`, the world at one instant.

Its parts are :mod:`metaq_py.policy.model`'s values (waiting and running jobs, notices) and
two indexes a driver may keep: the shared nodes (:mod:`metaq_py.policy.shares`) and the
waitlist (:mod:`metaq_py.policy.waitlist`). It sits above all three, so that none of them
imports it back.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field

from metaq_py.hybrid import Notice
from metaq_py.policy.model import Ending, Job, JobId, NodeId, Nodes, Running
from metaq_py.policy.shares import SharedNodes
from metaq_py.policy.waitlist import Waitlist

__all__ = ["Snapshot"]


@dataclass(frozen=True)
class Snapshot:
    """Everything a decision may look at.

    Drivers may pass their live containers here instead of copies, to keep a decision cheap;
    in exchange a decision must never mutate them (it works on copies, as Flux's backfill
    works on a copy of the resource pool), and drivers must not change them during one.

    ``free`` holds idle nodes not reserved for any notice. ``reserved`` maps a notice id to the
    *idle* nodes held for it; ``borrowers`` maps a notice id to the running jobs backfilled onto
    its reserved nodes (their nodes go back to the reservation when they end). ``owed`` maps a
    shrunk malleable job to nodes that came back from the on-demand job it lent them to; they
    are not in ``free`` and go back to the lender first. ``end`` is the end of the allocation:
    inside a batch job the wall clock is a resource too.

    ``waiting`` is the waiting work; when ``ordered`` is true the driver promises it is already
    in queue order (:mod:`metaq_py.policy.order`), which spares a sort per decision; otherwise
    the decision sorts it by :func:`~metaq_py.policy.order.queue_key`.
    ``ondemand_waiting``, when the driver keeps count, is how many of ``waiting`` are on-demand
    jobs (``None``: the decision looks); a count of 0 spares the on-demand mechanisms a pass
    over the queue per decision.
    ``ending`` and ``ending_true`` list the running jobs sorted by ``end`` and by ``true_end``
    (``end`` where unknown) as :data:`Ending` tuples; a :class:`~metaq_py.cluster.Cluster`
    keeps them sorted incrementally. When they are ``None`` a decision sorts ``running`` itself.
    Shares of a node (:mod:`metaq_py.policy.shares`) are in ``running`` but in neither
    ``ending`` list, since a share alone frees no node.
    ``shares`` holds the shared nodes (out of ``free``) with their free cores and GPUs, on a
    cluster whose node shape is known; ``None`` on one that runs whole-node jobs only.
    ``waitlist``, when the driver keeps one (:mod:`metaq_py.policy.waitlist`), indexes
    ``waiting`` by size and estimate, so that EASY's backfilling skips the jobs that cannot
    start without walking past them; the decision is the same with it or without it.
    ``shaped`` says whether some waiting job has other shapes (:attr:`Job.shapes`); ``None``:
    the decision looks. A driver whose jobs never have any (the simulator) says ``False``.
    ``returned`` maps a job preempted for an on-demand job that has just ended to the nodes
    it gave, free again (in ``free``): the paper's completion rule (R12) resumes it on them
    first if it still waits and can (:func:`~metaq_py.policy.notice.give_back`).
    """

    now: float
    total: int
    free: Set[NodeId]
    running: Mapping[JobId, Running]
    waiting: Sequence[Job]
    reserved: Mapping[str, Set[NodeId]] = field(default_factory=dict)
    notices: Mapping[str, Notice] = field(default_factory=dict)
    owed: Mapping[JobId, Nodes] = field(default_factory=dict)
    end: float = math.inf
    borrowers: Mapping[str, Set[JobId]] = field(default_factory=dict)
    ordered: bool = False
    ending: Sequence[Ending] | None = None
    ending_true: Sequence[Ending] | None = None
    ondemand_waiting: int | None = None
    shares: SharedNodes | None = None
    waitlist: Waitlist | None = None
    shaped: bool | None = None
    returned: Mapping[JobId, Nodes] = field(default_factory=dict)

    def __init__(self, now: float, total: int, free: Set[NodeId], running: Mapping[JobId, Running],
                 waiting: Sequence[Job], reserved: Mapping[str, Set[NodeId]] | None = None,
                 notices: Mapping[str, Notice] | None = None,
                 owed: Mapping[JobId, Nodes] | None = None, end: float = math.inf,
                 borrowers: Mapping[str, Set[JobId]] | None = None, ordered: bool = False,
                 ending: Sequence[Ending] | None = None,
                 ending_true: Sequence[Ending] | None = None,
                 ondemand_waiting: int | None = None,
                 shares: SharedNodes | None = None, waitlist: Waitlist | None = None,
                 shaped: bool | None = None,
                 returned: Mapping[JobId, Nodes] | None = None) -> None:
        # written out (see "Hot values" below); a mapping left out is a new empty one
        object.__setattr__(self, "now", now)
        object.__setattr__(self, "total", total)
        object.__setattr__(self, "free", free)
        object.__setattr__(self, "running", running)
        object.__setattr__(self, "waiting", waiting)
        object.__setattr__(self, "reserved", {} if reserved is None else reserved)
        object.__setattr__(self, "notices", {} if notices is None else notices)
        object.__setattr__(self, "owed", {} if owed is None else owed)
        object.__setattr__(self, "end", end)
        object.__setattr__(self, "borrowers", {} if borrowers is None else borrowers)
        object.__setattr__(self, "ordered", ordered)
        object.__setattr__(self, "ending", ending)
        object.__setattr__(self, "ending_true", ending_true)
        object.__setattr__(self, "ondemand_waiting", ondemand_waiting)
        object.__setattr__(self, "shares", shares)
        object.__setattr__(self, "waitlist", waitlist)
        object.__setattr__(self, "shaped", shaped)
        object.__setattr__(self, "returned", {} if returned is None else returned)
