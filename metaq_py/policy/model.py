"""The world at one instant, as the policy sees it, and the actions it may take.

Everything here is a plain frozen value. A driver (the live runner or the simulator) builds a
:class:`~metaq_py.policy.snapshot.Snapshot` of them, hands it to a scheduler's ``decide`` and
applies the returned actions to its :class:`~metaq_py.cluster.Cluster`. Nothing in this module
reads a clock, a file or the environment.

Vocabulary (the same words are used in the CLI, the docs and the simulator):

job
    A unit of work. In the live runner it is a task script from the queue; in the simulator a
    trace job. It is *waiting* (a :class:`Job`) or *running* (a :class:`Running`).
kind
    rigid, malleable or ondemand, after Fan et al., "Hybrid Workload Scheduling on HPC
    Systems" (IPDPS 2022) (:class:`~metaq_py.hybrid.Kind`, kept on the ground floor).
notice
    An advance announcement that on-demand work of a given size will arrive at an estimated
    time (:class:`~metaq_py.hybrid.Notice`).
nodes
    Concrete node ids, small integers ``0 .. size-1``. The live runner maps them to host names
    through its allocation's node list, so actions always name the exact hosts.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from metaq_py.hybrid import Kind as Kind  # re-exported: the policy names it from here
from metaq_py.hybrid import Notice as Notice

JobId = Hashable
NodeId = int
Nodes = tuple[NodeId, ...]

Ending = tuple[float, NodeId, JobId, int, "str | None"]
"""One running job in end order: ``(expected end, lowest node, job id, node count, borrowed)``.

The lowest node id is unique among running jobs (they hold disjoint, non-empty node sets), so
sorting these tuples never compares job ids and the order is fully deterministic."""


@dataclass(frozen=True)
class Job:
    """A job waiting for nodes.

    ``size`` is the node count for rigid and on-demand jobs and the *maximum* for malleable
    ones; ``min_size`` equals ``size`` unless the job is malleable. ``walltime`` is the requested
    time at ``size`` nodes (the user's estimate, which decisions use); ``runtime`` is the true
    undisturbed time at ``size`` nodes and is known only to the simulator (the ``oracle``
    switch decides on it). A preempted job comes back with its original ``submit`` time, so it
    keeps its place in the order, and with ``walltime``/``runtime`` reduced to what is left.

    ``cores`` above 0 makes the job a *share* of one node (:mod:`metaq_py.policy.shares`):
    ``size`` is then 1, the job is rigid, and it uses ``cores`` cores and ``gpus`` GPUs of
    its node beside other shares. With ``cores`` 0 (every trace job) it takes whole nodes.
    ``mem`` is the bytes of memory it needs per node (its ``MEM``; 0: not said): a share
    joins only a node whose memory not yet given to shares covers it.

    ``shapes`` are the other shapes a rigid job accepts, each a Job of the same id (with no
    shapes of its own), in the order its task names them, after the job's own; ``shape``
    says which of its task's shapes a Job is (0: the first the task names). A decision starts
    the shape that starts soonest (:mod:`metaq_py.policy.shapes`), and its :class:`Start`
    names it.

    ``serial`` is a malleable job's serial fraction under Amdahl's law (0: linear speedup, the
    default): see :meth:`slowdown`.

    ``resize_cost`` is what each shrink or expand costs a malleable job, as time at its full
    size (its setup, say): :func:`~metaq_py.policy.work.resized` moves the job's end later by
    it, at the new size; with ``resize_fixed`` by the same time at any size. 0 (the default)
    makes resizing free.

    ``fixed_setup`` makes a malleable job's ``setup`` take the same time at any size, as the
    paper's t_actual = t_single / n + t_setup says (R2 of ``paper-rules.md``): only the rest
    of its time scales with its size (:meth:`time_at`). Without it (the default) the whole
    time, setup included, scales.
    """

    id: JobId
    kind: Kind
    size: int
    walltime: float
    submit: float
    min_size: int = 0
    runtime: float | None = None
    priority: int = 0
    rank: int = 0
    setup: float = 0.0
    checkpoint_interval: float | None = None
    checkpoint_cost: float = 0.0
    notice: str | None = None
    cores: int = 0
    gpus: int = 0
    shape: int = 0
    shapes: tuple[Job, ...] = ()
    serial: float = 0.0
    resize_cost: float = 0.0
    resize_fixed: bool = False
    fixed_setup: bool = False
    mem: int = 0

    def __init__(self, id: JobId, kind: Kind, size: int, walltime: float, submit: float,
                 min_size: int = 0, runtime: float | None = None, priority: int = 0,
                 rank: int = 0, setup: float = 0.0, checkpoint_interval: float | None = None,
                 checkpoint_cost: float = 0.0, notice: str | None = None, cores: int = 0,
                 gpus: int = 0, shape: int = 0, shapes: tuple[Job, ...] = (),
                 serial: float = 0.0, resize_cost: float = 0.0,
                 resize_fixed: bool = False, fixed_setup: bool = False, mem: int = 0) -> None:
        # written out (see "Hot values" below)
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "walltime", walltime)
        object.__setattr__(self, "submit", submit)
        object.__setattr__(self, "min_size", min_size)
        object.__setattr__(self, "runtime", runtime)
        object.__setattr__(self, "priority", priority)
        object.__setattr__(self, "rank", rank)
        object.__setattr__(self, "setup", setup)
        object.__setattr__(self, "checkpoint_interval", checkpoint_interval)
        object.__setattr__(self, "checkpoint_cost", checkpoint_cost)
        object.__setattr__(self, "notice", notice)
        object.__setattr__(self, "cores", cores)
        object.__setattr__(self, "gpus", gpus)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "shapes", shapes)
        object.__setattr__(self, "serial", serial)
        object.__setattr__(self, "resize_cost", resize_cost)
        object.__setattr__(self, "resize_fixed", resize_fixed)
        object.__setattr__(self, "fixed_setup", fixed_setup)
        object.__setattr__(self, "mem", mem)
        self.__post_init__()

    def __post_init__(self) -> None:
        if self.min_size == 0:
            object.__setattr__(self, "min_size", self.size)
        if not 1 <= self.min_size <= self.size:
            raise ValueError(f"job {self.id!r}: need 1 <= min_size <= size, got "
                             f"{self.min_size} and {self.size}")
        if self.cores and (self.size != 1 or self.kind is not Kind.RIGID or self.gpus < 0):
            raise ValueError(f"job {self.id!r}: a share of a node ({self.cores} cores) is a "
                             f"rigid job on one node with 0 or more GPUs")
        if self.mem < 0:
            raise ValueError(f"job {self.id!r}: memory is 0 bytes or more, got {self.mem}")
        if self.serial and (self.kind is not Kind.MALLEABLE or not 0 < self.serial < 1):
            raise ValueError(f"job {self.id!r}: only a malleable job has a serial fraction, "
                             f"in [0, 1), got {self.serial}")
        if self.resize_cost and (self.kind is not Kind.MALLEABLE or not self.resize_cost > 0):
            raise ValueError(f"job {self.id!r}: only a malleable job has a resize cost, 0 "
                             f"seconds or more, got {self.resize_cost}")
        if self.shapes and (self.kind is not Kind.RIGID or any(
                s.id != self.id or s.shapes or s.kind is not Kind.RIGID for s in self.shapes)):
            raise ValueError(f"job {self.id!r}: only a rigid job has other shapes, each a "
                             f"rigid job of the same id with no shapes of its own")

    def in_shape(self, shape: int) -> Job:
        """This job in its task's shape ``shape`` (itself, or one of :attr:`shapes`)."""
        if shape == self.shape:
            return self
        for other in self.shapes:
            if other.shape == shape:
                return other
        raise ValueError(f"job {self.id!r} has no shape {shape}")

    def time_at(self, nodes: int, oracle: bool) -> float:
        """The time this job is assumed to need on ``nodes`` nodes.

        The estimate at full size is the requested walltime, or the true runtime with
        ``oracle`` (when it is known), times :meth:`slowdown`: with linear speedup
        ``estimate * size / nodes``; with :attr:`fixed_setup`, ``setup + (estimate - setup)
        * slowdown``. Other kinds run at ``size``.
        """
        est = self.runtime if oracle and self.runtime is not None else self.walltime
        if nodes == self.size:
            return est
        if self.fixed_setup:
            return self.setup + (est - self.setup) * self.slowdown(nodes)
        # linear: the same arithmetic as ever, so results stay identical to the last bit
        return est * self.size / nodes if not self.serial else est * self.slowdown(nodes)

    def slowdown(self, nodes: int) -> float:
        """How many times longer the job takes on ``nodes`` nodes than at its full size.

        Linear speedup (``serial`` 0): ``size / nodes``. Amdahl's law with serial fraction
        ``f``: a run of time ``T1 * (f + (1 - f) / n)`` on ``n`` nodes, so
        ``(f + (1 - f) / nodes) / (f + (1 - f) / size)``: shrinking costs less time, and
        expanding gains less, than under linear speedup."""
        f = self.serial
        if not f:
            return self.size / nodes
        return (f + (1 - f) / nodes) / (f + (1 - f) / self.size)


@dataclass(frozen=True)
class Running:
    """A job holding nodes now.

    ``end`` is when it is expected to end by its requested walltime at its current size;
    ``true_end`` is when it really ends (simulator only, used in ``oracle`` mode).
    ``last_checkpoint`` is the time its last checkpoint completed (``None``: none yet).
    ``borrowed`` names the notice whose reserved nodes it runs on, when it was backfilled
    onto a reservation; such work is preempted when the on-demand job arrives.
    """

    job: Job
    nodes: Nodes
    start: float
    end: float
    true_end: float | None = None
    last_checkpoint: float | None = None
    borrowed: str | None = None

    def __init__(self, job: Job, nodes: Nodes, start: float, end: float,
                 true_end: float | None = None, last_checkpoint: float | None = None,
                 borrowed: str | None = None) -> None:
        # written out (see "Hot values" below)
        object.__setattr__(self, "job", job)
        object.__setattr__(self, "nodes", nodes)
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "end", end)
        object.__setattr__(self, "true_end", true_end)
        object.__setattr__(self, "last_checkpoint", last_checkpoint)
        object.__setattr__(self, "borrowed", borrowed)

    @property
    def size(self) -> int:
        """The number of nodes held now (below ``job.size`` for a shrunk malleable job)."""
        return len(self.nodes)

    def expected_end(self, oracle: bool) -> float:
        """When a decision assumes this job ends: by walltime, or truly in ``oracle`` mode."""
        if oracle and self.true_end is not None:
            return self.true_end
        return self.end


# --- actions -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Start:
    """Start ``job`` on exactly ``nodes``. ``borrowed``: the notice whose reserved nodes it uses.
    ``shape``: which of the job's shapes (:meth:`Job.in_shape`) it starts in."""

    job: JobId
    nodes: Nodes
    borrowed: str | None = None
    shape: int = 0

    def __init__(self, job: JobId, nodes: Nodes, borrowed: str | None = None,
                 shape: int = 0) -> None:
        # written out (see "Hot values" below)
        object.__setattr__(self, "job", job)
        object.__setattr__(self, "nodes", nodes)
        object.__setattr__(self, "borrowed", borrowed)
        object.__setattr__(self, "shape", shape)


@dataclass(frozen=True)
class Preempt:
    """Stop ``job`` and requeue it.

    ``for_job`` names the on-demand job the nodes are freed for (or ``None`` when CUP frees them
    for a reservation). They are not lent: a preempted job waits in the queue with its
    original submit time; when ``for_job`` ends, the nodes it gave come back to it if it
    still waits (:attr:`~metaq_py.policy.snapshot.Snapshot.returned`, R12).
    """

    job: JobId
    for_job: JobId | None = None


@dataclass(frozen=True)
class Shrink:
    """Take ``nodes`` away from malleable ``job``, lending them to on-demand ``for_job``.

    When ``for_job`` ends, the lent nodes are owed back to ``job`` (see
    :attr:`~metaq_py.policy.snapshot.Snapshot.owed`).
    """

    job: JobId
    nodes: Nodes
    for_job: JobId | None = None


@dataclass(frozen=True)
class Expand:
    """Give ``nodes`` to malleable ``job`` (in practice: the nodes it is owed)."""

    job: JobId
    nodes: Nodes


@dataclass(frozen=True)
class Reserve:
    """Hold idle ``nodes`` for ``notice``."""

    notice: str
    nodes: Nodes


@dataclass(frozen=True)
class Release:
    """Give every node held for ``notice`` back to the free pool."""

    notice: str


Action = Start | Preempt | Shrink | Expand | Reserve | Release


@dataclass(frozen=True)
class Decision:
    """The actions to apply, in order, and the latest time the driver should decide again
    even if nothing happens (a reservation to release, a checkpoint to catch)."""

    actions: tuple[Action, ...] = ()
    wake: float | None = None

    def __init__(self, actions: tuple[Action, ...] = (), wake: float | None = None) -> None:
        # written out (see "Hot values" below)
        object.__setattr__(self, "actions", actions)
        object.__setattr__(self, "wake", wake)


# Hot values: the simulator builds a Job, a Running and a Start per job and a Snapshot and a
# Decision per decision, so these five (the Snapshot's in policy/snapshot.py) write their __init__
# out, field by field and in field order (tests/policy/test_model.py holds them to the fields). It
# is the one speed measure left in the policy core: mypyc compiles such an __init__ to direct
# stores, where it keeps the one dataclasses writes in Python, setting each field through
# object.__setattr__. Measured with bench/sim_theta.py on the compiled build, the plain dataclass
# __init__s made the thirteen runs 27% slower (EASY alone 48%). Pure Python runs the very same
# __init__s, so both builds build values identically (tests/test_build.py).

NOTHING = Decision()
"""The decision that does nothing and asks for no wake-up (one shared value)."""
