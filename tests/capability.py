"""What a test needs from the machine, and what happens when the machine lacks it.

A test that needs a capability (the local SLURM, inotify for watchdog, cgroups, a second uid)
decides whether it is there from the environment, never from the code under test: a bug that
made the code think the capability missing must fail a test, not turn it into a skip.

When a capability is missing, :func:`missing` skips the test with the reason on a developer's
machine, and fails it in CI (``CI=true``, as ``.ci/run`` runs): CI's machine is set up to have
every one of them, so a missing one there is a broken setup that a green run must not hide.
"""

from __future__ import annotations

import os
import pickle
import pwd
import subprocess
import traceback
from collections.abc import Callable
from typing import NoReturn, TypeVar

import pytest

__all__ = ["STRANGER", "as_user", "in_ci", "missing", "stranger"]

T = TypeVar("T")


def in_ci() -> bool:
    """Whether the tests run in CI (``CI=true``)."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def missing(reason: str) -> NoReturn:
    """The capability this test needs is missing, for ``reason``: skip it, or in CI fail."""
    if in_ci():
        pytest.fail(f"CI must have this, but: {reason}", pytrace=False)
    pytest.skip(reason)


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
