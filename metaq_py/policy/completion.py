"""What happens when an on-demand job ends (Fan et al., IPDPS 2022, Sec. III-B.4; R12 of
``paper-rules.md``).

A job it preempted that still waits gets the nodes it gave back and resumes at once if it
can; a job it shrank that still runs is expanded to its original size; the rest of the nodes
go back to the common pool.

The expansion is the lenders' debt (:attr:`Snapshot.owed
<metaq_py.policy.snapshot.Snapshot.owed>`, paid in the on-demand mechanisms' stage 2). The
victims are :attr:`Snapshot.returned <metaq_py.policy.snapshot.Snapshot.returned>`: the
:class:`~metaq_py.cluster.Cluster` remembers, for each on-demand job, the jobs preempted for
it, and when it ends, gives each victim that does not run the nodes it held that are free
again. :func:`give_back` then starts each such victim, in the order they were preempted,
before anything else takes a free node, on free nodes up to its size (a malleable victim at
the largest size it can), provided it ends by the allocation's end. Nodes are alike, so it
takes the pool's next ones rather than its very own (a decision's pool hands out nodes in
order, :class:`~metaq_py.policy.pool.NodePool`); it gets at least as many as it gave, since
they are free. A victim that cannot start now (too few nodes are free) simply waits in the
queue, and its claim lapses with the decision.

:attr:`~metaq_py.policy.choices.Completion.POOL` is the behaviour before this rule: the nodes
of every job that ends go to the common pool, and victims wait for their turn in the queue
order.
"""

from __future__ import annotations

from collections.abc import Sequence

from metaq_py.policy.model import Job
from metaq_py.policy.work import Work

__all__ = ["give_back"]


def give_back(work: Work, queue: Sequence[Job]) -> None:
    """Start the victims of ended on-demand jobs that wait in ``queue`` and can start now
    (see the module docstring)."""
    returned = work.snap.returned
    if not returned:
        return
    waiting = {job.id: job for job in queue if job.id in returned}
    pool = work.free
    for victim in returned:
        job = waiting.get(victim)
        if job is None or job.id in work.started or job.cores:
            continue
        k = min(job.size, pool.count)
        if k < job.min_size or work.now + job.time_at(k, work.oracle) > work.end:
            continue
        work.start(job, pool.take(k))
