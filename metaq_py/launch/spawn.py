"""Starting a task's script: one ``posix_spawn``, with what :class:`subprocess.Popen` would
have given it.

The script starts in a new session, with stdin from ``/dev/null``, stdout and stderr on the
output descriptor it is given, ``SIGPIPE`` and ``SIGXFSZ`` back at their defaults (Python
ignores them; ``Popen`` restores them too), no signal blocked, and no other descriptor of the
runner.

Python makes its own descriptors non-inheritable (PEP 446), but a library may not (watchdog's
inotify descriptor is one), and a runner may be handed some by whatever started it.
``Popen`` closes every descriptor in the child; here the runner *seals* its own instead: at
most every :data:`SEAL_EVERY` seconds, before a start, each descriptor above 2 is made
close-on-exec. Looking costs a listing of ``/proc/self/fd`` and a system call per descriptor
(30 µs with a runner's twenty or so), too much for every start of a short task; so one that a
library opened inheritable less than :data:`SEAL_EVERY` before a start is the one that
could reach a task.

Why not ``Popen``: it does the same with a page of Python per start (the environment encoded a
variable at a time, a pipe to report a failed ``exec``), about 50 µs of the runner's loop for
each task; the C library reports a failed ``exec`` itself. ``Popen`` could also start in
another folder, which no task does (:class:`~metaq_py.launch.spec.LaunchSpec` has no such
field). The caller reaps the process (:func:`os.wait4`).
"""

from __future__ import annotations

import fcntl
import os
import signal
import time
from collections.abc import Mapping, Sequence

from metaq_py.launch.checked import PROGRAM_FD, PROGRAM_PATH

__all__ = ["SEAL_EVERY", "spawn"]

SEAL_EVERY = 1.0
"""Seconds between two looks for inheritable descriptors of the runner (see the module
text)."""

_sealed_at = float("-inf")

_DEFAULT_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ)
"""Signals Python ignores that a started program expects at their defaults."""


def spawn(command: Sequence[str], *, output: int, env: Mapping[str, str],
          program: int | None = None, error: int | None = None) -> int:
    """Start ``command`` (a path, or a name looked up on ``PATH``) in a new session with its
    stdout and stderr on the descriptor ``output`` (stderr on ``error`` when given); its pid.
    With ``program`` (a descriptor of a task's checked bytes, :mod:`metaq_py.launch.checked`),
    that is what is executed, from descriptor 3 of the child, ``command`` being its argument
    vector. Raises
    :class:`OSError` (with the program as ``filename``) when the kernel refuses the start:
    then nothing runs."""
    moved = []
    if output <= 2:
        # A dup2 onto itself would leave the close-on-exec flag set: use a copy above 2.
        output = fcntl.fcntl(output, fcntl.F_DUPFD_CLOEXEC, 3)
        moved.append(output)
    if error is not None and error <= 2:
        error = fcntl.fcntl(error, fcntl.F_DUPFD_CLOEXEC, 3)
        moved.append(error)
    actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
               (os.POSIX_SPAWN_DUP2, output, 1),
               (os.POSIX_SPAWN_DUP2, output if error is None else error, 2)]
    path = command[0]
    if program is not None:
        if program <= PROGRAM_FD:  # as above, and never below the output's dup2s
            program = fcntl.fcntl(program, fcntl.F_DUPFD_CLOEXEC, PROGRAM_FD + 1)
            moved.append(program)
        actions.append((os.POSIX_SPAWN_DUP2, program, PROGRAM_FD))
        path = PROGRAM_PATH
    _seal()
    start = os.posix_spawn if "/" in path else os.posix_spawnp
    try:
        return start(path, list(command), env, file_actions=actions, setsid=True,
                     setsigdef=_DEFAULT_SIGNALS, setsigmask=())
    finally:
        for fd in moved:
            os.close(fd)


def _seal() -> None:
    """Make each of the runner's descriptors above 2 close-on-exec, unless that was done less
    than :data:`SEAL_EVERY` seconds ago."""
    global _sealed_at
    now = time.monotonic()
    if now - _sealed_at < SEAL_EVERY:
        return
    _sealed_at = now
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:  # no /proc: nothing to go by
        return
    for fd in fds:
        if fd > 2:
            try:
                if os.get_inheritable(fd):
                    os.set_inheritable(fd, False)
            except OSError:  # the listing's own, closed by now, or one closed meanwhile
                pass
