"""Nodes that batch jobs give on-demand jobs, until they come home (the paper's completion
rule, R12 of ``paper-rules.md``).

An arrival mechanism (:mod:`~metaq_py.policy.arrival`) may shrink a malleable job *for* an
on-demand job. The nodes then pass through three states, each kept by borrower or lender:

- **promised**: shrunk for a borrower that has not started yet (idle, held for its Start);
- **lent** (:attr:`Lending.loans`): held by the running borrower, remembered by lender;
- **owed**: back from the borrower when it ended, idle, waiting for the lender to expand onto
  them (:attr:`Snapshot.owed <metaq_py.policy.snapshot.Snapshot.owed>`).

It may also preempt a job *for* an on-demand job (:attr:`Lending.victims`). When that job
ends, each of its victims that still waits has the nodes it gave come back (**returned**,
:attr:`Snapshot.returned <metaq_py.policy.snapshot.Snapshot.returned>`): they are free, and the
next decision resumes the victim on them first if it can. The claim lapses as soon as any
other job starts or a notice reserves nodes, so it lasts one decision.

A :class:`~metaq_py.cluster.Cluster` checks every move before it makes it here; this class
only keeps the books.
"""

from __future__ import annotations

from collections.abc import Mapping, Set

from metaq_py.policy.model import JobId, NodeId, Nodes, Running


class Lending:
    """The promised, lent and owed nodes of one cluster (see the module docstring)."""

    def __init__(self) -> None:
        self.promised: dict[JobId, dict[JobId, Nodes]] = {}
        """For each borrower not yet started, the nodes shrunk for it, by lender."""
        self.loans: dict[JobId, dict[JobId, Nodes]] = {}
        """For each running borrower, the nodes it holds on loan, by lender."""
        self.owed: dict[JobId, Nodes] = {}
        """For each running lender, the idle nodes back from its borrowers."""
        self.victims: dict[JobId, dict[JobId, Nodes]] = {}
        """For each on-demand job, the jobs preempted for it and the nodes each then held."""
        self.returned: dict[JobId, Nodes] = {}
        """For each victim of an on-demand job that ended, the free nodes it gave back."""

    def preempted_for(self, borrower: JobId, victim: JobId, nodes: Nodes) -> None:
        """``victim``, holding ``nodes``, was preempted for on-demand job ``borrower``."""
        self.victims.setdefault(borrower, {})[victim] = nodes

    def give_back(self, borrower: JobId, freed: Set[NodeId],
                  running: Mapping[JobId, Running]) -> None:
        """``borrower`` ended and ``freed`` became free: each of its victims that does not run
        again has the freed nodes it once held come back to it."""
        for victim, nodes in self.victims.pop(borrower, {}).items():
            back = tuple(n for n in nodes if n in freed)
            if back and victim not in running:
                self.returned[victim] = back

    def resumed(self, job: JobId, nodes: Nodes) -> None:
        """``job`` started on ``nodes``: its claim is met, and the other victims keep only the
        nodes of theirs it did not take; if it was no victim, every claim lapses (the nodes
        went to the common pool)."""
        if self.returned.pop(job, None) is None:
            self.returned.clear()
            return
        taken = set(nodes)
        for victim, back in list(self.returned.items()):
            kept = tuple(n for n in back if n not in taken)
            if not kept:
                del self.returned[victim]
            elif len(kept) < len(back):
                self.returned[victim] = kept

    def promise(self, borrower: JobId, lender: JobId, nodes: Nodes) -> None:
        """``lender`` shrank by ``nodes`` (ascending) for ``borrower``."""
        by_lender = self.promised.setdefault(borrower, {})
        by_lender[lender] = by_lender.get(lender, ()) + nodes

    def redeem(self, borrower: JobId) -> None:
        """``borrower`` started on the nodes promised to it: they are now on loan."""
        promised = self.promised.pop(borrower, None)
        if promised:
            self.loans[borrower] = dict(promised)

    def paid(self, lender: JobId, nodes: Set[NodeId]) -> None:
        """``lender`` expanded onto ``nodes``, which include whatever it was owed of them."""
        left = set(self.owed.get(lender, ())) - nodes
        if left:
            self.owed[lender] = tuple(sorted(left))
        else:
            self.owed.pop(lender, None)

    def lender_gone(self, lender: JobId) -> Nodes | None:
        """``lender`` stopped running: its claims on loans die, and the nodes it was owed
        (returned, to become free) are no longer owed."""
        for loans in self.loans.values():
            loans.pop(lender, None)
        return self.owed.pop(lender, None)

    def settle(self, borrower: JobId, nodes: Nodes,
               running: Mapping[JobId, Running]) -> set[NodeId] | None:
        """``borrower`` ended holding ``nodes``: what it borrowed from a lender that still runs
        becomes owed to that lender (up to the lender's maximum, whatever happened since), and
        the rest is returned, to become free. ``None`` when it held no loan."""
        loans = self.loans.pop(borrower, None)
        if not loans:
            return None
        held = set(nodes)
        freed: set[NodeId] = set()
        for lender, lent in loans.items():
            back = held.intersection(lent)
            held -= back
            lr = running.get(lender)
            if lr is not None and back:
                room = lr.job.size - len(lr.nodes) - len(self.owed.get(lender, ()))
                give = tuple(sorted(back))[:max(0, room)]
                if give:
                    self.owed[lender] = self.owed.get(lender, ()) + give
                freed |= back.difference(give)
            else:
                freed |= back
        return freed | held
