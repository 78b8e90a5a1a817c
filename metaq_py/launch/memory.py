"""A task's ``MEM`` held by its cgroup, and whether the kernel's OOM killer ended it.

Where the runner's cgroup (:mod:`metaq_py.launch.cgroup`) has the memory controller, a task
that says its ``MEM`` gets a cgroup of its own, made for it (never one kept from an earlier
task, whose counts would mix with its own), with:

- ``memory.max`` = ``MEM``: past it the kernel reclaims, then its OOM killer acts inside the
  cgroup only;
- ``memory.swap.max`` = 0, so that a task past its ``MEM`` is stopped rather than swapped
  (SLURM's ``ConstrainSwapSpace`` with no extra swap does the same);
- ``memory.oom.group`` = 1: an OOM kill takes the whole task at once, never half of its
  processes.

At its end, the cgroup's ``memory.events`` says how many of its processes the OOM killer
ended (``oom_kill``, counted by any OOM killer, the node's own included), and ``memory.peak``
(Linux 5.19 and later) the most memory the whole task held at once, page cache included.

Where no such cgroup is possible (no cgroup v2, no memory controller given to the runner's
cgroup) ``MEM`` still packs shares of a node, but nothing holds a task to it; the runner says
so once. A task killed by ``SIGKILL`` that the runner did not send (or whose shell says 137,
128 + 9, for a command so killed), with a peak resident set (``wait4``) at its ``MEM`` or
more, is then read as an OOM kill: whatever killed it (the node's OOM killer, a batch
system's cgroup), it had reached its limit.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

__all__ = ["MemoryEnd", "limit_memory", "memory_end", "out_of_memory"]


class MemoryEnd:
    """What a task's cgroup says of its memory at its end: ``oom_kills`` (processes its OOM
    killer ended) and ``peak`` (bytes, ``None``: the kernel does not keep it)."""

    __slots__ = ("oom_kills", "peak")

    def __init__(self, oom_kills: int, peak: int | None) -> None:
        self.oom_kills = oom_kills
        self.peak = peak


def limit_memory(cgroup: Path, mem: int) -> bool:
    """Hold the cgroup ``cgroup`` (still empty) to ``mem`` bytes, without swap, killed whole
    when its OOM killer acts; ``False`` when it has no ``memory.max`` to write."""
    try:
        _write(cgroup / "memory.max", str(mem))
    except OSError:
        return False
    for name, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
        with contextlib.suppress(OSError):  # no swap accounting, or an older kernel
            _write(cgroup / name, value)
    return True


def memory_end(cgroup: Path) -> MemoryEnd:
    """The OOM kills and the peak memory of the task whose cgroup is ``cgroup``, read once
    its processes are gone (before the cgroup is removed)."""
    kills = 0
    with contextlib.suppress(OSError, ValueError):
        for line in (cgroup / "memory.events").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                kills = int(value)
    peak = None
    with contextlib.suppress(OSError, ValueError):
        peak = int((cgroup / "memory.peak").read_text())
    return MemoryEnd(kills, peak)


def out_of_memory(returncode: int, *, mem: int | None, oom_kills: int | None,
                  max_rss: int | None, runner_killed: bool) -> bool:
    """Whether a task that asked for ``mem`` bytes and ended with ``returncode`` (negative:
    the signal; 0 is never an OOM kill) was killed for passing it: its cgroup's OOM killer
    ended some of its processes (``oom_kills``; ``None``: no cgroup held it), or, without such
    a cgroup, a ``SIGKILL`` the runner did not send (``runner_killed``; or a shell's exit 137
    for a command so killed) ended it with its peak resident set ``max_rss`` at ``mem`` or
    more."""
    if mem is None or returncode == 0:
        return False
    if oom_kills is not None:
        return oom_kills > 0
    return returncode in (-signal.SIGKILL, 128 + signal.SIGKILL) and not runner_killed \
        and max_rss is not None and max_rss >= mem


def _write(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC)  # as `echo v > file`
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
