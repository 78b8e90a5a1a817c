"""Submitting an allocation from a login node, and finding a queue's allocations again.

``metaq alloc`` builds an :class:`AllocRequest`; :func:`submit_command` turns it into the
exact ``sbatch`` or ``qsub`` command line (what ``--dry-run`` prints) and :func:`submit` runs
it and returns the new job's id. Every allocation of one queue carries the same job name,
:func:`alloc_name` (``metaq-`` and eight hex digits of the queue's absolute path), so
:func:`list_allocations` finds them all, whoever submitted them and from whichever process,
by asking the batch system (``squeue --name``, ``qstat``) rather than remembering.

The batch job learns its queue from ``METAQ_QUEUE``: in the environment ``sbatch`` passes on
(SLURM exports the submitting environment by default), or ``qsub -v`` for PBS, which passes
nothing unless asked. Every failure is a :class:`~metaq_py.batch.base.BatchError` in one
sentence showing the command line.
"""

from __future__ import annotations

import hashlib
import math
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

from metaq_py.batch import pbs, slurm
from metaq_py.batch.base import BatchError
from metaq_py.batch.commands import ask, excerpt, run_query

__all__ = ["AllocRequest", "BatchJob", "alloc_name", "find_system", "list_allocations",
           "shown", "submit", "submit_command"]

_SUBMITTERS = {"slurm": "sbatch", "pbs": "qsub"}
_SLURM_QUEUED = re.compile(r"^(PENDING|REQUEUE.*|RESV_DEL_HOLD)$")
_PBS_QUEUED = frozenset("QHWT")


@dataclass(frozen=True, slots=True)
class AllocRequest:
    """One allocation to submit for the queue at ``queue`` (absolute): ``nodes`` nodes for
    ``walltime`` seconds, running ``jobscript`` under the job name ``name``, its batch output
    written into the folder ``output``. ``account``, ``partition`` (a PBS queue), ``qos``
    (SLURM only) and ``flags`` (extra arguments, as they are) come from ``metaq.yaml``."""

    system: str
    jobscript: Path
    queue: Path
    name: str
    nodes: int
    walltime: float
    output: Path
    account: str | None = None
    partition: str | None = None
    qos: str | None = None
    flags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class BatchJob:
    """One of a queue's allocations as the batch system lists it: its id, its state as the
    batch system writes it (``PENDING``, ``RUNNING``, ``Q``, ``R``, ...), and whether it still
    waits to start."""

    jobid: str
    state: str
    queued: bool


def alloc_name(queue: Path) -> str:
    """The job name every allocation of the queue at ``queue`` carries (14 characters, within
    the 15 older PBS servers keep)."""
    digest = hashlib.sha256(str(queue.absolute()).encode()).hexdigest()
    return f"metaq-{digest[:8]}"


def find_system() -> str:
    """``slurm`` when ``sbatch`` is on ``PATH``, else ``pbs`` when ``qsub`` is."""
    for system, command in _SUBMITTERS.items():
        if shutil.which(command):
            return system
    raise BatchError("neither sbatch nor qsub is on PATH; set alloc.system in metaq.yaml "
                     "on a machine that has one")


def submit_command(req: AllocRequest) -> tuple[tuple[str, ...], dict[str, str]]:
    """The command line that submits ``req``, and the variables it needs in its environment.

    Raises :class:`BatchError` for a request the batch system could not take as meant.
    """
    if req.system == "slurm":
        argv = ["sbatch", "--parsable", f"--job-name={req.name}", f"--nodes={req.nodes}",
                f"--time={_slurm_time(req.walltime)}",
                f"--output={req.output / 'slurm-%j.out'}"]
        argv += [f"--{flag}={value}" for flag, value in
                 (("account", req.account), ("partition", req.partition), ("qos", req.qos))
                 if value is not None]
        return (*argv, *req.flags, str(req.jobscript)), {"METAQ_QUEUE": str(req.queue)}
    if req.system == "pbs":
        if req.qos is not None:
            raise BatchError(f"alloc.qos is {req.qos!r}, but PBS has no QOS; use alloc.flags "
                             f"for what your site asks instead")
        if "," in str(req.queue):
            raise BatchError(f"the queue path {req.queue} has a comma, which qsub -v cannot "
                             f"pass; move the queue or link it from a path without one")
        argv = ["qsub", "-N", req.name, "-l", f"select={req.nodes}",
                "-l", f"walltime={_pbs_time(req.walltime)}", "-v", f"METAQ_QUEUE={req.queue}",
                "-o", f"{req.output}/"]
        if req.account is not None:
            argv += ["-A", req.account]
        if req.partition is not None:
            argv += ["-q", req.partition]
        return (*argv, *req.flags, str(req.jobscript)), {}
    raise BatchError(f"unknown batch system {req.system!r}; metaq alloc submits to slurm or pbs")


def submit(req: AllocRequest) -> str:
    """Submit ``req`` and return the new job's id (raises :class:`BatchError` on failure)."""
    argv, env = submit_command(req)
    reply = ask(argv, env=env)
    lines = [line.strip() for line in reply.stdout.splitlines() if line.strip()]
    jobid = lines[-1].split(";")[0] if lines else ""
    pattern = r"[0-9]+" if req.system == "slurm" else r"[0-9]+(\.[A-Za-z0-9._-]+)?"
    if not re.fullmatch(pattern, jobid):
        raise BatchError(f"`{reply.command}` printed {excerpt(reply.stdout) or 'nothing'!r}, "
                         f"not the id of the job it submitted")
    return jobid


def list_allocations(system: str, name: str) -> list[BatchJob]:
    """The jobs named ``name`` the batch system still holds (queued or running), of any user.
    Ended jobs are left out."""
    if system == "slurm":
        reply = ask(["squeue", "-h", f"--name={name}", "-o", "%i %T"])
        jobs = []
        for line in reply.stdout.splitlines():
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 2 or not re.fullmatch(r"[A-Z_]+", parts[1]):
                raise BatchError(f"`{reply.command}` printed {line.strip()!r}, not a job id "
                                 f"and a state such as 123 RUNNING")
            if parts[1] not in slurm.DEAD_STATES:
                jobs.append(BatchJob(parts[0], parts[1], bool(_SLURM_QUEUED.match(parts[1]))))
        return jobs
    if system == "pbs":
        return _pbs_jobs(name)
    raise BatchError(f"unknown batch system {system!r}; metaq alloc submits to slurm or pbs")


def _pbs_jobs(name: str) -> list[BatchJob]:
    """The jobs named ``name`` in plain ``qstat``'s table (id, name, user, time, state,
    queue), as PBS Pro, OpenPBS and Torque print it."""
    reply = run_query(["qstat"])
    if reply.returncode != 0:
        raise reply.failure()
    jobs = []
    for line in reply.stdout.splitlines():
        parts = line.split()
        if len(parts) < 6 or parts[1] != name:
            continue
        state = parts[-2]
        if not re.fullmatch(r"[A-Z]", state):
            raise BatchError(f"`{reply.command}` shows {line.strip()!r}, whose state is not a "
                             f"PBS state letter such as R")
        if state not in pbs.DEAD_STATES:
            jobs.append(BatchJob(parts[0], state, state in _PBS_QUEUED))
    return jobs


def _slurm_time(seconds: float) -> str:
    """``D-HH:MM:SS`` (whole seconds, rounded up), as ``sbatch --time`` reads it."""
    total = math.ceil(seconds)
    days, rem = divmod(total, 86400)
    clock = f"{rem // 3600:02d}:{rem % 3600 // 60:02d}:{rem % 60:02d}"
    return f"{days}-{clock}" if days else clock


def _pbs_time(seconds: float) -> str:
    """``HH:MM:SS`` with as many hours as needed, as ``-l walltime`` reads it."""
    total = math.ceil(seconds)
    return f"{total // 3600:02d}:{total % 3600 // 60:02d}:{total % 60:02d}"


def shown(argv: tuple[str, ...], env: dict[str, str]) -> str:
    """The command line as a person would type it, variables first."""
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    return f"{prefix} {shlex.join(argv)}".strip()
