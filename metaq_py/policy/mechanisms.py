"""Schedulers by name: a backfilling policy, optionally with an on-demand mechanism on top.

=================  ==========================================================================
name               what it is
=================  ==========================================================================
``easy``           FCFS with EASY backfilling; every job, on-demand or not, just queues.
``conservative``   FCFS with conservative backfilling; likewise.
``N&PAA`` ...      ``<notice>&<arrival>``: notice strategy N, CUA or CUP
                   (:mod:`~metaq_py.policy.notice`) with arrival strategy PAA, SPAA or SPAA+
                   (:mod:`~metaq_py.policy.arrival`), over EASY (or conservative) backfilling.
                   ``SPAA+`` (shrink, then preempt) is our extension, not the paper's.
=================  ==========================================================================

One decision of an on-demand scheduler runs these stages on one
:class:`~metaq_py.policy.work.Work`, each seeing what the earlier ones did:

1. release reservations whose job is ``release_after`` late;
2. resume the victims of on-demand jobs that ended on the nodes they gave back, if they can
   (:mod:`~metaq_py.policy.completion`, R12), and give lenders the nodes they are owed
   (``Expand``);
3. start waiting on-demand jobs, in queue order, by the arrival strategy;
4. reserve free nodes for notices, earliest issued first (CUA, CUP), and preempt for CUP;
5. backfill the queue (on-demand jobs that could not start at its head) on the free nodes;
6. backfill waiting jobs onto idle reserved nodes.

A scheduler is a frozen value: ``decide`` keeps nothing between calls, so the same snapshot
always gives the same decision.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from functools import cache
from typing import TypeVar

from metaq_py.policy.backfill import ALL, EASY, decision
from metaq_py.policy.backfill import backfill as backfill_pass
from metaq_py.policy.choices import (
    ArrivalStrategy,
    Borrowers,
    Completion,
    CupTiming,
    NoticeStrategy,
    OtherReservations,
    PreemptWhen,
    VictimOrder,
)
from metaq_py.policy.model import NOTHING, Decision, Job
from metaq_py.policy.order import any_ondemand, in_order_view, split_ondemand
from metaq_py.policy.pool import NodeOrder
from metaq_py.policy.snapshot import Snapshot
from metaq_py.policy.work import Work

_W = TypeVar("_W", bound=Enum)


class Backfill(str, Enum):
    """The backfilling policy under a scheduler."""

    EASY = "easy"
    CONSERVATIVE = "conservative"

    def __str__(self) -> str:
        return self.value

    @property
    def depth(self) -> int:
        """Its reservation depth (:func:`~metaq_py.policy.backfill.backfill`): EASY reserves
        for the head alone, conservative for every job that waits."""
        return EASY if self is Backfill.EASY else ALL


MECHANISMS: tuple[str, ...] = (
    "easy", "conservative",
    "N&PAA", "N&SPAA", "N&SPAA+",
    "CUA&PAA", "CUA&SPAA", "CUA&SPAA+",
    "CUP&PAA", "CUP&SPAA", "CUP&SPAA+",
)
"""Every scheduler name :func:`make_scheduler` knows."""


@dataclass(frozen=True, slots=True)
class Scheduler:
    """A named, stateless decision procedure.

    ``notice``/``arrival`` are ``None`` for the baselines, which ignore kinds and notices.
    ``oracle`` decides on true runtimes instead of requested walltimes. ``release_after`` is how
    long after the estimated arrival a reservation whose job has not come is kept. ``warning``
    is how long before the estimated arrival CUP preempts a malleable job. ``victim_order`` is
    what the arrival strategy's ascending preemption overhead counts
    (:class:`~metaq_py.policy.choices.VictimOrder`), ``borrowers`` which borrowers of its
    reservation an arriving job preempts (:class:`~metaq_py.policy.choices.Borrowers`),
    ``other_reservations`` whether it takes idle nodes reserved for other notices
    (:class:`~metaq_py.policy.choices.OtherReservations`), ``cup_preempt`` when CUP
    preempts (:class:`~metaq_py.policy.choices.CupTiming`), and ``preempt_when`` whether
    victims are preempted when even all of them are too few
    (:class:`~metaq_py.policy.choices.PreemptWhen`). ``node_order`` is which free or
    reserved nodes a decision hands out first (:class:`~metaq_py.policy.pool.NodeOrder`).
    ``completion`` is what the nodes of an on-demand job that ends do
    (:class:`~metaq_py.policy.choices.Completion`).
    """

    name: str
    backfill: Backfill
    notice: NoticeStrategy | None = None
    arrival: ArrivalStrategy | None = None
    oracle: bool = False
    release_after: float = 600.0
    warning: float = 120.0
    victim_order: VictimOrder = VictimOrder.NODE_SECONDS
    borrowers: Borrowers = Borrowers.AS_NEEDED
    other_reservations: OtherReservations = OtherReservations.TAKEN
    cup_preempt: CupTiming = CupTiming.PLANNED
    preempt_when: PreemptWhen = PreemptWhen.IT_STARTS
    node_order: NodeOrder = NodeOrder.LOWEST_FIRST
    completion: Completion = Completion.RETURN

    def __post_init__(self) -> None:
        if (self.notice is None) != (self.arrival is None):
            raise ValueError(f"scheduler {self.name!r} needs both a notice and an arrival "
                             "strategy (an on-demand mechanism) or neither (a baseline)")

    def decide(self, snapshot: Snapshot) -> Decision:
        """The actions to take now, in order, and when to decide again at the latest."""
        arrival, notice = self.arrival, self.notice
        if arrival is None or notice is None:
            return self._baseline(snapshot)
        return self._hybrid(snapshot, arrival, notice)

    def _baseline(self, snap: Snapshot) -> Decision:
        return decision(snap, depth=self.backfill.depth, oracle=self.oracle,
                        down=self.node_order is NodeOrder.HIGHEST_FIRST)

    def _hybrid(self, snap: Snapshot, arrival: ArrivalStrategy,
                notice: NoticeStrategy) -> Decision:
        waiting = snap.waiting
        none_arrived = snap.ondemand_waiting == 0  # the driver counted: no pass over the queue
        no_room = not snap.free and (snap.shares is None or not snap.shares.open)
        if not snap.notices and not snap.owed and (not waiting or no_room) \
                and (none_arrived or not any_ondemand(waiting)):
            return NOTHING
        queue = in_order_view(waiting, ordered=snap.ordered)
        arrived: list[Job] = []
        if not none_arrived:
            arrived, queue = split_ondemand(queue)
        returning = self.completion is Completion.RETURN and bool(snap.returned)
        if not arrived and not snap.notices and not snap.owed and not returning:
            # a plain state: stages 1-4 and 6 have nothing to look at, the backfilling decides
            return self._baseline(snap)
        stage = _stages()
        work = Work(snap, oracle=self.oracle, down=self.node_order is NodeOrder.HIGHEST_FIRST)
        order = stage.notice_order(snap.notices)
        awaited = {j.notice for j in arrived if j.notice is not None}
        stage.release_expired(work, order, awaited, release_after=self.release_after)
        if returning:
            stage.give_back(work, queue)
        for lender, nodes in snap.owed.items():
            if lender in snap.running:
                work.expand(lender, nodes)
        for job in arrived:
            stage.admit(work, job, arrival, order, self.victim_order, self.borrowers,
                        self.other_reservations, self.preempt_when)
        stage.collect(work, order, notice, warning=self.warning, timing=self.cup_preempt,
                      when=self.preempt_when, victim_order=self.victim_order)
        backfill_pass(work, queue, self.backfill.depth)
        if notice is not NoticeStrategy.N:
            stage.lend_reservations(work, order, queue)
        return work.decision()


class _Stages:
    """The on-demand stages (:mod:`~metaq_py.policy.notice`, :mod:`~metaq_py.policy.arrival`,
    :mod:`~metaq_py.policy.completion`), loaded by the first decision that has something for
    them (:func:`_stages`): a baseline scheduler never loads them."""

    __slots__ = ("admit", "collect", "give_back", "lend_reservations", "notice_order",
                 "release_expired")

    def __init__(self) -> None:
        from metaq_py.policy.arrival import admit
        from metaq_py.policy.completion import give_back
        from metaq_py.policy.notice import (
            collect,
            lend_reservations,
            notice_order,
            release_expired,
        )

        self.admit = admit
        self.collect = collect
        self.give_back = give_back
        self.lend_reservations = lend_reservations
        self.notice_order = notice_order
        self.release_expired = release_expired


@cache
def _stages() -> _Stages:
    """The one :class:`_Stages`, made at the first call (an import per decision would cost
    a few microseconds each time)."""
    return _Stages()


def make_scheduler(
    name: str,
    *,
    oracle: bool = False,
    release_after: float = 600.0,
    warning: float = 120.0,
    backfill: str | None = None,
    victim_order: str = "node-seconds",
    borrowers: str = "as-needed",
    other_reservations: str = "taken",
    cup_preempt: str = "planned",
    preempt_when: str = "it-starts",
    node_order: str = "lowest-first",
    completion: str = "return",
) -> Scheduler:
    """The scheduler called ``name`` (one of :data:`MECHANISMS`, case-insensitive).

    ``backfill`` overrides the backfilling under an on-demand mechanism (``easy`` by default).
    ``victim_order`` is ``node-seconds`` or ``seconds`` (:class:`~metaq_py.policy.choices.
    VictimOrder`), ``borrowers`` ``as-needed`` or ``all`` (:class:`~metaq_py.policy.choices.
    Borrowers`), ``other_reservations`` ``taken`` or ``spared``
    (:class:`~metaq_py.policy.choices.OtherReservations`), ``cup_preempt`` ``planned`` or
    ``at-arrival`` (:class:`~metaq_py.policy.choices.CupTiming`), ``preempt_when``
    ``it-starts`` or ``always`` (:class:`~metaq_py.policy.choices.PreemptWhen`); the
    baselines preempt nothing and ignore them. ``node_order`` is ``lowest-first`` or
    ``highest-first`` (:class:`~metaq_py.policy.pool.NodeOrder`), for every scheduler.
    ``completion`` is ``return`` or ``pool`` (:class:`~metaq_py.policy.choices.
    Completion`); the baselines preempt nothing and ignore it.
    """
    canon = {m.upper(): m for m in MECHANISMS}.get(name.strip().upper())
    if canon is None:
        raise ValueError(f"unknown scheduler {name!r}; choose one of {', '.join(MECHANISMS)}")
    if release_after < 0 or warning < 0:
        raise ValueError(f"release_after and warning must be >= 0, got {release_after} "
                         f"and {warning}")
    victims = _word(VictimOrder, "victim_order", victim_order)
    who = _word(Borrowers, "borrowers", borrowers)
    others = _word(OtherReservations, "other_reservations", other_reservations)
    when = _word(CupTiming, "cup_preempt", cup_preempt)
    vain = _word(PreemptWhen, "preempt_when", preempt_when)
    order = _word(NodeOrder, "node_order", node_order)
    ending = _word(Completion, "completion", completion)
    if canon in ("easy", "conservative"):
        if backfill is not None and backfill != canon:
            raise ValueError(f"scheduler {canon!r} is itself a backfilling policy; "
                             f"do not pass backfill={backfill!r}")
        return Scheduler(canon, Backfill(canon), oracle=oracle, release_after=release_after,
                         warning=warning, node_order=order)
    try:
        fill = Backfill(backfill or "easy")
    except ValueError:
        raise ValueError(f"unknown backfill {backfill!r}; choose easy or conservative") from None
    notice, arrival = canon.split("&")
    return Scheduler(canon, fill, NoticeStrategy(notice), ArrivalStrategy(arrival),
                     oracle=oracle, release_after=release_after, warning=warning,
                     victim_order=victims, borrowers=who, other_reservations=others,
                     cup_preempt=when, preempt_when=vain, node_order=order,
                     completion=ending)


def _word(choice: type[_W], key: str, word: str) -> _W:
    """``word`` as a member of the enum ``choice``, or one sentence naming its words."""
    try:
        return choice(word)
    except ValueError:
        raise ValueError(f"unknown {key} {word!r}; choose "
                         f"{' or '.join(str(v.value) for v in choice)}") from None
