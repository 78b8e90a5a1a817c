"""Node failures: an event source the engine can add to a run.

Model (every number a field of :class:`FailureModel`; all draws from its seed):

- Failures strike the machine with mean time ``mtbf`` between failures of *any* node (a
  machine-wide MTBF, as sites report it; 5 h and 50 h in the ``failures`` study). The times
  between failures (:class:`FailureTimes`) are exponential, a Poisson process (``poisson``, the
  default), or Weibull with shape 0.7 and the same mean, ``scale = mtbf / Γ(1 + 1/0.7)``
  (``weibull-0.7``): HPC failure logs (Schroeder and Gibson, DSN 2006, LANL) fit a Weibull of
  shape 0.7 to 0.8, a decreasing hazard, better than an exponential, so failures bunch (the
  gaps' coefficient of variation is about 1.46 against 1).
- Each failure hits one node (:class:`FailureNode`) drawn uniformly from the whole machine
  (``uniform``, the default), or drawn uniformly among the nodes running work, neither idle nor
  under repair, and from the whole machine when none is (``busy``): failure studies tie
  failure rates to the load a node carries, and a failure striking only busy nodes kills a
  job every time one runs, which moves which jobs, and how many, are killed.
- The node is out of service for a repair time drawn uniformly from
  ``repair * (1 ± repair_spread)`` (about 6 h by default). A node that fails again while
  under repair changes nothing.
- Failures strike from the trace's first submit to its last (``end``); the drain after the
  last submit is failure-free. Without that bound a large job that has no checkpoint could be
  killed again and again for ever at a short MTBF, and the run would never end.
- The job holding the node is killed at once, without warning, whatever its kind, and goes
  back to the queue with its original submit time:

  - a rigid job loses the work since its last checkpoint and pays its setup again (the same
    accounting as a preemption, :func:`metaq_py.policy.checkpoint.resumed`);
  - a malleable or on-demand job has no checkpoint and no warning, so it loses everything
    since its (re)start and restarts from there (``loss`` ``all``, the default). Under
    ``since-checkpoint`` (:class:`FailureLoss`) it keeps its progress at the kill and pays its
    setup again, as a preempted malleable job does (:func:`~metaq_py.policy.checkpoint.resumed`):
    the model gives these jobs no checkpoint schedule (their runtimes hold no checkpoint
    writes), so this is the other bound, the least any checkpoint schedule could lose.

- A node under repair is held by a *repair job*: a one-node on-demand job with a negative id
  that ends when the repair does. The policies never preempt on-demand work, so no policy can
  take the node, and a backfilling scheduler sees when it returns, like a drained node with an
  expected return. Repair jobs are no one's work: they count in no metric.

The engine calls :meth:`NodeFailures.strike` at :meth:`NodeFailures.next_time` and
:meth:`NodeFailures.repaired` when a repair job's end comes; the source does the node
bookkeeping through the public :class:`~metaq_py.cluster.Cluster` operations and hands the
engine the killed job (:class:`Kill`) to requeue.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import Enum

import numpy as np

from metaq_py.cluster import Cluster
from metaq_py.policy.checkpoint import lost_node_seconds, resumed
from metaq_py.policy.model import Job, JobId, Kind, Running
from sim.engine.words import word_of

HOUR = 3600.0
DEFAULT_REPAIR = 6 * HOUR
_STREAM = 0xFA11  # keeps the failure draws independent of the workload model's streams


class FailureLoss(str, Enum):
    """What a malleable or on-demand job a failure kills loses (a rigid job always loses the
    work since its last checkpoint)."""

    ALL = "all"
    """Everything since its (re)start: it has no checkpoint and no warning (the default)."""
    SINCE_CHECKPOINT = "since-checkpoint"
    """Only its setup, as if it had checkpointed at the kill: it keeps its progress."""

    def __str__(self) -> str:
        return self.value

    @classmethod
    def of(cls, word: str) -> FailureLoss:
        """The choice named ``word``; ValueError with one sentence for any other word."""
        return word_of(cls, "failure_loss", word)


class FailureNode(str, Enum):
    """Which node a failure strikes."""

    UNIFORM = "uniform"
    """One drawn uniformly from the whole machine, idle or not (the default)."""
    BUSY = "busy"
    """One drawn uniformly among the nodes running work (not idle, not under repair); one of
    the whole machine when no node runs work."""

    def __str__(self) -> str:
        return self.value

    @classmethod
    def of(cls, word: str) -> FailureNode:
        """The choice named ``word``; ValueError with one sentence for any other word."""
        return word_of(cls, "failure_node", word)


WEIBULL_SHAPE = 0.7
"""The shape of ``weibull-0.7``'s law of the times between failures (below 1: bunched)."""


class FailureTimes(str, Enum):
    """The law of the times between failures, each with mean ``mtbf``."""

    POISSON = "poisson"
    """Exponential: a Poisson process, failures independent of one another (the default)."""
    WEIBULL = "weibull-0.7"
    """Weibull with shape :data:`WEIBULL_SHAPE` and scale ``mtbf / Γ(1 + 1/shape)``: a
    decreasing hazard, so a failure is soon followed by others more often than under Poisson."""

    def __str__(self) -> str:
        return self.value

    @classmethod
    def of(cls, word: str) -> FailureTimes:
        """The choice named ``word``; ValueError with one sentence for any other word."""
        return word_of(cls, "failure_times", word)


@dataclass(frozen=True, slots=True, kw_only=True)
class FailureModel:
    """Machine-wide mean time between node failures ``mtbf`` and mean repair time ``repair``
    (seconds); repairs are uniform in ``repair * (1 ± repair_spread)``. ``loss`` is what a
    killed malleable or on-demand job loses (:class:`FailureLoss`), ``node`` which node a
    failure strikes (:class:`FailureNode`), ``times`` the law of the times between failures
    (:class:`FailureTimes`)."""

    mtbf: float
    repair: float = DEFAULT_REPAIR
    repair_spread: float = 0.5
    seed: int = 0
    loss: FailureLoss = FailureLoss.ALL
    node: FailureNode = FailureNode.UNIFORM
    times: FailureTimes = FailureTimes.POISSON

    def __post_init__(self) -> None:
        if not self.mtbf > 0 or not self.repair > 0:
            raise ValueError(f"mtbf and repair must be positive, got {self.mtbf} and "
                             f"{self.repair}")
        if not 0 <= self.repair_spread < 1:
            raise ValueError(f"repair_spread must be in [0, 1), got {self.repair_spread}")

    @classmethod
    def of(cls, params: Mapping[str, float], *, seed: int, loss: str = "all",
           node: str = "uniform", times: str = "poisson") -> FailureModel:
        """The model a run's overrides ``failure_mtbf`` and ``failure_repair`` describe, with
        the words ``loss`` (``failure_loss``), ``node`` (``failure_node``) and ``times``
        (``failure_times``)."""
        return cls(mtbf=float(params["failure_mtbf"]),
                   repair=float(params.get("failure_repair", DEFAULT_REPAIR)), seed=seed,
                   loss=FailureLoss.of(loss), node=FailureNode.of(node),
                   times=FailureTimes.of(times))

    def gap(self, rng: np.random.Generator) -> float:
        """One time between failures, drawn from ``rng`` by the law :attr:`times`."""
        if self.times is FailureTimes.WEIBULL:
            return self.mtbf / math.gamma(1 + 1 / WEIBULL_SHAPE) * float(
                rng.weibull(WEIBULL_SHAPE))
        return float(rng.exponential(self.mtbf))


@dataclass(frozen=True, slots=True)
class Kill:
    """A job a failure killed: its record at that moment, what goes back to the queue, and
    the node-seconds of work thrown away."""

    running: Running
    requeued: Job
    lost_node_seconds: float


@dataclass(frozen=True, slots=True)
class Strike:
    """One failure: the node hit, the job killed (if any), and the repair job holding the
    node until ``repaired_at`` (``None`` when the node was already under repair)."""

    node: int
    kill: Kill | None
    repair: JobId | None
    repaired_at: float | None


def killed(r: Running, now: float, loss: FailureLoss = FailureLoss.ALL) -> Kill:
    """What a failure at ``now`` does to the running job ``r`` (see the module docstring)."""
    job = r.job
    if job.kind is Kind.RIGID:
        return Kill(r, resumed(r, now), lost_node_seconds(r, now))
    if loss is FailureLoss.SINCE_CHECKPOINT:
        return Kill(r, _kept(r, now), job.setup * len(r.nodes))
    # no checkpoint, no warning: the work since the (re)start is gone; it restarts as it began
    if r.true_end is not None and job.runtime is not None:
        # the work left, in node-seconds at full size (the trace's, as useful work counts it):
        # under Amdahl a node-second at the current size does size / slowdown / nodes of them
        k = len(r.nodes)
        left = max(0.0, r.true_end - now) * (k if not job.serial else job.size / job.slowdown(k))
        lost = max(0.0, job.runtime * job.size - left)
    else:
        lost = max(0.0, now - r.start) * len(r.nodes)
    return Kill(r, job, lost)


def _kept(r: Running, now: float) -> Job:
    """The malleable or on-demand job ``r`` requeued with its progress at ``now`` kept: what
    was left at its current size, rescaled to its full size by its slowdown, plus a setup (an
    on-demand job runs at its full size, so nothing is rescaled)."""
    job = r.job
    scale = len(r.nodes) / job.size if not job.serial else 1 / job.slowdown(len(r.nodes))
    wall = max(0.0, r.end - now) * scale + job.setup
    run = None if r.true_end is None else max(0.0, r.true_end - now) * scale + job.setup
    return replace(job, walltime=wall, runtime=run)


class NodeFailures:
    """The failure event source of one run on a ``nodes``-node machine, striking from
    ``start`` until ``end`` (default: for ever)."""

    def __init__(self, model: FailureModel, *, nodes: int, start: float,
                 end: float = math.inf) -> None:
        self.model = model
        self.nodes = nodes
        self.end = end
        self._rng = np.random.default_rng(np.random.SeedSequence([model.seed, _STREAM]))
        self._next = start + model.gap(self._rng)
        self._repairs: dict[JobId, int] = {}
        self._serial = 0
        self.failures = 0
        self.kills = 0
        self.lost = 0.0
        self.killed: set[JobId] = set()
        """Every job a failure killed at least once (a reading of the study counts them as
        preempted)."""

    def next_time(self) -> float:
        """When the next failure strikes (infinity: no more failures)."""
        return self._next if self._next <= self.end else math.inf

    def is_repair(self, job_id: JobId) -> bool:
        return job_id in self._repairs

    def strike(self, cluster: Cluster, now: float) -> Strike:
        """The failure due at ``now``: kill the holder of a random node and take the node out
        of service. Draws the time of the next failure."""
        rng = self._rng
        node = self._node(cluster, rng)
        low, high = (self.model.repair * (1 - self.model.repair_spread),
                     self.model.repair * (1 + self.model.repair_spread))
        duration = float(rng.uniform(low, high))
        self._next = now + self.model.gap(rng)
        self.failures += 1
        holder = _holder(cluster, node)
        if holder is not None and holder.job.id in self._repairs:
            return Strike(node, None, None, None)
        kill = None
        if holder is not None:
            kill = killed(holder, now, self.model.loss)
            if holder.job.kind is Kind.ONDEMAND:
                cluster.finish(holder.job.id, now=now)
            else:
                cluster.preempt(holder.job.id, now=now)
            self.kills += 1
            self.killed.add(holder.job.id)
            self.lost += kill.lost_node_seconds
        _reclaim_owed(cluster, node)
        self._serial += 1
        repair = Job(id=-self._serial, kind=Kind.ONDEMAND, size=1, walltime=duration,
                     submit=now, runtime=duration)
        cluster.start(repair, (node,), now=now)
        self._repairs[repair.id] = node
        return Strike(node, kill, repair.id, now + duration)

    def _node(self, cluster: Cluster, rng: np.random.Generator) -> int:
        """The node the failure strikes, by the model's :class:`FailureNode` (one draw)."""
        if self.model.node is FailureNode.BUSY:
            busy = sorted(n for r in cluster.running.values()
                          if r.job.id not in self._repairs for n in r.nodes)
            if busy:
                return busy[int(rng.integers(len(busy)))]
        return int(rng.integers(self.nodes))

    def repaired(self, cluster: Cluster, repair: JobId, now: float) -> None:
        """The repair job ``repair`` ends: its node is back in service."""
        self._repairs.pop(repair)
        cluster.finish(repair, now=now)

    def counts(self) -> dict[str, float]:
        """What the failures did, for the run's metrics."""
        return {"failures": float(self.failures), "failure_kills": float(self.kills),
                "failure_lost_node_hours": self.lost / HOUR}


def _holder(cluster: Cluster, node: int) -> Running | None:
    """The running job holding ``node`` (failures are rare: a scan of the running jobs)."""
    for r in cluster.running.values():
        nodes = r.nodes
        i = bisect_left(nodes, node)
        if i < len(nodes) and nodes[i] == node:
            return r
    return None


def _reclaim_owed(cluster: Cluster, node: int) -> None:
    """A node owed back to a shrunk lender is neither free nor reserved, so a repair job
    could not take it: take it back from the debt (:meth:`Cluster.reclaim`), which frees it
    and leaves the lender as it was."""
    if any(node in owed for owed in cluster.owed.values()):
        cluster.reclaim(node)
