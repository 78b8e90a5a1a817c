"""Choosing the batch adapter for the job the runner finds itself in.

``SLURM_JOB_ID`` in the environment means SLURM, ``PBS_JOBID`` means PBS, and neither means a
local run; the ``system`` override forces a choice. SLURM wins when both are set, because a
PBS-to-SLURM wrapper (as some sites provide) sets PBS names on top of a SLURM job.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping

from metaq_py.batch.base import BatchOverrides, BatchSystem, Clock
from metaq_py.batch.local import LocalBatch
from metaq_py.batch.pbs import PbsBatch
from metaq_py.batch.slurm import SlurmBatch

__all__ = ["detect_batch", "detect_system"]

_ADAPTERS: dict[str, type[BatchSystem]] = {
    "slurm": SlurmBatch,
    "pbs": PbsBatch,
    "local": LocalBatch,
}


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
    return _ADAPTERS[system](env=env, overrides=overrides, clock=clock)
