"""Nodes that shrunk malleable jobs lend to on-demand jobs, until they come home.

An arrival mechanism (:mod:`~metaq_py.policy.arrival`) may shrink a malleable job *for* an
on-demand job. The nodes then pass through three states, each kept by borrower or lender:

- **promised**: shrunk for a borrower that has not started yet (idle, held for its Start);
- **lent** (:attr:`Lending.loans`): held by the running borrower, remembered by lender;
- **owed**: back from the borrower when it ended, idle, waiting for the lender to expand onto
  them (:attr:`Snapshot.owed <metaq_py.policy.model.Snapshot.owed>`).

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
