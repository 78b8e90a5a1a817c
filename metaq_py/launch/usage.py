"""What a task's processes used: CPU time (user and system) and peak memory.

Two sources, each named in :attr:`Usage.source`:

- ``wait4``: the kernel's resource usage of the task's script, returned when the launcher
  reaps it (``os.wait4``). It counts the script and every descendant that was waited for
  (a shell waits for its commands; ``mpirun`` and ``srun`` wait for theirs): the CPU time is
  their sum, the peak memory the largest resident set of any one of them (``ru_maxrss``, as
  the kernel keeps it; it is not a sum). A process left running in the background and killed
  when the script ends was never waited for by it, so its CPU time is not counted.
- ``sacct``: a SLURM step's figures, from SLURM's accounting (see
  :mod:`metaq_py.launch.step_usage`), for tasks started in steps of their own (``--srun``),
  whose script runs on the compute node where the runner's ``wait4`` cannot see it.
"""

from __future__ import annotations

import os
import resource
import sys
from dataclasses import dataclass

__all__ = ["Usage", "peak_rss_self", "reap"]

# ru_maxrss is in kibibytes on Linux and in bytes on macOS.
_RSS_UNIT = 1 if sys.platform == "darwin" else 1024


@dataclass(frozen=True, slots=True)
class Usage:
    """CPU seconds in user and in system mode, the peak resident memory in bytes (``None``:
    not known), and where the figures come from (``wait4`` or ``sacct``); for a task whose
    cgroup held it to its ``MEM``, the most memory the whole task held at once
    (``memory_peak_bytes``, the cgroup's ``memory.peak``, page cache included; ``None``: not
    known)."""

    user_seconds: float
    system_seconds: float
    max_rss_bytes: int | None
    source: str
    memory_peak_bytes: int | None = None

    @property
    def cpu_seconds(self) -> float:
        """User plus system CPU time: what ``seff`` divides by cores times wall time."""
        return self.user_seconds + self.system_seconds

    @classmethod
    def from_rusage(cls, ru: resource.struct_rusage) -> Usage:
        """The usage in a ``resource.struct_rusage`` (``os.wait4``'s third value)."""
        return cls(user_seconds=float(ru.ru_utime), system_seconds=float(ru.ru_stime),
                   max_rss_bytes=int(ru.ru_maxrss) * _RSS_UNIT, source="wait4")

    def fields(self) -> dict[str, float | int | str | None]:
        """The usage as event and logbook fields
        (:data:`metaq_py.queue.logbook.USAGE_FIELDS`), CPU times rounded to milliseconds."""
        out: dict[str, float | int | str | None] = {
            "cpu_user_seconds": round(self.user_seconds, 3),
            "cpu_system_seconds": round(self.system_seconds, 3),
            "max_rss_bytes": self.max_rss_bytes, "usage_from": self.source}
        if self.memory_peak_bytes is not None:
            out["memory_peak_bytes"] = self.memory_peak_bytes
        return out


def reap(pid: int) -> tuple[int, Usage | None]:
    """Reap the exited script ``pid`` with ``wait4``: its return code (negative: the signal
    that killed it) and its resource usage."""
    try:
        _, status, rusage = os.wait4(pid, 0)
    except ChildProcessError:
        # Reaped by someone else (SIGCHLD ignored): its status is lost. Popen says 0 then.
        return 0, None
    return os.waitstatus_to_exitcode(status), Usage.from_rusage(rusage)


def peak_rss_self() -> int:
    """This process's own peak resident set, in bytes (``ru_maxrss``)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * _RSS_UNIT
