"""Running a batch system's query commands (``squeue``, ``scontrol``, ``qstat``).

Arguments are passed as a list, never through a shell. Every way a command can fail (missing,
hanging, exiting non-zero) becomes a :class:`~metaq_py.batch.base.BatchError` whose sentence
shows the command line, so a person can run it by hand and see for themselves.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from metaq_py.batch.base import BatchError

__all__ = ["QUERY_TIMEOUT", "Reply", "ask", "excerpt", "run_query"]

QUERY_TIMEOUT = 60.0
"""Seconds a query may take; a busy SLURM controller can take tens of seconds to answer."""


@dataclass(frozen=True, slots=True)
class Reply:
    """What a finished command said: its exit code and both output streams."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def command(self) -> str:
        """The command line, quoted so that it can be pasted into a shell."""
        return shlex.join(self.argv)

    def failure(self) -> BatchError:
        """The error to raise when this reply is a failure."""
        said = excerpt(self.stderr) or excerpt(self.stdout) or "no output"
        return BatchError(f"`{self.command}` failed with exit code {self.returncode}: {said}")


def run_query(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> Reply:
    """Run a query command and return its reply, whatever its exit code.

    ``env`` adds variables to the runner's environment; ``timeout`` defaults to
    :data:`QUERY_TIMEOUT`.
    """
    argv = tuple(argv)
    timeout = QUERY_TIMEOUT if timeout is None else timeout
    run_env = None if env is None else {**os.environ, **env}
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            env=run_env,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError:
        missing = f"`{argv[0]}` is not on PATH, so `{shlex.join(argv)}` cannot run"
        raise BatchError(missing) from None
    except subprocess.TimeoutExpired:
        raise BatchError(f"`{shlex.join(argv)}` did not answer within {timeout:g} s") from None
    except OSError as e:
        raise BatchError(f"`{shlex.join(argv)}` could not start: {e.strerror}") from None
    return Reply(argv, done.returncode, done.stdout, done.stderr)


def ask(argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> Reply:
    """Run a query command that must succeed; a non-zero exit raises its failure."""
    reply = run_query(argv, env=env)
    if reply.returncode != 0:
        raise reply.failure()
    return reply


def excerpt(text: str, limit: int = 160) -> str:
    """The first non-blank line of ``text``, shortened to fit in a one-sentence message."""
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= limit else line[: limit - 3] + "..."
    return ""
