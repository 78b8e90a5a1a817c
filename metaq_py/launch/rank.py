"""``python -m metaq_py.launch.rank CPUS PROGRAM [ARG...]``: bind one MPI rank, then run it.

The last words of ``$METAQ_MPIRUN`` over ``srun`` and Open MPI's ``mpirun``
(:mod:`metaq_py.launch.binding`). ``CPUS``
lists each local rank's cores, ranks by commas and a rank's cores by ``+`` (``0+1,2+3``),
numbered among the CPUs this step may use on its node. The rank finds its place on the node
(the local rank Open MPI, Hydra or PALS give, else ``SLURM_LOCALID``), binds itself to its
cores where the launcher did not (SLURM's ``task/none`` only warns), and becomes
``PROGRAM``. A rank the launcher already narrowed to as many CPUs is left alone.

``python -m metaq_py.launch.rank --unavailable LAUNCHER`` is ``$METAQ_MPIRUN`` when the
launcher ``metaq.yaml`` names is not installed, and ``--other-kind LAUNCHER PROGRAM`` when
``PROGRAM`` is the other MPI's launcher of that name (MPICH's Hydra for Open MPI's ``mpirun``,
or the reverse): it says so in the task's log and fails (exit 127), so that
``$METAQ_MPIRUN ./prop`` never runs ``./prop`` as one lone rank.
"""

from __future__ import annotations

import os
import sys

from metaq_py.ranges import cpu_list, machine_cpus

LOCAL_RANK = ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_LOCAL_RANK",
              "PALS_LOCAL_RANKID", "SLURM_LOCALID")
"""Where launchers say which rank of its node a process is, in the order they are read.
``SLURM_LOCALID`` comes last: a launcher whose daemons ``srun`` started (Open MPI's ``orted``,
Hydra's proxies) hands its ranks the daemon's environment, where it is the daemon's place
(0 on every node), and sets its own variable beside it."""


def parse_ranks(text: str) -> list[tuple[int, ...]]:
    """``0+1,2+3`` as each local rank's cores; ``ValueError`` names what is wrong."""
    try:
        per = [tuple(int(c) for c in rank.split("+")) for rank in text.split(",")]
    except ValueError:
        raise ValueError(f"{text!r} is not a list of cores per rank such as 0+1,2+3") from None
    if any(c < 0 for rank in per for c in rank):
        raise ValueError(f"{text!r} names a negative core")
    return per


def bind_rank(per: list[tuple[int, ...]], env: dict[str, str] | os._Environ[str]) -> str | None:
    """Bind this process to its local rank's cores; why it did not, or ``None``."""
    local = next((env[k] for k in LOCAL_RANK if env.get(k, "").isdigit()), None)
    if local is None:
        return f"no local rank in the environment ({', '.join(LOCAL_RANK)})"
    if int(local) >= len(per):
        return f"local rank {local} has no cores in {len(per)} ranks' list"
    mine = per[int(local)]
    allowed = machine_cpus()
    if len(allowed) == len(mine):
        return None  # the launcher bound it already
    if max(mine) >= len(allowed):
        return (f"the cores {cpu_list(mine)} are not all among the {len(allowed)} CPUs this "
                f"rank may use ({cpu_list(allowed)})")
    try:
        os.sched_setaffinity(0, [allowed[c] for c in mine])
    except OSError as e:
        return f"cannot bind to the cores {cpu_list(mine)}: {e.strerror}"
    return None


def main(argv: list[str]) -> int:
    """Bind, then execute ``argv[1:]``; returns only if that fails."""
    if len(argv) >= 2 and argv[0] == "--unavailable":
        print(f"metaq: metaq.yaml names the MPI launcher {argv[1]!r}, which is not installed "
              f"on the batch node, so $METAQ_MPIRUN cannot start this task's ranks",
              file=sys.stderr)
        return 127
    if len(argv) >= 3 and argv[0] == "--other-kind":
        print(f"metaq: metaq.yaml names the MPI launcher {argv[1]!r}, but {argv[2]} on the "
              f"batch node is another MPI's launcher, so $METAQ_MPIRUN cannot start this "
              f"task's ranks (name the launcher's own program with mpi.executable)",
              file=sys.stderr)
        return 127
    if len(argv) < 2:
        print("usage: python -m metaq_py.launch.rank CPUS PROGRAM [ARG...]", file=sys.stderr)
        return 2
    try:
        why = bind_rank(parse_ranks(argv[0]), os.environ)
    except ValueError as e:
        why = str(e)
    if why is not None:
        print(f"metaq: a rank of {os.environ.get('METAQ_TASK', 'this task')} is not bound: "
              f"{why}", file=sys.stderr)
    try:
        os.execvp(argv[1], argv[1:])
    except OSError as e:
        host = os.environ.get("SLURMD_NODENAME", "this node")
        print(f"metaq: cannot run {argv[1]} on {host}: {e.strerror}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
