"""A SLURM step's resource use, from SLURM's accounting (``sacct``).

A task started in a step of its own (``metaq run --srun``) runs on its compute node, where
the runner cannot reap it; SLURM's accounting gathers its figures there (from the step's
cgroup or its processes, as ``JobAcctGatherType`` says). Once the step is over, ``sacct``
gives its user and system CPU time and the peak resident memory of its largest task:

    sacct --jobs 4242.3 --noheader --parsable2 --format=JobID,UserCPU,SystemCPU,MaxRSS

``sstat`` answers only while a step runs, so it cannot give the figures of a step that has
just ended. Where SLURM keeps no accounting (``accounting_storage/none``: "Slurm accounting
storage is disabled"), there are no figures, and :class:`StepUsage` stops asking.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable

from metaq_py.launch.usage import Usage

__all__ = ["StepUsage", "parse_cpu_time", "parse_sacct_usage", "parse_size"]

_TIME = re.compile(r"^(?:(?:(\d+)-)?(\d+):)?(\d+):(\d+(?:\.\d+)?)$")
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([KMGTP]?)$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}


def parse_cpu_time(text: str) -> float:
    """Seconds in one of sacct's CPU time forms: ``MM:SS.mmm``, ``HH:MM:SS`` or
    ``D-HH:MM:SS``. ``ValueError`` with one sentence otherwise."""
    text = text.strip()
    m = _TIME.match(text)
    if m is None:
        raise ValueError(f"{text!r} is not a sacct CPU time such as 01:02.345 or 1-02:03:04")
    days, hours, minutes, seconds = m.groups()
    return (int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes) * 60
            + float(seconds))


def parse_size(text: str) -> int | None:
    """Bytes in a sacct size such as ``1234K``, ``12.5M`` or ``0`` (``None`` for an empty
    field: not gathered). ``ValueError`` with one sentence otherwise."""
    text = text.strip()
    if not text:
        return None
    m = _SIZE.match(text)
    if m is None:
        raise ValueError(f"{text!r} is not a sacct size such as 1234K or 12.5M")
    return round(float(m.group(1)) * _UNITS[m.group(2).upper()])


def parse_sacct_usage(text: str, step: str) -> Usage | None:
    """The usage of ``step`` (``JOBID.STEPID``) in ``sacct --parsable2 --noheader
    --format=JobID,UserCPU,SystemCPU,MaxRSS`` output; ``None`` when the step is not there.
    ``ValueError`` with one sentence when its line is malformed."""
    for line in text.splitlines():
        cells = line.split("|")
        if cells[0].strip() != step:
            continue
        if len(cells) < 4:
            raise ValueError(f"sacct's line for step {step} has {len(cells)} fields, not 4: "
                             f"{line!r}")
        return Usage(user_seconds=parse_cpu_time(cells[1]),
                     system_seconds=parse_cpu_time(cells[2]),
                     max_rss_bytes=parse_size(cells[3]), source="sacct")
    return None


Run = Callable[..., subprocess.CompletedProcess[str]]


class StepUsage:
    """Asks ``sacct`` for ended steps' usage; after SLURM says it keeps no accounting (or
    there is no ``sacct``), it asks no more."""

    def __init__(self, run: Run = subprocess.run) -> None:
        self._run = run
        self._exe = shutil.which("sacct")

    def of(self, step: str) -> Usage | None:
        """The usage of ended step ``step`` (``JOBID.STEPID``); ``None`` when SLURM cannot
        say (no accounting, or not recorded yet)."""
        if self._exe is None:
            return None
        try:
            done = self._run([self._exe, "--jobs", step, "--noheader", "--parsable2",
                              "--format=JobID,UserCPU,SystemCPU,MaxRSS"],
                             capture_output=True, text=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if "accounting storage is disabled" in (done.stderr + done.stdout).lower():
            self._exe = None
            return None
        if done.returncode != 0:
            return None
        try:
            return parse_sacct_usage(done.stdout, step)
        except ValueError:
            return None
