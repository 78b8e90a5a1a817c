"""Choosing the batch adapter for the job the runner finds itself in.

``SLURM_JOB_ID`` in the environment means SLURM, ``PBS_JOBID`` means PBS, and neither means a
local run; the ``system`` override forces a choice. SLURM wins when both are set, because a
PBS-to-SLURM wrapper (as some sites provide) sets PBS names on top of a SLURM job.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from importlib import import_module

from metaq_py.batch.base import BatchOverrides, BatchSystem, Clock

__all__ = ["adapter", "detect_batch", "detect_system"]

_ADAPTERS = {"slurm": "SlurmBatch", "pbs": "PbsBatch", "local": "LocalBatch"}
"""Each system's adapter class, in the module of the system's name: only the one a job uses
is loaded."""


def adapter(system: str) -> type[BatchSystem]:
    """The adapter class of ``system`` (``slurm``, ``pbs`` or ``local``)."""
    cls: type[BatchSystem] = getattr(import_module(f"metaq_py.batch.{system}"),
                                     _ADAPTERS[system])
    return cls


def detect_system(env: Mapping[str, str]) -> str:
    """The name of the batch system whose job this environment belongs to."""
    if env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID"):
        return "slurm"
    if env.get("PBS_JOBID"):
        return "pbs"
    return "local"


def detect_batch(
    *,
    overrides: BatchOverrides | None = None,
    env: Mapping[str, str] | None = None,
    clock: Clock = time.time,
) -> BatchSystem:
    """The adapter for this job: the ``system`` override if given, else the detected one."""
    overrides = overrides or BatchOverrides()
    env = os.environ if env is None else env
    system = overrides.system or detect_system(env)
    return adapter(system)(env=env, overrides=overrides, clock=clock)
