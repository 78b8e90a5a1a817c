"""Sweeping up what a task leaves behind: every process of its session, and those it marked.

When a task's script ends, or it is killed, :func:`kill_session` sends SIGKILL to its process
group, to every other process still in its session (found through ``/proc``), and, when the
task was stopped, to every process of this user whose environment carries the task's mark
(:data:`MARK_VARIABLE`, set by :func:`~metaq_py.launch.process.launch`): so a task's nodes are
free when the runner is told it is over, as SLURM frees a job step's. Without ``/proc`` (not
Linux) the process group kill has to do.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterable
from pathlib import Path

from metaq_py.launch.cgroup import cgroup_members, kill_cgroup, remove_cgroup

__all__ = ["MARK_VARIABLE", "discard_start", "kill_session", "marked_processes", "sweep_ended"]

MARK_VARIABLE = "METAQ_TASK_MARK"
"""The environment variable that marks every process of one task with a token of its own."""


def kill_session(sid: int, mark: str | None = None, *,
                 among: Iterable[int] | None = None) -> None:
    """SIGKILL process group ``sid``, every other process still in session ``sid`` and, with
    ``mark``, every process of this user whose environment carries the task's mark.
    ``among`` limits the search for the session's processes to those pids (the members of a
    task's cgroup that holds all of it, see :mod:`metaq_py.launch.cgroup`); ``None``: every
    process in ``/proc``.

    A process may leave its group (``setpgid``, job control in a shell) but not its session
    without ``setsid``; the sweep over ``/proc`` catches the first kind too, and the mark the
    second (a process that cleared its environment escapes it; the task's cgroup, where
    :mod:`metaq_py.launch.cgroup` could make one, still holds it).
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(sid, signal.SIGKILL)
    for pid in session_members(sid, among):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    if mark is not None:
        for pid in marked_processes(mark):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def sweep_ended(pid: int, *, mark: str | None, cgroup: Path | None, contained: bool,
                stopped: bool) -> None:
    """Sweep up after the script ``pid``, just exited (a zombie not yet reaped, so its
    session id is still its own). A task that was ``stopped`` takes its whole ``cgroup`` and
    every process with its ``mark`` along; one that ended by itself leaves what it detached on
    purpose (the tee reports it, see tee.py). A ``contained`` task's session is looked for
    among its cgroup's members only."""
    if cgroup is not None and stopped:
        kill_cgroup(cgroup)
    among = cgroup_members(cgroup) if cgroup is not None and contained else None
    kill_session(pid, mark if stopped else None, among=among)


def discard_start(pid: int, cgroup: Path | None) -> None:
    """Kill and reap the script ``pid``, just started, that cannot be kept (it could not be
    pinned, or watched), and remove its ``cgroup``."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    if cgroup is not None:
        remove_cgroup(cgroup)


def marked_processes(mark: str) -> list[int]:
    """The processes of this user whose environment holds ``MARK_VARIABLE=mark``."""
    needle = f"{MARK_VARIABLE}={mark}".encode()
    uid = os.getuid()
    me = os.getpid()
    found: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != uid:
                continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read()
        except OSError:
            continue  # gone, or not ours to read
        if needle + b"\0" in environ or environ.endswith(needle):
            found.append(int(entry))
    return found


def session_members(sid: int, among: Iterable[int] | None = None) -> list[int]:
    """The processes in session ``sid`` other than its leader, looked for ``among`` those pids
    or else in ``/proc`` (none found without it)."""
    members: list[int] = []
    if among is not None:
        entries: Iterable[int | str] = among
    else:
        try:
            entries = os.listdir("/proc")
        except OSError:
            return members  # no /proc (not Linux): the process group kill has to do
    # One getsid() per process: it reads the session the kernel keeps for the process, as the
    # sixth field of /proc/PID/stat does, in one system call instead of three, and without
    # letting go of the GIL (this runs at every task's exit over every process on the node).
    getsid = os.getsid
    for entry in entries:
        if isinstance(entry, str):
            if not entry.isdigit():
                continue
            pid = int(entry)
        else:
            pid = entry
        if pid == sid:
            continue
        try:
            if getsid(pid) == sid:
                members.append(pid)
        except OSError:
            continue  # gone already, or hidden from us
    return members
