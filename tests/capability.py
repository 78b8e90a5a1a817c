"""What a test needs from the machine, and what happens when the machine lacks it.

A test that needs a capability (the local SLURM, inotify for watchdog, cgroups, a second uid)
decides whether it is there from the environment, never from the code under test: a bug that
made the code think the capability missing must fail a test, not turn it into a skip.

When a capability is missing, :func:`missing` skips the test with the reason on a developer's
machine, and fails it in CI (``CI=true``, as ``.ci/run`` runs): CI's machine is set up to have
every one of them, so a missing one there is a broken setup that a green run must not hide.
"""

from __future__ import annotations

import importlib.util
import os
import pickle
import pwd
import re
import subprocess
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn, TypeVar

import pytest

__all__ = ["STRANGER", "as_user", "cgroup_problem", "in_ci", "inotify_problem",
           "memory_cgroup_problem", "missing", "stranger"]

T = TypeVar("T")


def in_ci() -> bool:
    """Whether the tests run in CI (``CI=true``)."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def missing(reason: str) -> NoReturn:
    """The capability this test needs is missing, for ``reason``: skip it, or in CI fail."""
    if in_ci():
        pytest.fail(f"CI must have this, but: {reason}", pytrace=False)
    pytest.skip(reason)


def inotify_problem() -> str | None:
    """Why file-system events cannot wake a watcher here (watchdog not installed, no inotify
    in the kernel), or ``None``: read from the machine, not from the watcher."""
    if importlib.util.find_spec("watchdog") is None:
        return "watchdog, a dependency of metaq-py, is not installed"
    if not Path("/proc/sys/fs/inotify/max_user_watches").exists():
        return "the kernel offers no inotify"
    return None


def cgroup_problem() -> str | None:
    """Why a runner cannot make a cgroup v2 folder of its own here, or ``None``: read from the
    machine (a cgroup2 mount in /proc/mounts, this process's cgroup there writable, Linux 5.14
    or later for ``cgroup.kill``), not from :mod:`metaq_py.launch.cgroup`. Not something CI must
    have: a container may give none, and the runner then stops tasks by the session sweep."""
    mounts = [line.split() for line in Path("/proc/mounts").read_text().splitlines()]
    v2 = [m[1] for m in mounts if len(m) > 2 and m[2] == "cgroup2"]
    if not v2:
        return "no cgroup v2 hierarchy is mounted"
    own = next((line.split("::", 1)[1] for line in Path("/proc/self/cgroup").read_text()
                .splitlines() if line.startswith("0::")), None)
    if own is None:
        return "this process is in no cgroup v2"
    folder = Path(v2[0]) / own.lstrip("/")
    if not os.access(folder, os.W_OK):
        return f"this process may not write its cgroup folder {folder}"
    release = tuple(int(x) for x in re.findall(r"\d+", os.uname().release)[:2])
    if release < (5, 14):
        return f"Linux {os.uname().release} has no cgroup.kill (5.14 and later)"
    return None


def memory_cgroup_problem() -> str | None:
    """Why a runner here cannot hold a task to its ``MEM`` with ``memory.max``, or ``None``:
    read from the machine (a cgroup v2 folder this process may write, as
    :func:`cgroup_problem`, whose ``cgroup.subtree_control`` gives its children the memory
    controller), not from :mod:`metaq_py.launch.cgroup`. Not something CI must have either: a
    container often runs in a cgroup that keeps the memory controller to itself."""
    problem = cgroup_problem()
    if problem is not None:
        return problem
    v2 = next(line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()
              if len(line.split()) > 2 and line.split()[2] == "cgroup2")
    own = next(line.split("::", 1)[1] for line in Path("/proc/self/cgroup").read_text()
               .splitlines() if line.startswith("0::"))
    given = Path(v2) / own.lstrip("/") / "cgroup.subtree_control"
    if "memory" not in given.read_text().split():
        return (f"the memory controller is not given to the children of this process's "
                f"cgroup ({given} has {given.read_text().split() or 'none'})")
    return None


STRANGER = "metaqstranger"
"""A second real user, in no group of the queue's: someone who shares the machine."""


def stranger() -> pwd.struct_passwd:
    """The second user :data:`STRANGER`, made with ``useradd`` the first time (CI runs as
    root); without root, and without that user, the test is :func:`missing` it."""
    try:
        return pwd.getpwnam(STRANGER)
    except KeyError:
        pass
    if os.geteuid() != 0:
        missing(f"a second uid: the user {STRANGER} does not exist and only root can add it")
    made = subprocess.run(["useradd", "--system", "--no-create-home", "--shell",
                           "/usr/sbin/nologin", STRANGER], capture_output=True, text=True)
    if made.returncode not in (0, 9):  # 9: made meanwhile by another test process
        missing(f"a second uid: useradd {STRANGER} failed: {made.stderr.strip()}")
    return pwd.getpwnam(STRANGER)


def as_user(user: pwd.struct_passwd, action: Callable[[], T]) -> T:
    """Carry out ``action`` (plain file-system calls) in a forked child running as ``user``
    (its own group only) and return what it returned (it must pickle); an exception there
    fails the caller with its traceback."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop to the user, act, report
        os.close(read)
        code = 0
        try:
            os.setgroups([])
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)
            said = pickle.dumps(action())
        except BaseException:
            said = traceback.format_exc().encode()[-4000:]
            code = 1
        with os.fdopen(write, "wb") as f:
            f.write(said)
        os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        said = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, f"as {user.pw_name}: {said.decode()}"
    return pickle.loads(said)
