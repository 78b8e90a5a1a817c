"""What every batch adapter reports, and the contract adapters keep.

A batch adapter answers the runner's questions about the batch job it runs in: which job this
is, which hosts and GPUs it holds, when the batch system will end it, and whether some other
job (the owner of a lease left in the queue) is still alive. :class:`Allocation` is the answer
at one instant; :class:`BatchOverrides` lets a person replace any part of it from the command
line; :class:`BatchSystem` is the base the SLURM, PBS and local adapters share.
"""

from __future__ import annotations

import math
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from metaq_py.errors import MetaqError
from metaq_py.ranges import machine_cpus

__all__ = ["SYSTEMS", "Allocation", "BatchError", "BatchOverrides", "BatchSystem", "Clock",
           "node_cores"]

SYSTEMS = ("slurm", "pbs", "local")
"""The batch systems metaq knows, by the names used on the command line and in records."""

Clock = Callable[[], float]
"""Returns the current time as Unix seconds (``time.time`` outside tests)."""


class BatchError(MetaqError):
    """The batch system could not answer, or answered something unreadable.

    ``str()`` is one sentence naming the command or variable and what was wrong with it.
    """


@dataclass(frozen=True, slots=True)
class Allocation:
    """The resources of one batch job, as the runner sees them at start-up.

    ``system`` is one of :data:`SYSTEMS`. ``machine`` names the computer (the SLURM cluster,
    the PBS server, or the host for a local run); leases live under
    ``working/<machine>/<jobid>/``, so job ids only need to be unique per machine. ``nodes``
    are concrete host names in the batch system's order, each once. ``gpu_ids`` are the device
    ids usable on every node, in the numbering processes on the nodes see (what goes into
    ``CUDA_VISIBLE_DEVICES``). ``end_time`` is when the batch system ends the job, in Unix
    seconds, or ``None`` when it has no limit. ``cores_per_node`` is how many cores each node
    offers shares of a node (:func:`node_cores`), and ``cores_per_gpu`` how many of them per
    GPU are held back from shares without GPUs. ``gpu_cores`` names, per GPU (in ``gpu_ids``
    order), the node's cores next to it (``()``: not known; see
    :mod:`metaq_py.batch.topology`).
    """

    system: str
    machine: str
    jobid: str
    nodes: tuple[str, ...]
    gpu_ids: tuple[str, ...]
    end_time: float | None
    cores_per_node: int = 1
    cores_per_gpu: int = 0
    gpu_cores: tuple[tuple[int, ...], ...] = ()

    @property
    def gpus_per_node(self) -> int:
        """How many GPUs each node has for tasks."""
        return len(self.gpu_ids)

    @property
    def nnodes(self) -> int:
        """How many nodes the allocation has."""
        return len(self.nodes)

    def time_left(self, now: float) -> float:
        """Seconds from ``now`` to the end of the allocation (``inf`` without a limit)."""
        return math.inf if self.end_time is None else self.end_time - now


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchOverrides:
    """Values a person gives instead of asking the batch system (each ``None``: ask it).

    ``system`` forces an adapter instead of detecting one. ``nodes`` replaces the node list;
    ``nnodes`` keeps only the first ``nnodes`` of it (leaving the rest of the allocation
    alone), or, for a local run, is the size of the pretend cluster. ``gpus_per_node``
    replaces the GPU count (device ids become ``0 .. n-1``). ``end_time`` (Unix seconds)
    replaces the end of the allocation; ``walltime`` (seconds from start-up) caps it: the
    runner stops by then even if the batch system would allow more.
    """

    system: str | None = None
    machine: str | None = None
    jobid: str | None = None
    nodes: tuple[str, ...] | None = None
    nnodes: int | None = None
    gpus_per_node: int | None = None
    end_time: float | None = None
    walltime: float | None = None
    cores_per_node: int | None = None
    cores_per_gpu: int | None = None

    def __post_init__(self) -> None:
        if self.system is not None and self.system not in SYSTEMS:
            raise BatchError(
                f"unknown batch system {self.system!r}; expected one of {', '.join(SYSTEMS)}"
            )
        if self.nodes is not None:
            if not self.nodes or not all(isinstance(n, str) and n.strip() for n in self.nodes):
                raise BatchError(f"the node list override {list(self.nodes)!r} has an empty name")
            if len(set(self.nodes)) != len(self.nodes):
                raise BatchError(f"the node list override {list(self.nodes)!r} names a node twice")
        if self.nnodes is not None and self.nnodes < 1:
            raise BatchError(f"the node count override is {self.nnodes}; it must be at least 1")
        if self.gpus_per_node is not None and self.gpus_per_node < 0:
            raise BatchError(
                f"the GPUs-per-node override is {self.gpus_per_node}; it must be 0 or more"
            )
        for name, value, least in (("cores-per-node", self.cores_per_node, 1),
                                   ("cores-per-GPU", self.cores_per_gpu, 0)):
            if value is not None and value < least:
                raise BatchError(f"the {name} override is {value}; it must be at least {least}")
        if self.walltime is not None and not (self.walltime > 0 and math.isfinite(self.walltime)):
            raise BatchError(f"the walltime override is {self.walltime}; it must be positive")
        if self.end_time is not None and self.walltime is not None:
            raise BatchError("give an end time or a walltime override, not both")


class BatchSystem(ABC):
    """One batch job's view of its batch system.

    Subclasses supply the raw answers (``_jobid``, ``_nodes``, ``_gpu_ids``, ``_machine``,
    ``_query_end_time``) and :meth:`is_alive`; this base applies the overrides, so every
    adapter treats them the same way. The adapter is created at the runner's start-up, which
    is the moment a ``walltime`` override counts from.
    """

    system: str = ""

    def __init__(
        self,
        *,
        env: Mapping[str, str],
        overrides: BatchOverrides | None = None,
        clock: Clock,
    ) -> None:
        self.env = dict(env)
        self.overrides = overrides or BatchOverrides()
        self.clock = clock
        self.started = clock()

    @property
    def jobid(self) -> str:
        """This job's id (overridable)."""
        return self.overrides.jobid or self._jobid()

    def allocation(self) -> Allocation:
        """Ask the batch system (once each) for everything the runner needs at start-up."""
        jobid = self.jobid
        nodes = self._chosen_nodes()
        count = self.overrides.gpus_per_node
        gpu_ids = tuple(str(i) for i in range(count)) if count is not None else self._gpu_ids()
        near: tuple[tuple[int, ...], ...] = ()
        if gpu_ids and count is None:  # pretend GPUs (an override) have no topology
            from metaq_py.batch.topology import gpu_cores, nvidia_affinity  # real GPUs only
            near = gpu_cores(nvidia_affinity(), gpu_ids, machine_cpus())
        return Allocation(
            system=self.system,
            machine=self.overrides.machine or self._machine(),
            jobid=jobid,
            nodes=nodes,
            gpu_ids=gpu_ids,
            end_time=self.end_time(),
            cores_per_node=self.overrides.cores_per_node or node_cores(self.env),
            cores_per_gpu=self.overrides.cores_per_gpu or 0,
            gpu_cores=near,
        )

    def node_memory(self, host: str) -> int | None:
        """Bytes of memory of ``host`` (SLURM's ``RealMemory``, PBS's
        ``resources_available.mem``, else the runner's own node's ``MemTotal``); ``None``: not
        known. Asked by the runner once, when a waiting task first gives a ``MEM``, so that
        a campaign without one costs no query."""
        return self._node_memory(host)

    def _node_memory(self, host: str) -> int | None:
        """Bytes of memory of ``host`` as the batch system knows it; this base reads the
        runner's own node (``MemTotal`` of ``/proc/meminfo``), which adapters call when their
        batch system does not say."""
        try:
            with open("/proc/meminfo", encoding="ascii") as f:
                for line in f:
                    if line.startswith("MemTotal:"):
                        return int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            return None
        return None

    def blocks(self, nodes: tuple[str, ...]) -> tuple[tuple[int, ...], ...]:
        """The indexes of ``nodes`` grouped into blocks of neighbouring nodes: by the batch
        system's switches where it knows them, else by hostname order (asked when the runner
        first places a task on several nodes, not at start-up)."""
        from metaq_py.batch.topology import HOSTNAME_BLOCK, blocks_of  # several nodes only
        return blocks_of(nodes, self._switches(), HOSTNAME_BLOCK)

    def end_time(self) -> float | None:
        """When this job ends, asked afresh (an operator may have changed the limit)."""
        o = self.overrides
        if o.end_time is not None:
            return o.end_time
        end = self._query_end_time()
        if o.walltime is not None:
            cap = self.started + o.walltime
            end = cap if end is None else min(end, cap)
        return end

    @abstractmethod
    def is_alive(self, jobid: str) -> bool:
        """Whether the batch job ``jobid`` (on this machine) still exists and holds its nodes.

        ``False`` means the job is gone for certain, so its leases may be reclaimed. When the
        batch system cannot answer, this raises :class:`BatchError` rather than guess; the
        caller then falls back on the lease's heartbeat.
        """

    def _chosen_nodes(self) -> tuple[str, ...]:
        o = self.overrides
        nodes = o.nodes if o.nodes is not None else self._nodes()
        if o.nnodes is not None:
            if o.nnodes > len(nodes):
                raise BatchError(
                    f"asked to use {o.nnodes} nodes, but {self.system} job {self.jobid} "
                    f"has only {len(nodes)}"
                )
            nodes = nodes[: o.nnodes]
        return nodes

    def _switches(self) -> list[tuple[str, tuple[str, ...]]]:
        """The batch system's leaf switches and their hosts (``[]``: not known, so blocks
        follow hostname order)."""
        return []

    @abstractmethod
    def _jobid(self) -> str:
        """This job's id, from the environment."""

    @abstractmethod
    def _nodes(self) -> tuple[str, ...]:
        """This job's hosts, each once, in the batch system's order."""

    @abstractmethod
    def _gpu_ids(self) -> tuple[str, ...]:
        """The GPU device ids usable on each node."""

    @abstractmethod
    def _machine(self) -> str:
        """The name of the computer this job runs on."""

    @abstractmethod
    def _query_end_time(self) -> float | None:
        """When the batch system will end this job (``None``: no limit)."""


_FIRST_COUNT = re.compile(r"^\s*([0-9]+)")


def node_cores(env: Mapping[str, str]) -> int:
    """How many cores a node of this job offers: from the batch system (``SLURM_CPUS_ON_NODE``,
    the first count of ``SLURM_JOB_CPUS_PER_NODE`` such as ``64(x2)``, PBS's ``NCPUS``), else
    the cores this process may run on (``os.sched_getaffinity``), else ``os.cpu_count()``."""
    for name in ("SLURM_CPUS_ON_NODE", "SLURM_JOB_CPUS_PER_NODE", "NCPUS"):
        found = _FIRST_COUNT.match(env.get(name, ""))
        if found and int(found.group(1)) > 0:
            return int(found.group(1))
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1
