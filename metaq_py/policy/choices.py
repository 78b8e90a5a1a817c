"""The words a scheduler is built with: the on-demand strategies of Fan et al. (IPDPS 2022)
and the options of their stages, as plain enums.

:mod:`~metaq_py.policy.mechanisms` names and builds every scheduler from these alone; the
stages that act on them (:mod:`~metaq_py.policy.notice` before an arrival,
:mod:`~metaq_py.policy.arrival` at it, :mod:`~metaq_py.policy.completion` after it) are loaded
by the first decision of an on-demand mechanism that has something for them (a notice, an
arrived on-demand job, nodes owed or returned), so that ``metaq run`` with ``easy`` or
``conservative`` never loads them.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["ArrivalStrategy", "Borrowers", "Completion", "CupTiming", "NoticeStrategy",
           "OtherReservations", "PreemptWhen", "VictimOrder"]


# --- before an arrival (policy/notice.py) ----------------------------------------------------


class NoticeStrategy(str, Enum):
    """What a scheduler does with an advance notice before its job arrives."""

    N = "N"
    CUA = "CUA"
    CUP = "CUP"

    def __str__(self) -> str:
        return self.value


class CupTiming(str, Enum):
    """When CUP preempts the jobs it picked for a notice."""

    PLANNED = "planned"
    """A rigid job after its last checkpoint before the estimated arrival (now when none), a
    malleable job ``warning`` before it (the default)."""
    AT_ARRIVAL = "at-arrival"
    """Every job at the estimated arrival."""

    def __str__(self) -> str:
        return self.value


# --- at an arrival (policy/arrival.py) ------------------------------------------------------


class ArrivalStrategy(str, Enum):
    """How a scheduler frees nodes for an on-demand job that has arrived."""

    PAA = "PAA"
    SPAA = "SPAA"
    SPAA_PLUS = "SPAA+"

    def __str__(self) -> str:
        return self.value


class VictimOrder(str, Enum):
    """What "ascending preemption overhead" counts when PAA picks its victims."""

    NODE_SECONDS = "node-seconds"
    """Work lost times the nodes the job holds: the machine time wasted (the default)."""
    SECONDS = "seconds"
    """The seconds of its own work the job loses, whatever its size."""

    def __str__(self) -> str:
        return self.value


class Borrowers(str, Enum):
    """Which jobs borrowing an arriving on-demand job's own reservation are preempted."""

    AS_NEEDED = "as-needed"
    """Cheapest first, only as many as the job needs after idle and free nodes (the default):
    stopping the others would lose their work for nothing."""
    ALL = "all"
    """Every one, as the paper says, whatever the job needs."""

    def __str__(self) -> str:
        return self.value


class OtherReservations(str, Enum):
    """Whether an arriving on-demand job takes idle nodes reserved for other notices."""

    TAKEN = "taken"
    """Yes, after the free nodes and before preempting anything (the default)."""
    SPARED = "spared"
    """No: they stay with their notices, and the job preempts instead."""

    def __str__(self) -> str:
        return self.value


class PreemptWhen(str, Enum):
    """Whether victims are preempted for an on-demand job that even every candidate could not
    cover (an arrived job, or a CUP notice)."""

    IT_STARTS = "it-starts"
    """Only when the nodes so freed let the job start (cover the notice): all or nothing (the
    default), since preemption in vain is pure loss."""
    ALWAYS = "always"
    """Every candidate anyway, and the job waits for the rest."""

    def __str__(self) -> str:
        return self.value


# --- after an arrival (policy/completion.py) -------------------------------------------------


class Completion(str, Enum):
    """What becomes of the nodes of an on-demand job that ends."""

    RETURN = "return"
    """Its victims that still wait resume on them first, if they can (R12, the default)."""
    POOL = "pool"
    """They go to the common pool; victims wait for their turn."""

    def __str__(self) -> str:
        return self.value
