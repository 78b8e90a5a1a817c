"""A cgroup per task, where the kernel lets this runner make one: the whole of a task is then
killed at once, however its processes hid (``setsid``, a cleared environment, a double fork).

The runner looks for the cgroup v2 hierarchy it runs in (``/proc/self/cgroup``'s ``0::`` line
under the ``cgroup2`` mount of ``/proc/self/mountinfo``) and tries to make a folder of its own
there, ``metaq-<pid>``. Where it may (root, or a delegated subtree, as systemd and some batch
systems give a job), each task gets ``metaq-<pid>/<mark>``, and its script is moved into it the
moment it has started (``posix_spawn`` returns once the script is executing, so a script that
cannot start still fails as one sentence). Every process it makes from then on is born
inside the cgroup; one it forked in that first instant stays outside, where the sweep still
looks for it.
Stopping the task writes ``1`` to its ``cgroup.kill`` (Linux 5.14 and later).

**Reused, not remade.** Making a cgroup and removing it cost the kernel about 35 and 50 µs
(more than a file: the kernel sets up and tears down its controllers' state), on the
runner's loop for every short task. So a task that ended by itself leaves its cgroup empty,
and the cgroup goes back to the runner (:func:`release_cgroup`) for the next task's
(:func:`new_cgroup`), up to :data:`KEPT` of them; the cgroup is named after the first task
that had it. An empty cgroup holds nothing of its last task: a process joins a cgroup only
by being born in it or moved there. Those kept are removed when the runner exits.

Right after the move the runner looks whether the script has a child yet
(:func:`born_inside`, ``/proc/PID/task/*/children``). Almost always it has none: then every
process the task will ever make is born in its cgroup, and the sweep at the script's exit
looks only at the cgroup's members (``cgroup.procs``) instead of every process of the node
(:func:`~metaq_py.launch.sweep.kill_session`'s ``among``), which on a busy node is hundreds of
processes at every exit. A script that forked before the move keeps the whole sweep. (A child
forked, its own child forked and the first reaped, all in the microseconds before the move,
would escape both; the mark still finds it when the task is stopped.)

Where it may not (no cgroup v2, no write access, an older kernel), nothing changes: the process
group, the session sweep and the mark of :mod:`metaq_py.launch.sweep` do the work, as before.

**Memory.** Where the runner's folder has the memory controller (its parent gives it in
``cgroup.subtree_control``), the runner gives it on to its tasks' cgroups, and a task with a
``MEM`` gets a new cgroup of its own holding it to that (:mod:`metaq_py.launch.memory`);
:func:`memory_problem` says why not where it cannot.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import threading
import time
from pathlib import Path

__all__ = ["KEPT", "born_inside", "cgroup_members", "kill_cgroup", "memory_problem",
           "move_into", "new_cgroup", "release_cgroup", "remove_cgroup", "runner_cgroup",
           "task_cgroup"]

KEPT = 64
"""The most empty task cgroups a runner keeps for its next tasks."""

_kept: list[Path] = []
_kept_lock = threading.Lock()


def _own_cgroup() -> Path | None:
    """The cgroup v2 folder this process runs in, or ``None`` without cgroup v2."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    path = next((line[3:] for line in lines if line.startswith("0::")), None)
    mount = next((m.split()[4] for m in mounts if " - cgroup2 " in m), None)
    if path is None or mount is None:
        return None
    return Path(mount) / path.lstrip("/")


@functools.cache
def runner_cgroup() -> Path | None:
    """The folder under which this runner makes its tasks' cgroups, made on first use (a
    runner asks at its start, before it takes back lost claims); ``None`` where the kernel
    does not let it (the sweep alone then stops tasks). Whatever the tasks of runners that
    died here without exiting left running is killed then."""
    own = _own_cgroup()
    if own is None:
        return None
    mine = own / f"metaq-{os.getpid()}"
    try:
        mine.mkdir(exist_ok=True)
        if not (mine / "cgroup.kill").exists():  # before Linux 5.14: no kill of a whole cgroup
            mine.rmdir()
            return None
    except OSError:
        return None
    atexit.register(_tidy, mine)
    _tidy_dead_runners(own)
    with contextlib.suppress(OSError):  # the memory controller, where the parent gives it
        if "memory" in (mine / "cgroup.controllers").read_text().split():
            (mine / "cgroup.subtree_control").write_text("+memory")
    return mine


@functools.cache
def memory_problem() -> str | None:
    """Why a task's ``MEM`` cannot be held by its cgroup here (one sentence), or ``None``
    when it can: the runner's folder gives its tasks' cgroups the memory controller."""
    mine = runner_cgroup()
    if mine is None:
        return ("this runner may not make cgroups for its tasks (it needs cgroup v2, a "
                "cgroup it may write and Linux 5.14 or later)")
    try:
        given = (mine / "cgroup.subtree_control").read_text().split()
    except OSError as e:
        return f"{mine}/cgroup.subtree_control cannot be read ({e.strerror})"
    if "memory" not in given:
        return (f"the memory controller is not given to {mine.parent} (its cgroup.subtree_control "
                f"lacks memory)")
    return None


def task_cgroup(mark: str, pid: int, mem: int | None = None) -> tuple[Path | None, bool]:
    """A new cgroup for the task marked ``mark``, with its script (process ``pid``) moved into
    it, and whether it holds the task to ``mem`` bytes (a ``MEM``: then the cgroup is made for
    it, never one kept, see :mod:`metaq_py.launch.memory`); ``(None, False)`` where none can
    be made, and the task then runs where the runner does."""
    limited = False
    if mem is not None and memory_problem() is None:
        from metaq_py.launch.memory import limit_memory  # only a task with a MEM needs it

        cgroup = new_cgroup(mark, kept=False)
        limited = cgroup is not None and limit_memory(cgroup, mem)
    else:
        cgroup = new_cgroup(mark)
    if cgroup is None or not move_into(cgroup, pid):
        return None, False
    return cgroup, limited


def new_cgroup(mark: str, *, kept: bool = True) -> Path | None:
    """An empty cgroup for the task marked ``mark``: one kept from an earlier task (unless
    ``kept`` is false), or a new one named ``mark``; ``None`` where none can be made."""
    parent = runner_cgroup()
    if parent is None:
        return None
    with _kept_lock:
        if _kept and kept:
            return _kept.pop()
    cgroup = parent / mark
    try:
        cgroup.mkdir()
    except OSError:
        return None
    return cgroup


def move_into(cgroup: Path, pid: int) -> bool:
    """Move process ``pid`` into ``cgroup``; on failure remove ``cgroup`` and say ``False``.
    The caller makes sure ``pid`` is still its process (not yet reaped, so not reused)."""
    try:
        fd = os.open(cgroup / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.write(fd, str(pid).encode())
        finally:
            os.close(fd)
    except OSError:
        remove_cgroup(cgroup)
        return False
    return True


def born_inside(pid: int) -> bool:
    """Whether process ``pid``, just moved into its cgroup, has no child yet (in any of its
    threads): then all it makes from now on is born inside. ``False`` when it cannot be told."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
        for tid in threads:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                if f.read().strip():
                    return False
    except OSError:
        return False  # gone already, or a kernel without the children file
    return True


def cgroup_members(cgroup: Path) -> list[int] | None:
    """The processes in ``cgroup`` now; ``None`` when its list cannot be read."""
    try:
        with open(cgroup / "cgroup.procs", "rb") as f:
            return [int(line) for line in f.read().split()]
    except (OSError, ValueError):
        return None


def kill_cgroup(cgroup: Path) -> None:
    """SIGKILL every process in ``cgroup`` at once."""
    with contextlib.suppress(OSError):
        (cgroup / "cgroup.kill").write_text("1")


def release_cgroup(cgroup: Path) -> None:
    """Give back the cgroup of a task that has ended by itself and been reaped: kept for the
    next task when it is empty, else left (:func:`remove_cgroup`)."""
    members = cgroup_members(cgroup)
    if members == []:
        with _kept_lock:
            if len(_kept) < KEPT:
                _kept.append(cgroup)
                return
    remove_cgroup(cgroup)


def remove_cgroup(cgroup: Path, *, wait: float = 0.0) -> None:
    """Remove ``cgroup`` once it is empty, waiting up to ``wait`` seconds for processes just
    killed to be gone (the kernel reaps a killed cgroup's members asynchronously). A task that
    ended by itself may have left processes running on purpose: its cgroup then stays."""
    deadline = time.monotonic() + wait
    while True:
        try:
            cgroup.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() >= deadline:
                return
            time.sleep(0.01)


def _tidy(mine: Path) -> None:
    """At exit, remove this runner's empty task cgroups and then its own folder; a cgroup still
    holding what a task left running on purpose stays, and so does the folder above it."""
    with contextlib.suppress(OSError):
        for child in mine.iterdir():
            if child.is_dir():
                remove_cgroup(child)
    remove_cgroup(mine)


def _tidy_dead_runners(own: Path) -> None:
    """End what runners that died without exiting (``kill -9``) left here: every process
    still in one of their tasks' cgroups is killed, and the cgroups are removed. Their claims
    are lost, and the runner that takes one back starts its task again: the task must not
    run twice (see :func:`runner_cgroup`)."""
    with contextlib.suppress(OSError):
        for folder in own.glob("metaq-*"):
            pid = folder.name.removeprefix("metaq-")
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                for child in folder.iterdir():
                    if child.is_dir():
                        kill_cgroup(child)
                        remove_cgroup(child, wait=1.0)
                _tidy(folder)
