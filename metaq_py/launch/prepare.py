"""Everything a start does before the process exists: the checks, the command, the
environment, the run folder, the hostfile and the output.

:func:`~metaq_py.launch.process.launch` starts the prepared command; the output descriptor
is given away at the start (or closed by :meth:`Prepared.abandon` when there is none).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from metaq_py.launch.checked import sealed
from metaq_py.launch.command import task_command, task_environment
from metaq_py.launch.hostfiles import hostfile_text
from metaq_py.launch.preflight import check_script, share_cpus
from metaq_py.launch.spec import LaunchError, LaunchSpec
from metaq_py.launch.sweep import MARK_VARIABLE
from metaq_py.launch.tee import OutputTee, make_pipe
from metaq_py.launch.workdir import Aside, make_run_folder, open_task_log

if TYPE_CHECKING:  # loaded only where a queue streams its output
    from metaq_py.launch.streamcopy import StreamCopier

__all__ = ["Prepared", "prepare"]

_OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW


@dataclass(slots=True)
class Prepared:
    """A start made ready: the ``command`` and ``env`` to start, the task's ``mark`` (also in
    ``env``), the descriptor its stdout and stderr go to (``output``: the log, or the pipe to
    ``tee``), and the CPUs a bound share is pinned to (``cpus``)."""

    spec: LaunchSpec
    command: list[str]
    env: dict[str, str]
    mark: str
    output: int
    tee: OutputTee | StreamCopier | None
    cpus: list[int] | None
    program: int | None = None
    """A descriptor of the task's checked bytes, which start instead of the script's path
    (:mod:`metaq_py.launch.checked`); given away with ``output``."""
    error: int | None = None
    """Where stderr goes when not with stdout (the stream copier's second pipe)."""

    def abandon(self) -> None:
        """No start comes: close the output (and the program) and stop the copier, if any."""
        os.close(self.output)
        if self.error is not None:
            os.close(self.error)
        self.close_program()
        if self.tee is not None:
            self.tee.abandon()

    def close_program(self) -> None:
        """Close the program's descriptor once the start has its own copy."""
        if self.program is not None:
            os.close(self.program)
            self.program = None


def prepare(spec: LaunchSpec, *, base_env: Mapping[str, str], srun: str = "srun",
            aside: Aside | None) -> Prepared:
    """Check ``spec``'s script, make its run folder, hostfile and log, and open its output;
    a :class:`LaunchError` (one sentence) names what is wrong, with nothing left open."""
    check_script(spec)
    cpus = share_cpus(spec)
    command = task_command(spec, srun=srun)
    env = task_environment(spec, base_env)
    # A mark every descendant inherits, even one that leaves the session with setsid: the
    # kill sweeps /proc for it (see metaq_py.launch.sweep).
    mark = env[MARK_VARIABLE] = f"{os.getpid()}-{secrets.token_hex(8)}"
    try:
        if spec.run_folder:
            make_run_folder(spec.rundir, spec.task, aside=aside)
        if spec.shared_hostfile is None:
            spec.hostfile.write_text(hostfile_text(spec.nodes))
        if spec.srun_wrap:
            spec.step_file.unlink(missing_ok=True)  # an earlier attempt's step is long gone
    except OSError as e:
        where = e.filename or spec.rundir
        raise LaunchError(f"task {spec.task!r}: cannot prepare {where}: {e.strerror}") from None

    program = _sealed(spec)
    if spec.streams is not None:
        return _streamed(spec, command, env, mark, cpus, program)
    try:
        log_fd = open_task_log(spec.log, spec.task, aside=aside)
    except OSError as e:
        if program is not None:
            os.close(program)
        raise LaunchError(f"task {spec.task!r}: cannot open {spec.log} for its output: "
                          f"{e.strerror}") from None
    if spec.tee is None:
        return Prepared(spec, command, env, mark, log_fd, None, cpus, program)
    try:
        tee_fd = _open_output(spec.tee, spec.task)
    except LaunchError:
        os.close(log_fd)
        if program is not None:
            os.close(program)
        raise
    read_fd, out_fd = make_pipe()
    tee = OutputTee(read_fd, [(spec.log, log_fd), (spec.tee, tee_fd)], name=spec.task)
    return Prepared(spec, command, env, mark, out_fd, tee, cpus, program)


def _sealed(spec: LaunchSpec) -> int | None:
    """A descriptor of ``spec``'s checked bytes in memory, where they are what starts."""
    if spec.program is None or spec.srun_wrap:
        return None
    try:
        return sealed(spec.program.data)
    except OSError as e:
        raise LaunchError(f"task {spec.task!r}: cannot hold its checked script in "
                          f"memory: {e.strerror}") from None


def _streamed(spec: LaunchSpec, command: list[str], env: dict[str, str], mark: str,
              cpus: list[int] | None, program: int | None) -> Prepared:
    """The start of a task whose output goes to its job's stream file (and to its ``LOG``,
    if it has one): two pipes and their copier; no log file of its own."""
    from metaq_py.launch.streamcopy import StreamCopier

    assert spec.streams is not None
    also = None
    if spec.tee is not None:
        try:
            also = (spec.tee, _open_output(spec.tee, spec.task))
        except LaunchError:
            if program is not None:
                os.close(program)
            raise
        env["METAQ_LOG"] = os.path.abspath(spec.tee)  # its one file
    else:
        env.pop("METAQ_LOG", None)  # no file of its own
    out_r, out_w = make_pipe()
    err_r, err_w = make_pipe()
    copier = StreamCopier(out_r, err_r, spec.streams, task=spec.task, attempt=spec.attempt,
                          also=also)
    return Prepared(spec, command, env, mark, out_w, copier, cpus, program, error=err_w)


def _open_output(path: Path, task: str) -> int:
    """Open (or create) the ``tee`` file ``path`` to append a task's output (the runner has
    checked it and made it beforehand, see :mod:`metaq_py.queue.disk.logfile`)."""
    try:
        return os.open(path, _OPEN_FLAGS, 0o644)
    except OSError as e:
        message = f"task {task!r}: cannot open {path} for its output: {e.strerror}"
        raise LaunchError(message) from None
