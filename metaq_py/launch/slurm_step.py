"""Making a bare ``srun`` inside a task use the task's nodes, not the whole allocation.

``srun`` reads ``-N`` from ``SLURM_NNODES``/``SLURM_JOB_NUM_NODES`` and ``-n`` from
``SLURM_NTASKS``/``SLURM_NPROCS``. In a batch job these describe the whole allocation, so a
task's ``srun --nodelist=$METAQ_NODELIST app`` would silently grow to every node of the job
(seen on SLURM 22.05: four nodes instead of the two listed). Inside a one-task step, as in the
``srun_wrap`` mode, they say one node and one task, and the same command shrinks to a single
process. :func:`slurm_task_env` sets the node count to the task's and drops the task count, so
``srun`` runs one task per node of the task unless the script says otherwise.

Inside a wrapped step SLURM sets the step's variables after ``srun`` starts, so there the fix
is applied by ``python -m metaq_py.launch`` (:mod:`metaq_py.launch.__main__`), just before the
script is executed. That command also writes the step's id (``JOBID.STEPID``) to the task's
step file, for :func:`signal_step`.

**Signals for a wrapped task.** ``srun`` forwards most signals to the step's tasks, but not
SIGTERM, SIGQUIT, SIGHUP and SIGINT: on the first three it kills the tasks with SIGKILL at
once ("forcing job termination"), and a single SIGINT only prints their status. A graceful
stop with one of those therefore goes through ``scancel --signal=SIG JOBID.STEPID``, which
delivers the signal itself to the script on its node (:data:`SRUN_INTERCEPTS`).
"""

from __future__ import annotations

import re
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path

from metaq_py.queue.disk.fileio import read_regular

__all__ = ["SRUN_INTERCEPTS", "read_step", "signal_step", "slurm_task_env"]

SRUN_INTERCEPTS = frozenset({signal.SIGTERM, signal.SIGQUIT, signal.SIGHUP, signal.SIGINT})
"""Signals ``srun`` does not pass on unchanged to its tasks."""

_NODE_COUNT = ("SLURM_NNODES", "SLURM_JOB_NUM_NODES")
_TASK_COUNT = ("SLURM_NTASKS", "SLURM_NPROCS")


def slurm_task_env(env: Mapping[str, str], nnodes: int) -> dict[str, str]:
    """``env`` with SLURM's node count set to ``nnodes`` and its task count removed."""
    fixed = {k: v for k, v in env.items() if k not in _TASK_COUNT}
    fixed.update(dict.fromkeys(_NODE_COUNT, str(nnodes)))
    return fixed


def read_step(step_file: Path) -> str | None:
    """The ``JOBID.STEPID`` a wrapped task recorded, or ``None`` if it has not started yet."""
    try:
        step = read_regular(step_file, limit=256)[0].decode("ascii", "replace").strip()
    except OSError:
        return None
    return step if re.fullmatch(r"[0-9]+(?:_[0-9]+)?\.[0-9]+", step) else None


def signal_step(step: str, sig: int, *, scancel: str = "scancel") -> bool:
    """Ask SLURM to deliver ``sig`` to the tasks of step ``step``; ``False`` if ``scancel``
    could not be run at all.

    ``scancel``'s exit code is not used: SLURM 22.05 delivers the signal to a step and still
    exits with 225 ("Invalid job id specified"). A step that has already ended ignores it.
    """
    try:
        subprocess.run(
            [scancel, f"--signal={signal.Signals(sig).name.removeprefix('SIG')}", step],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return True
