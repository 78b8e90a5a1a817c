"""The task spec: what a task script asks for, and the parts it is made of.

:class:`TaskSpec` is the value a task's ``#METAQ`` header turns into: nodes, GPUs or a share of
one node's cores, wall clock, type (rigid, malleable, on-demand), priority, checkpoints, the
warning signal, dependencies, ... Its parts are small values of their own: a
:class:`Checkpoint` interval and cost, the warning :class:`Signal`, how a malleable task takes a
new size (:class:`Resize`, :class:`ResizeMode`).

These are plain values with no parsing in them: :mod:`metaq_py.directives` reads and writes the
``#METAQ`` lines, and :mod:`metaq_py.directive_keys` says what each key accepts.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from metaq_py.hybrid import Kind

__all__ = ["Checkpoint", "Resize", "ResizeMode", "Signal", "TaskShape", "TaskSpec"]


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A task that checkpoints every ``interval`` seconds, each checkpoint taking ``cost``."""

    interval: float
    cost: float


@dataclass(frozen=True, slots=True)
class Signal:
    """Send signal ``name`` (``USR1``, ``TERM``, ...) ``before`` seconds ahead of a preemption
    or of the end of the allocation's wall clock, like ``sbatch --signal=USR1@60``."""

    name: str
    before: float


class ResizeMode:
    """How a malleable task takes a new node count (``#METAQ RESIZE``)."""

    IN_PLACE = "in-place"
    """The task keeps running: metaq rewrites its node list and sends it the resize signal."""
    RESTART = "restart"
    """The task is stopped (with its ``SIGNAL`` warning) and started again at the new size."""

    ALL = (IN_PLACE, RESTART)


@dataclass(frozen=True, slots=True)
class Resize:
    """How a malleable task is shrunk or expanded: ``mode`` is ``in-place`` or ``restart``;
    ``signal`` names the signal sent after an in-place resize (``None`` for restart)."""

    mode: str
    signal: str | None = None


@dataclass(frozen=True, slots=True)
class TaskShape:
    """Another size a task may run at (``#METAQ SHAPE``): ``nodes`` whole nodes, or a share
    of one node (``cpus`` above 0, or ``gpu_share``), with ``gpus`` GPUs in all, for
    ``min_wc_time`` seconds. Every field is given, whatever the ``SHAPE`` line left to the
    header, so a shape is whole on its own."""

    nodes: int
    gpus: int
    cpus: int
    min_wc_time: float | None
    gpu_share: bool = False


@dataclass(frozen=True, slots=True)
class TaskSpec:
    """What a task script asks for, read from its ``#METAQ`` lines.

    ``nodes`` is the node count (the *maximum* for a malleable task) and ``min_nodes`` the
    smallest count it can run on (equal to ``nodes`` unless ``type`` is malleable). ``gpus`` is
    the total number of GPUs the task needs. ``min_wc_time`` is the wall clock, in seconds, the
    task needs at full size; ``None`` means the queue's default. ``priority``: higher runs first
    within a folder. ``setup``: seconds spent before useful work starts, paid again on every
    restart. ``retries``: how many times a failed run is tried again (``None``: the queue's
    default). ``notice`` ties an on-demand task to an advance notice. ``path`` is where the
    script was read from. ``cpus`` above 0 makes the task a *share* of one node: that many of
    its cores, beside other shares, with ``gpus`` of its GPUs; 0 (no ``CPUS``) keeps whole
    nodes, as METAQ did. ``gpu_share`` is METAQ's GPU-only task (``NODES 0`` with ``GPUS``): a
    share of one node with ``gpus`` GPUs and the cores that go with them there (the node's cores
    per GPU), chosen when it is offered; ``nodes`` is then 1. ``exclusive`` keeps whole nodes to
    the task (``EXCLUSIVE``: the default already, said out loud). ``after`` names the tasks
    (identities, arrays or globs) that must have finished before this one may start,
    ``after_any`` those that must have ended, whatever their outcome. ``array`` is the ``ARRAY``
    index list, as written, for a script that is to be queued once per index. ``header_only``
    (``HEADER_ONLY``) says that ``#METAQ`` lines below the first command are the script's own
    text (a heredoc that writes another task, say), which the parser then leaves alone rather
    than refusing them as directives written too late. ``retry_delay`` is ``RETRY_DELAY``:
    the wait after a first failure and the cap its doubling stops at (``None``: the queue's);
    ``requeue_on`` and ``soft_fail_on`` are the exit-code classes as written (codes, ``A-B``
    ranges, and ``timeout`` in ``requeue_on``; ``None``: the queue's, see
    :mod:`metaq_py.outcomes`); ``max_fails`` is an array's ``MAX_FAILS``; ``time_limit`` the
    seconds after which a running task is warned and stopped (``TIME_LIMIT``); ``mem`` the
    bytes of memory per node (``MEM``); ``creates`` the outputs (paths or globs in their last
    part, ``{index}`` allowed) whose presence makes the task done before it runs, unless
    ``force`` (``FORCE``, which ``metaq submit --force`` writes). ``shapes`` are
    the other sizes the task accepts (``SHAPE`` lines, in the order written): the policy picks,
    among the header's own shape and these, the one that starts soonest. ``lines`` maps
    each directive key given to its line number, for error messages; it takes no part in
    comparisons.
    """

    path: str
    nodes: int = 1
    min_nodes: int = 0
    gpus: int = 0
    min_wc_time: float | None = None
    project: str | None = None
    log: str | None = None
    machine: str | None = None
    type: Kind = Kind.RIGID
    priority: int = 0
    setup: float = 0.0
    checkpoint: Checkpoint | None = None
    signal: Signal | None = None
    notice: str | None = None
    retries: int | None = None
    resize: Resize | None = None
    cpus: int = 0
    gpu_share: bool = False
    exclusive: bool = False
    after: tuple[str, ...] = ()
    after_any: tuple[str, ...] = ()
    array: str | None = None
    shapes: tuple[TaskShape, ...] = ()
    header_only: bool = False
    retry_delay: tuple[float, float | None] | None = None
    requeue_on: tuple[str, ...] | None = None
    soft_fail_on: tuple[str, ...] | None = None
    max_fails: int | None = None
    time_limit: float | None = None
    mem: int | None = None
    creates: tuple[str, ...] = ()
    force: bool = False
    lines: tuple[tuple[str, int], ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.min_nodes == 0:
            default = 1 if self.type is Kind.MALLEABLE else self.nodes
            object.__setattr__(self, "min_nodes", default)

    def line_of(self, key: str) -> int | None:
        """The line the directive ``key`` was written on, if it was."""
        for k, n in self.lines:
            if k == key:
                return n
        return None

    def shape_line(self, index: int) -> int | None:
        """The line of shape ``index``'s ``SHAPE`` (0, the header's own, has none)."""
        found = [n for k, n in self.lines if k == "SHAPE"]
        return found[index - 1] if 0 < index <= len(found) else None

    @property
    def shape(self) -> TaskShape:
        """The header's own shape: shape 0 of :meth:`in_shape`."""
        return TaskShape(nodes=self.nodes, gpus=self.gpus, cpus=self.cpus,
                         min_wc_time=self.min_wc_time, gpu_share=self.gpu_share)

    def in_shape(self, index: int) -> TaskSpec:
        """The spec as it runs in its shape ``index``: 0 is the header's own, ``i`` the
        ``i``-th ``SHAPE`` line. The result has no other shapes: it is what one run asks for."""
        if index == 0:
            return self if not self.shapes else replace(self, shapes=())
        s = self.shapes[index - 1]
        return replace(self, nodes=s.nodes, min_nodes=0, gpus=s.gpus, cpus=s.cpus,
                       min_wc_time=s.min_wc_time, gpu_share=s.gpu_share, shapes=())
