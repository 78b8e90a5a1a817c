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
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence

from metaq_py.ranges import cpu_list, machine_cpus

__all__ = ["PIN_MOST", "bind_here", "cpu_mask", "pin_tree", "srun_binding"]


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
