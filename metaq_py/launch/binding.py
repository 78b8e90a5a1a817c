"""Binding a share of a node to its cores: which CPUs its processes may run on.

A share's cores (:attr:`LaunchSpec.cores <metaq_py.launch.spec.LaunchSpec.cores>`) are
numbered ``0 ..`` among the CPUs the batch job holds on the node, in ascending order of the
operating system's CPU ids: on a node the job holds whole (what metaq's allocations normally
are) they are the CPU ids themselves.

- **Local launches** (the script runs on this machine): the CPUs are those this runner may use
  (``os.sched_getaffinity``). The script is pinned the moment it has started
  (:func:`pin_tree`): every thread of it, then whatever it forked before that, top down, so
  that a process forked after its parent's pin inherits it; with no code run in the child and
  no extra process. Pinning the launching thread for the ``fork`` instead (as before) made the
  kernel move the runner's loop to the share's core and back at every start, and
  wait for that core each time: 0.4 ms a start on the 2-core development machine, where the
  tasks ran on those same cores. A pretend node with more cores than this machine is not bound
  (the runner says so once).
- **SLURM steps** (``srun_wrap``): ``srun --cpus-per-task=N --cpu-bind=mask_cpu:MASK``
  (:func:`srun_binding`) asks SLURM to bind the step, which it does where its task plugin
  binds (``task/affinity``, ``task/cgroup``); with ``task/none`` it only warns ("cluster
  configuration lacks support for cpu binding"). So the wrapper in the step
  (``python -m metaq_py.launch``) binds the script itself before ``exec`` (:func:`bind_here`),
  unless SLURM already narrowed the step to as many CPUs as the share has.

**MPI ranks** (``$METAQ_MPIRUN``): a ready launch prefix for a task's own nodes, ranks and
cores.

A task script writes ``$METAQ_MPIRUN ./prop`` and its ranks land on exactly the nodes the runner
gave it, so many per node, each bound to its own cores, whatever the site's launcher. The
launcher is named in ``metaq.yaml`` (``mpi: {launcher: ..., executable: ..., args: [...]}``)
or detected (:func:`detect_launcher`). ``launcher`` is the kind, which says how the line is
written; ``executable`` is the program the line starts when it is not the kind's own name on
``PATH`` (Debian installs Open MPI's as ``mpirun.openmpi`` beside MPICH's, and ``mpirun`` is
whichever ``update-alternatives`` chose); ``args`` are put in right after it (``--mpi=pmi2``
where SLURM's default MPI plugin is ``none``, a site's account options, ...).

**Ranks and cores.** A task gets one rank per GPU on each node when it was given GPUs, else one
rank per core: its share's cores (``METAQ_CPUS``), or all the node's cores for a whole node.
The cores of a node are dealt out in order, as many to each rank (``rank_cpus``); a rank of a
whole node of 64 cores and 4 GPUs gets 16 neighbouring cores. Core ids are numbered ``0 ..``
among the CPUs the batch job holds on the node, as for shares above.

The line of each launcher, for a task on ``n1,n2`` with 2 ranks a node on cores 0 and 1:

``srun``
    ``srun --exact --nodelist=n1,n2 --nodes=2 --ntasks=4 --ntasks-per-node=2
    --cpus-per-task=1 --cpu-bind=mask_cpu:0x1,0x2 --kill-on-bad-exit=1 PYTHON -m
    metaq_py.launch.rank 0,1``. ``--exact`` gives the step only its own CPUs, so that two
    tasks' steps run side by side; ``--kill-on-bad-exit`` ends the whole step when one rank
    fails, so the others do not wait for it for ever. SLURM binds with ``--cpu-bind`` where its
    task plugin binds (``task/affinity``, ``task/cgroup``); with ``task/none`` it only warns,
    so each rank goes through :mod:`metaq_py.launch.rank`, which binds it by its
    ``SLURM_LOCALID`` (and does nothing where SLURM bound it already). Inside a task that is
    itself a step (``metaq run --srun``) the line adds ``--overlap``.
``mpiexec`` (MPICH's Hydra)
    ``mpiexec -hosts n1,n2 -n 4 -ppn 2 -bind-to user:0,1`` (``user:0+1,2+3`` for two
    cores a rank). Inside a SLURM job Hydra starts its proxies with ``srun`` itself; on a
    local pretend cluster the line adds ``-launcher fork``. MPICH 4.0's Hydra, over SLURM,
    does not end the other ranks when one rank exits alone (the task then runs on until its
    ranks end or it is stopped): where that matters, prefer ``srun``.
``mpirun`` (Open MPI)
    ``mpirun --mca ras ^slurm,tm --mca plm_slurm_args --nodelist=n1,n2 --host n1:2,n2:2
    -np 4 --map-by ppr:2:node --bind-to none PYTHON -m metaq_py.launch.rank 0,1``. Open MPI
    starts its daemons on the nodes with ``srun`` inside a SLURM job (``tm`` under PBS,
    ``ssh`` elsewhere). It would count its slots on each node from the batch system's
    allocation (``SLURM_TASKS_PER_NODE``, one a node for ``sbatch -N 4``) and refuse two ranks
    there, ``--oversubscribe`` or not; with ``--mca ras ^slurm,tm`` it reads no allocation and
    the line's ``--host n1:2`` is the whole truth, which it is: metaq shares the allocation
    out. Its ``srun`` for the daemons then names no node (it takes the hosts for the whole
    allocation), and SLURM would put them on any two nodes of the job, another task's
    included (seen): ``plm_slurm_args`` adds the task's ``--nodelist`` to it. Open MPI
    4.1's ``--cpu-set`` binds every rank to the whole set, ``--bind-to core``
    notwithstanding (seen with Debian's 4.1.4), so the ranks bind themselves through
    :mod:`metaq_py.launch.rank` by ``OMPI_COMM_WORLD_LOCAL_RANK``, as under ``srun``, and
    ``--bind-to none`` keeps Open MPI from binding them first. Open MPI ends the other ranks
    when one exits alone. A local pretend cluster's node names name no machine: Open MPI
    reaches them only where ``ssh n1`` does.
``aprun`` (Cray ALPS)
    ``aprun -L n1,n2 -n 4 -N 2 -d 1 -cc 0:1`` (``-cc 0-1:2-3`` for two cores a rank; ALPS
    names nodes by their numeric ``nid``, which is what its batch job lists).
``jsrun`` (IBM LSF, Summit and Sierra)
    ``jsrun --nrs 4 --rs_per_host 2 --tasks_per_rs 1 --cpu_per_rs 1 --gpu_per_rs G
    --bind packed:1``. ``jsrun`` places resource sets on the job's hosts itself and takes no
    host list: a task shares its batch job with others only through an ERF file, which metaq
    does not write, so on an LSF machine give each batch job one multi-node task at a time.

METAQ's habit, ``srun -N $METAQ_NNODES --nodelist=$METAQ_NODELIST ...`` written in the
script, keeps working beside it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from metaq_py.launch.spec import LaunchError
from metaq_py.ranges import cpu_list, machine_cpus

__all__ = ["PIN_MOST", "MpiLayout", "bind_here", "cpu_mask", "detect_launcher",
           "mpirun_line", "other_kind", "pin_tree", "rank_cpus", "srun_binding",
           "which_launcher"]


def cpu_mask(cpus: Sequence[int]) -> str:
    """The hexadecimal mask of ``cpus`` as SLURM's ``mask_cpu`` reads it (``0x...``)."""
    mask = 0
    for c in cpus:
        mask |= 1 << c
    return f"0x{mask:x}"


def srun_binding(cores: Sequence[int]) -> list[str]:
    """The ``srun`` options that give a one-task step a share's ``cores``."""
    return [f"--cpus-per-task={len(cores)}", f"--cpu-bind=mask_cpu:{cpu_mask(cores)}"]


PIN_MOST = 4096
"""The most threads and processes :func:`pin_tree` pins one by one for one start."""


def pin_tree(pid: int, cpus: Sequence[int]) -> bool:
    """Pin process ``pid`` (just started) to ``cpus``, with whatever it started before the pin;
    whether ``pid`` had no child then (``False`` also when that cannot be told). Right after
    its move into its cgroup, that is :func:`~metaq_py.launch.cgroup.born_inside`'s answer,
    read here on the way instead of once more.

    Each process's threads are pinned until listing them finds no new one (a thread inherits
    the mask of the thread that makes it), and only then are its children read
    (``/proc/PID/task/TID/children``) and pinned the same way: a child forked after its
    parent's pin inherits it, one forked before is in the list. A process or thread gone
    meanwhile is skipped; any other refusal of the kernel raises ``OSError``.

    A script that keeps making threads or processes as fast as they are listed is followed
    for :data:`PIN_MOST` of them at most, so that it cannot hold the runner here; what it
    makes from then on is made by pinned threads nearly always, and inherits the mask."""
    todo = [pid]
    budget = PIN_MOST
    alone = False
    while todo and budget > 0:
        proc = todo.pop()
        try:
            os.sched_setaffinity(proc, cpus)  # its main thread: most have no other
        except ProcessLookupError:
            continue
        done = {proc}
        listed = False  # every thread of proc listed (none new since the last listing)
        while budget > 0:
            try:
                threads = {int(t) for t in os.listdir(f"/proc/{proc}/task")}
            except OSError:  # gone (or no /proc): nothing more to pin here
                break
            new = threads - done
            if not new:
                listed = True
                break
            for tid in new:
                with contextlib.suppress(ProcessLookupError):
                    os.sched_setaffinity(tid, cpus)
            done |= new
            budget -= len(new)
        budget -= 1
        childless = listed
        for tid in done:
            try:
                with open(f"/proc/{proc}/task/{tid}/children", "rb") as f:
                    children = f.read().split()
            except OSError:  # gone, or a kernel without the children file
                childless = False
                continue
            childless = childless and not children
            todo.extend(int(child) for child in children)
        if proc == pid:
            alone = childless
    return alone


def bind_here(cores: Sequence[int]) -> str | None:
    """Inside a wrapped SLURM step: bind this process to the share's ``cores`` (numbered
    among the CPUs the step may use). Returns why it did not, or ``None`` when bound (or
    when SLURM already bound the step to as many CPUs as the share has)."""
    allowed = machine_cpus()
    if len(allowed) == len(cores):
        return None  # SLURM bound the step itself (task/affinity or task/cgroup)
    if max(cores) >= len(allowed):
        return (f"the cores {cpu_list(cores)} are not all among the {len(allowed)} CPUs this "
                f"step may use ({cpu_list(allowed)})")
    try:
        os.sched_setaffinity(0, [allowed[c] for c in cores])
    except OSError as e:
        return f"cannot bind to the cores {cpu_list(cores)}: {e.strerror}"
    return None


@dataclass(frozen=True, slots=True)
class MpiLayout:
    """Where one task's ranks go: ``nodes``, ``ranks_per_node`` on each, and the ``cpus`` of
    each node the task may use (the same core ids on every node), dealt to its ranks;
    ``gpus`` per node (0: none)."""

    nodes: tuple[str, ...]
    ranks_per_node: int
    cpus: tuple[int, ...]
    gpus: int = 0

    @property
    def ranks(self) -> int:
        return self.ranks_per_node * len(self.nodes)


def rank_cpus(cpus: Sequence[int], ranks_per_node: int) -> list[tuple[int, ...]]:
    """The cores of each rank of a node: ``cpus`` dealt out in order, as many to each rank
    (the rest, when they do not divide, to no rank); every rank shares all of them when there
    are more ranks than cores."""
    if ranks_per_node < 1:
        raise ValueError(f"a node needs at least one rank, not {ranks_per_node}")
    each = len(cpus) // ranks_per_node
    if each == 0:
        return [tuple(cpus)] * ranks_per_node
    return [tuple(cpus[i * each:(i + 1) * each]) for i in range(ranks_per_node)]


def mpirun_line(launcher: str, layout: MpiLayout, *, args: Sequence[str] = (),
                executable: str | None = None, in_step: bool = False, local: bool = False,
                python: str = sys.executable) -> list[str]:
    """The words of ``$METAQ_MPIRUN`` for the kind of ``launcher`` and ``layout`` (see the
    module's text); the line starts ``executable`` (a name on ``PATH`` or a path; by default
    the launcher's own name) and ``args`` follow it. ``in_step``: the script is itself a SLURM
    step (``metaq run --srun``), whose own steps must overlap it. ``local``: the nodes are
    a local pretend cluster's, all this machine, which Hydra reaches with ``-launcher fork``
    (its host names name no machine)."""
    per = rank_cpus(layout.cpus, layout.ranks_per_node)
    n, ppn, depth = str(layout.ranks), str(layout.ranks_per_node), len(per[0])
    nodes = ",".join(layout.nodes)
    start = [executable or launcher, *args]
    rank = [python, "-m", "metaq_py.launch.rank", _joined(per, "+")]
    if launcher == "srun":
        return [*start, "--exact", *(["--overlap"] if in_step else []),
                f"--nodelist={nodes}", f"--nodes={len(layout.nodes)}", f"--ntasks={n}",
                f"--ntasks-per-node={ppn}", f"--cpus-per-task={depth}",
                f"--cpu-bind=mask_cpu:{','.join(cpu_mask(c) for c in per)}",
                "--kill-on-bad-exit=1", *rank]
    if launcher == "mpiexec":
        fork = ["-launcher", "fork"] if local else []
        return [start[0], *fork, *args, "-hosts", nodes, "-n", n, "-ppn", ppn,
                "-bind-to", f"user:{_joined(per, '+')}"]
    if launcher == "mpirun":
        hosts = ",".join(f"{h}:{ppn}" for h in layout.nodes)
        return [*start, "--mca", "ras", "^slurm,tm", "--mca", "plm_slurm_args",
                f"--nodelist={nodes}", "--host", hosts, "-np", n,
                "--map-by", f"ppr:{ppn}:node", "--bind-to", "none", *rank]
    if launcher == "aprun":
        return [*start, "-L", nodes, "-n", n, "-N", ppn, "-d", str(depth),
                "-cc", ":".join(f"{c[0]}-{c[-1]}" if len(c) > 1 else str(c[0]) for c in per)]
    if launcher == "jsrun":
        return [*start, "--nrs", n, "--rs_per_host", ppn, "--tasks_per_rs", "1",
                "--cpu_per_rs", str(depth),
                "--gpu_per_rs", str(layout.gpus // layout.ranks_per_node),
                "--bind", f"packed:{depth}"]
    raise LaunchError(f"{launcher!r} is not a launcher metaq knows; the known launchers are "
                      f"{', '.join(_launchers())}")


def _launchers() -> tuple[str, ...]:
    """The launchers ``mpi.launcher`` may name, loaded only when a message needs them (the
    settings' module loads YAML, which a wrapped step's start has no use for)."""
    from metaq_py.queue.settings.config import MPI_LAUNCHERS

    return MPI_LAUNCHERS


def _joined(per: list[tuple[int, ...]], within: str) -> str:
    """Each rank's cores joined by ``within``, the ranks by commas (``0+1,2+3``)."""
    return ",".join(within.join(map(str, c)) for c in per)


def detect_launcher(system: str, *, which: Callable[[str], str | None] = shutil.which
                    ) -> str | None:
    """The launcher of a batch job of ``system`` when ``metaq.yaml`` names none: ``srun`` in
    a SLURM job, else the first of ``mpiexec``, ``mpirun``, ``aprun`` and ``jsrun`` installed;
    ``None`` when there is none."""
    order = ("srun",) if system == "slurm" else ()
    for name in (*order, "mpiexec", "mpirun", "aprun", "jsrun"):
        if which(name) is not None:
            return name
    return None


def which_launcher(launcher: str, executable: str | None = None, *,
                   which: Callable[[str], str | None] = shutil.which) -> str | None:
    """Why ``launcher`` (started as ``executable``, by default its own name) cannot be used
    here (one sentence), or ``None`` when it is installed."""
    if launcher not in _launchers():
        return (f"metaq.yaml names the MPI launcher {launcher!r}, which metaq does not know "
                f"(known: {', '.join(_launchers())})")
    program = executable or launcher
    if which(program) is None:
        named = repr(launcher) if program == launcher else f"{launcher!r} as {program!r}"
        where = "not an executable file" if "/" in program else "not on PATH"
        return (f"metaq.yaml names the MPI launcher {named}, which is not installed on "
                f"this node ({where})")
    return None


_KINDS = {"mpirun": ("Open MPI's mpirun", ("(Open MPI)", "(OpenRTE)"), "mpirun.openmpi"),
          "mpiexec": ("MPICH's Hydra", ("HYDRA build details",), "mpiexec.mpich")}
"""The two launchers that go by the same names (Debian installs MPICH's and Open MPI's each
as ``mpirun`` and ``mpiexec``, and ``update-alternatives`` says which the plain names are):
each one's name for people, what its ``--version`` says, and its own name on Debian."""


def _version(program: str) -> str:
    """What ``program --version`` says (its output and errors), or ``""`` when it cannot run."""
    try:
        done = subprocess.run([program, "--version"], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout + done.stderr


def other_kind(launcher: str, program: str, *,
               version: Callable[[str], str] = _version) -> str | None:
    """Why ``program`` cannot serve as ``launcher`` (one sentence) when its ``--version`` says
    it is the other of :data:`_KINDS`, whose line it would not read; ``None`` otherwise, a
    launcher it cannot tell included (only a sure mismatch is refused)."""
    if launcher not in _KINDS:
        return None
    said = version(program)
    mine, signs, own = _KINDS[launcher]
    if any(sign in said for sign in signs):
        return None
    for kind, (name, others, _) in _KINDS.items():
        if kind != launcher and any(sign in said for sign in others):
            return (f"metaq.yaml names the MPI launcher {launcher!r} ({mine}), but {program} "
                    f"here is {name}; name {mine}'s program with mpi.executable (on Debian: "
                    f"{own})")
    return None
