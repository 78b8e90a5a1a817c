"""What is made sure of before a task's script starts, and how a start that failed is told.

:func:`check_script` turns the usual mistakes (no such script, not executable, a missing
working folder) into one sentence before anything is started; :func:`share_cpus` says which
CPUs a locally bound share is pinned to once started (:mod:`metaq_py.launch.binding`);
:func:`start_failure` words the error of a start the kernel refused, and
:func:`unbound_failure` that of a share that could not be pinned.
"""

from __future__ import annotations

import errno
import os
import stat

from metaq_py.launch.spec import LaunchError, LaunchSpec
from metaq_py.ranges import cpu_list, machine_cpus

__all__ = ["check_script", "share_cpus", "start_failure", "unbound_failure"]


def check_script(spec: LaunchSpec) -> None:
    """A :class:`LaunchError` naming what keeps ``spec``'s script from starting, if anything
    does that can be seen before the start."""
    script = spec.script
    who = f"task {spec.task!r}"
    if spec.tee is not None and not spec.tee.parent.is_dir():
        raise LaunchError(f"{who}: the directory of its LOG file {spec.tee} does not exist")
    if spec.program is not None:
        return  # its checked bytes start, not the file at its path
    try:
        mode = os.stat(script).st_mode  # one look for both questions below
    except (FileNotFoundError, NotADirectoryError):
        raise LaunchError(f"{who}: the script {script} does not exist") from None
    except OSError as e:
        if e.errno != errno.ELOOP:
            raise
        raise LaunchError(f"{who}: the script {script} does not exist") from None
    if not stat.S_ISREG(mode):
        raise LaunchError(f"{who}: the script {script} is not a regular file")
    if not os.access(script, os.X_OK):
        raise LaunchError(f"{who}: the script {script} is not executable (chmod +x it)")


def share_cpus(spec: LaunchSpec) -> list[int] | None:
    """The CPUs a locally bound share runs on (see :mod:`metaq_py.launch.binding`); ``None``
    for any other task; a :class:`LaunchError` when this machine has no such cores."""
    if not spec.bind or spec.srun_wrap or spec.cores is None:
        return None
    cpus = machine_cpus()
    if max(spec.cores) >= len(cpus):
        raise LaunchError(f"task {spec.task!r} is to be bound to the cores "
                          f"{cpu_list(spec.cores)}, and this machine lets it use "
                          f"{len(cpus)} CPUs")
    return [cpus[c] for c in spec.cores]


def start_failure(spec: LaunchSpec, command: list[str], error: OSError) -> str:
    """The sentence for a start of ``spec`` (running ``command``) the kernel refused."""
    who = f"task {spec.task!r}"
    if error.errno == errno.ENOEXEC:
        return f"{who}: the script {spec.script} has no #! line naming its interpreter"
    if spec.srun_wrap and error.filename == command[0]:
        return f"{who}: cannot run {command[0]} to wrap the script: {error.strerror}"
    return f"{who}: cannot start {spec.script}: {error.strerror}"


def unbound_failure(spec: LaunchSpec, strerror: str) -> str:
    """The sentence for a share of ``spec`` that was started and could not be pinned to its
    cores (it was killed)."""
    return f"task {spec.task!r}: cannot bind it to the cores {cpu_list(spec.cores or ())}: " \
        f"{strerror}"
