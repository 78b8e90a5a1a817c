"""Real members of a collaboration for the hostile tests: an owner, a member and an outsider,
each a real uid, the first two in one real group.

The owner makes the queue with ``metaq init --group`` and runs its runner as itself; the
member plants, as itself, what a hostile member of the group could. They are made with
``useradd`` the first time a test needs them (CI runs as root); without root the tests that
need them skip, saying so.

A process of another uid must be able to start this interpreter: where a folder above it
lets no one else through (``/root`` is 0700 where pyenv lives), :func:`members` gives the
others leave to pass through it (``o+x``, never to list or read it).
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

GROUP = "metaqcollab"
OWNER, MEMBER, OUTSIDER = "metaqowner", "metaqmember", "metaqoutsider"


@dataclass(frozen=True)
class Member:
    """One real user: ``name``, ``uid`` and the collaboration's group ``gid`` (also the
    group of the outsider's files, who is not in it)."""

    name: str
    uid: int
    gid: int
    in_group: bool

    def run(self, argv: list[str], *, umask: int = 0o002, **kwargs: object
            ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` as this user (with the group as its groups), text output captured."""
        return subprocess.run(argv, **self._as(umask), capture_output=True, text=True,
                              **kwargs)  # type: ignore[call-overload]

    def popen(self, argv: list[str], *, umask: int = 0o002, **kwargs: object
              ) -> subprocess.Popen[str]:
        """Start ``argv`` as this user."""
        return subprocess.Popen(argv, **self._as(umask), text=True,  # type: ignore[call-overload]
                                **kwargs)

    def do(self, action: Callable[[], object], *, umask: int = 0o002) -> None:
        """Carry out ``action`` (plain file-system calls) in a forked child as this user;
        an exception there fails the caller with its traceback."""
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: drop to the member, act, report
            os.close(read)
            code = 0
            try:
                os.setgroups([self.gid] if self.in_group else [])
                os.setgid(self.gid if self.in_group else _nogroup())
                os.setuid(self.uid)
                os.umask(umask)
                action()
            except BaseException:
                os.write(write, traceback.format_exc().encode()[-4000:])
                code = 1
            os._exit(code)
        os.close(write)
        with os.fdopen(read, "rb") as f:
            said = f.read().decode()
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, f"{self.name} could not: {said}"

    def _as(self, umask: int) -> dict[str, object]:
        groups = [self.gid] if self.in_group else []
        return {"user": self.uid, "group": self.gid if self.in_group else _nogroup(),
                "extra_groups": groups, "umask": umask}


@dataclass(frozen=True)
class Members:
    """The owner, the member, the outsider, and a shared folder every one of them can
    reach (``base``), removed afterwards."""

    owner: Member
    member: Member
    outsider: Member
    base: Path

    def metaq(self, who: Member, *args: str, env: dict[str, str] | None = None,
              **kwargs: object) -> subprocess.CompletedProcess[str]:
        """``metaq ARGS`` run as ``who`` (this checkout's code), with ``env`` added."""
        return who.run([sys.executable, "-m", "metaq_py", *args], env={**_env(), **(env or {})},
                       **kwargs)

    def init_queue(self, name: str = "q", *, settings: str = "") -> Path:
        """A queue made by the owner with ``metaq init --group``; ``settings``, when given,
        are its ``metaq.yaml`` (written by the owner, the group kept)."""
        q = self.base / name
        done = self.metaq(self.owner, "init", str(q), "--group", GROUP)
        assert done.returncode == 0, done.stderr
        if settings:
            def write() -> None:
                with open(q / "metaq.yaml", "w") as f:
                    f.write(f"group: {GROUP}\n{settings}")
            self.owner.do(write)
        return q


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("HOME", None)
    env["HOME"] = "/tmp"
    return env


def _nogroup() -> int:
    try:
        return grp.getgrnam("nogroup").gr_gid
    except KeyError:
        return 65534


def _user(name: str, gid: int, in_group: bool) -> Member:
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        group = ["-g", GROUP] if in_group else ["-g", str(_nogroup())]
        done = subprocess.run(["useradd", "-M", "-N", *group, "-s", "/bin/sh", name],
                              capture_output=True, text=True)
        if done.returncode not in (0, 9):  # 9: made meanwhile by another test process
            pytest.fail(f"useradd {name} failed: {done.stderr.strip()}")
        pw = pwd.getpwnam(name)
    return Member(name, pw.pw_uid, gid, in_group)


def _let_through(path: Path) -> None:
    """Give other users leave to pass through each folder above ``path`` (``o+x``)."""
    for folder in [*reversed(path.parents)]:
        mode = os.stat(folder).st_mode
        if not mode & 0o001:
            os.chmod(folder, mode | 0o001)


@pytest.fixture
def members() -> Iterator[Members]:
    """The three users and a shared folder for one test (root only)."""
    if os.geteuid() != 0:
        pytest.skip("two real uids need root to make them with useradd (CI runs as root)")
    if shutil.which("useradd") is None:
        pytest.skip("useradd is not installed")
    try:
        gid = grp.getgrnam(GROUP).gr_gid
    except KeyError:
        done = subprocess.run(["groupadd", GROUP], capture_output=True, text=True)
        if done.returncode not in (0, 9):
            pytest.fail(f"groupadd {GROUP} failed: {done.stderr.strip()}")
        gid = grp.getgrnam(GROUP).gr_gid
    owner = _user(OWNER, gid, True)
    member = _user(MEMBER, gid, True)
    outsider = _user(OUTSIDER, gid, False)
    _let_through(Path(sys.executable).resolve())
    _let_through(Path(__file__).resolve())
    base = Path(tempfile.mkdtemp(prefix="metaq-members-", dir="/tmp"))
    base.chmod(0o1777)  # like /tmp: each makes its own, none removes another's
    try:
        yield Members(owner, member, outsider, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)
