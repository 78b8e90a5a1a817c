"""What the runner decides about one start of one task, as a value.

A :class:`LaunchSpec` holds everything :func:`~metaq_py.launch.process.launch` needs and
nothing it has to find out: the script, the concrete hosts and GPU ids the runner gave it,
which attempt this is, and where its output and its private files go.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

from metaq_py.errors import MetaqError
from metaq_py.program import Program

if TYPE_CHECKING:  # loaded only where a queue streams its output
    from metaq_py.queue.streams import StreamWriter

__all__ = ["LaunchError", "LaunchSpec"]


class LaunchError(MetaqError):
    """A task could not be started; ``str()`` is one sentence naming the task and the cause."""


_NAME = re.compile(r"^[^\s,]+$")
_REQUIRED_PATHS = ("script", "log", "rundir")


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchSpec:
    """One start of one task.

    ``script`` is the executable task script and ``task`` its id relative to the queue
    (``METAQ_TASK``). ``nodes`` are the host names it may use, ``gpus`` the device ids it may
    use on each of them: ``None`` leaves ``CUDA_VISIBLE_DEVICES`` as the batch job set it,
    while a tuple (even an empty one, which hides every GPU) sets it exactly; the runner
    passes a tuple on GPU allocations so that no task touches another's devices. ``cores``
    are the core ids of a share of a node (``METAQ_CPUS``; ``None`` for whole nodes), and
    ``bind`` pins a locally started script to them (see :mod:`metaq_py.launch.binding`; a
    wrapped SLURM step is always bound). ``attempt``
    counts from 1; ``resume`` says the task was interrupted before and should continue from
    its checkpoint.

    ``log`` is the task's own log (the runner picks a unique name); ``tee``, the ``#METAQ LOG``
    path, receives the same output when given. Both are appended to, so a resumed task adds
    to what its earlier attempts wrote. ``rundir`` is the task's private directory, kept
    across its attempts: it holds the checkpoint and resize files, and the hostfile unless
    ``shared_hostfile`` names one that tasks on the same hosts share (written by the runner
    beforehand, see :mod:`metaq_py.launch.hostfiles`; never for a task resized in place,
    whose hostfile the runner rewrites). It is made only when ``run_folder`` is set, which a
    task asks for with ``CHECKPOINT`` or ``RESIZE`` (its files live there), and which a
    wrapped step (its step file) or a hostfile of its own always sets; the checkpoint and
    resize variables are given only to a task that has one. The script starts in the
    runner's own directory.
    ``env`` adds variables on top of the runner's environment; the ``METAQ_*`` variables
    always win.

    ``program`` is what the runner checked of the task (:class:`~metaq_py.program.Program`):
    when given, its bytes are what starts, never ``script`` read again (which then only
    names it); a wrapped step checks the file it reads against its digest.

    ``srun_wrap`` starts the script itself as a one-task SLURM step on the first of its nodes
    instead of on the batch node; ``srun_args`` are extra options for that ``srun``.

    ``mpirun`` is the task's ready launch prefix, ``$METAQ_MPIRUN``
    (:mod:`metaq_py.launch.binding`); empty: none is set.

    ``mem`` is the task's ``MEM`` in bytes (``None``: it says none): its cgroup holds it to
    that where the kernel allows (:mod:`metaq_py.launch.memory`).
    """

    script: Path
    task: str
    nodes: tuple[str, ...]
    log: Path
    rundir: Path
    attempt: int = 1
    resume: bool = False
    gpus: tuple[str, ...] | None = None
    cores: tuple[int, ...] | None = None
    bind: bool = False
    tee: Path | None = None
    shared_hostfile: Path | None = None
    env: Mapping[str, str] = field(default_factory=dict, hash=False)
    srun_wrap: bool = False
    srun_args: tuple[str, ...] = ()
    mpirun: tuple[str, ...] = ()
    program: Program | None = field(default=None, compare=False, repr=False)
    run_folder: bool = True
    streams: StreamWriter | None = field(default=None, compare=False, repr=False)
    """The batch job's stream file: with it (and no ``tee``), stdout and stderr go there as
    frames (:mod:`metaq_py.launch.streamcopy`), and ``log`` is never made."""
    mem: int | None = None

    def __post_init__(self) -> None:
        if self.srun_wrap or self.shared_hostfile is None:
            object.__setattr__(self, "run_folder", True)  # its step or hostfile go there
        # Accept plain strings for paths and lists for tuples, but store one canonical form.
        for name in ("script", "log", "rundir", "tee", "shared_hostfile"):
            value = getattr(self, name)
            if not isinstance(value, Path) and (value is not None or name in _REQUIRED_PATHS):
                object.__setattr__(self, name, Path(value))
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "srun_args", tuple(self.srun_args))
        object.__setattr__(self, "mpirun", tuple(self.mpirun))
        object.__setattr__(self, "env", MappingProxyType(dict(self.env)))
        if self.gpus is not None:
            object.__setattr__(self, "gpus", tuple(str(g) for g in self.gpus))

        who = f"task {self.task!r}"
        if not self.task:
            raise LaunchError("a task to launch has an empty task id")
        if not self.nodes:
            raise LaunchError(f"{who} was given no nodes")
        bad = [n for n in self.nodes if not isinstance(n, str) or not _NAME.match(n)]
        if bad:
            raise LaunchError(f"{who} was given the node name {bad[0]!r}, which is not a host")
        if len(set(self.nodes)) != len(self.nodes):
            raise LaunchError(f"{who} was given the same node twice in {list(self.nodes)}")
        if self.gpus is not None:
            bad = [g for g in self.gpus if not _NAME.match(g)]
            if bad:
                raise LaunchError(f"{who} was given the GPU id {bad[0]!r}, which is not a device")
        if self.cores is not None:
            object.__setattr__(self, "cores", tuple(self.cores))
            if not self.cores or len(self.nodes) != 1 or any(
                    isinstance(c, bool) or not isinstance(c, int) or c < 0 for c in self.cores):
                raise LaunchError(f"{who} was given the cores {list(self.cores)}; a share of a "
                                  f"node needs one node and core ids of 0 or more")
        if self.bind and self.cores is None:
            raise LaunchError(f"{who} is to be bound to its cores but was given none")
        if any(not w or any(c.isspace() for c in w) for w in self.mpirun):
            raise LaunchError(f"{who} has the MPI launch prefix {list(self.mpirun)}, whose "
                              f"words a shell would split apart")
        if self.attempt < 1:
            raise LaunchError(f"{who} has attempt number {self.attempt}; attempts count from 1")
        for key, value in self.env.items():
            if not key or "=" in key or "\0" in key or "\0" in str(value):
                raise LaunchError(f"{who} has the environment variable {key!r}, which is invalid")

    @property
    def hostfile(self) -> Path:
        """The file listing the task's hosts, one per line (``METAQ_HOSTFILE``): the shared
        one when given, else ``hostfile`` in the run folder."""
        if self.shared_hostfile is not None:
            return self.shared_hostfile
        return self.rundir / "hostfile"

    @property
    def checkpoint_file(self) -> Path:
        """The file a task touches after each checkpoint (``METAQ_CHECKPOINT_FILE``)."""
        return self.rundir / "checkpoint"

    @property
    def step_file(self) -> Path:
        """Where a wrapped task records its SLURM step (``JOBID.STEPID``) once it runs."""
        return self.rundir / "step"

    @property
    def resize_file(self) -> Path:
        """Where the runner writes a malleable task's new node list (``METAQ_RESIZE_FILE``)."""
        return self.rundir / "resize"
