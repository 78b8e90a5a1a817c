"""``python -m metaq_py.launch STEP_FILE SCRIPT``: the first command in a wrapped task's step.

In ``srun_wrap`` mode the runner starts ``srun ... python -m metaq_py.launch STEP_FILE
SCRIPT``. Here, on the task's first node and inside the one-task step, SLURM has just set the
step's node and task counts (one of each). This records the step's id in ``STEP_FILE`` (so
that the runner can signal the script through ``scancel``), sets the counts to the task's
(``METAQ_NNODES`` nodes, see :mod:`metaq_py.launch.slurm_step`), binds a share of a node to
its cores (``METAQ_CPUS``) where SLURM did not (:func:`~metaq_py.launch.binding.bind_here`)
and replaces itself with the script.
"""

from __future__ import annotations

import os
import sys

from metaq_py.directives import SCRIPT_LIMIT
from metaq_py.launch.binding import bind_here
from metaq_py.launch.checked import PROGRAM_FD, PROGRAM_PATH, verified
from metaq_py.launch.slurm_step import slurm_task_env
from metaq_py.queue.disk.fileio import replace_file
from metaq_py.ranges import parse_cpu_list


def main(argv: list[str]) -> int:
    """Record the step, then execute the script with the task's SLURM counts; returns only
    if that fails."""
    digest = None
    if argv[:1] == ["--sha256"] and len(argv) > 1:
        digest, argv = argv[1], argv[2:]
    if len(argv) < 2:
        print("usage: python -m metaq_py.launch [--sha256 HEX] STEP_FILE SCRIPT [ARG...]",
              file=sys.stderr)
        return 2
    step_file, argv = argv[0], argv[1:]
    try:
        nnodes = int(os.environ["METAQ_NNODES"])
    except (KeyError, ValueError):
        print("python -m metaq_py.launch: METAQ_NNODES is not a node count", file=sys.stderr)
        return 2
    step = f"{os.environ.get('SLURM_JOB_ID', '')}.{os.environ.get('SLURM_STEP_ID', '')}"
    cpus = os.environ.get("METAQ_CPUS")
    if cpus:
        try:
            why = bind_here(parse_cpu_list(cpus))
        except ValueError as e:
            why = str(e)
        if why is not None:
            print(f"metaq: the share {os.environ.get('METAQ_TASK', '')} is not bound: {why}",
                  file=sys.stderr)
    try:
        # The run folder is the runner's alone; still, never through a planted link.
        replace_file(step_file, (step + "\n").encode())
        path = argv[0]
        if digest is not None:
            # The script runs only as the runner checked it (metaq_py.launch.checked).
            fd = verified(argv[0], digest, limit=SCRIPT_LIMIT)
            if fd != PROGRAM_FD:
                os.dup2(fd, PROGRAM_FD)  # inheritable there
            else:
                os.set_inheritable(fd, True)
            path = PROGRAM_PATH
        os.execve(path, argv, slurm_task_env(os.environ, nnodes))
    except OSError as e:
        host = os.environ.get("SLURMD_NODENAME", "this node")
        print(f"metaq: cannot run {argv[0]} on {host}: {e.strerror}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
