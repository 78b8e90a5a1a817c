"""The two words of the hybrid workload that every layer shares: a task's :class:`Kind` and an
advance :class:`Notice` (Fan et al., "Hybrid Workload Scheduling on HPC Systems", IPDPS 2022).

They sit on the ground floor, beside the errors and the durations, so that reading a task's
header, a notice file or the event log never loads the scheduler: the policy core
(:mod:`metaq_py.policy.model`) takes them from here, and so do the task format, the queue and
the simulator. Plain values, importing nothing but the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["Kind", "Notice"]


class Kind(str, Enum):
    """How a job reacts to the on-demand layer."""

    RIGID = "rigid"
    """Fixed size. Checkpoints periodically; preemption loses the work since the last one."""
    MALLEABLE = "malleable"
    """Any size between ``min_size`` and ``size``; may be shrunk and expanded while running."""
    ONDEMAND = "ondemand"
    """Time-critical: must start at once. Never preempted."""

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Notice:
    """An advance notice: ``nodes`` will be needed from about ``arrival`` for ``walltime``.

    ``issued`` is when the notice was given; several notices are served earliest-issued first.
    The on-demand job that redeems a notice names it in
    :attr:`Job.notice <metaq_py.policy.model.Job.notice>`.
    """

    id: str
    nodes: int
    arrival: float
    walltime: float
    issued: float
