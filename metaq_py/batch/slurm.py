"""The SLURM adapter: a runner inside ``sbatch``/``salloc`` asks SLURM itself.

- job id: ``SLURM_JOB_ID``;
- nodes: ``scontrol show hostnames "$SLURM_JOB_NODELIST"``, which expands ranges such as
  ``nid[0001-0004,0010]`` exactly as SLURM does;
- GPUs: ``SLURM_GPUS_ON_NODE``, else the ids in ``SLURM_JOB_GPUS``, else
  ``SLURM_GPUS_PER_NODE``; device ids are those of ``CUDA_VISIBLE_DEVICES`` when SLURM set it
  for as many devices (that is the numbering processes on the nodes see), else ``0 .. n-1``;
- end time: ``squeue -h -j ID -o %e`` (local time, format forced with
  ``SLURM_TIME_FORMAT=standard``), falling back on ``-o %L`` (time left) when ``%e`` gives no
  date. This is the real limit, including any change an operator made after submission;
- liveness: ``squeue -h -j ID -o %T``; a job SLURM no longer knows is dead;
- blocks of neighbouring nodes: the leaf switches of ``scontrol show topology``
  (``topology/tree``), else hostname order (see :mod:`metaq_py.batch.topology`).
"""

from __future__ import annotations

import re
import time

from metaq_py.batch.base import BatchError, BatchSystem
from metaq_py.batch.commands import ask, excerpt, run_query
from metaq_py.batch.topology import parse_slurm_topology
from metaq_py.durations import DurationError, parse_duration

__all__ = ["DEAD_STATES", "SlurmBatch", "parse_end_time", "parse_time_left"]

DEAD_STATES = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "REVOKED",
        "SPECIAL_EXIT",
        "TIMEOUT",
    }
)
"""Job states (``squeue -o %T``) of a job that has ended and released its nodes.

``COMPLETING`` is not among them: such a job may still have processes on its nodes.
"""

_JOBID = re.compile(r"^[0-9]+(?:[_+][0-9]+)?$")
_NO_DATE = frozenset({"", "N/A", "NONE", "UNKNOWN"})
_STANDARD_TIME = {"SLURM_TIME_FORMAT": "standard"}


class SlurmBatch(BatchSystem):
    """A batch job under SLURM; see the module text for where each answer comes from."""

    system = "slurm"

    def _jobid(self) -> str:
        jobid = self.env.get("SLURM_JOB_ID") or self.env.get("SLURM_JOBID")
        if not jobid:
            raise BatchError("SLURM_JOB_ID is not set; run inside a SLURM job or give a job id")
        return _checked_jobid(jobid, "SLURM_JOB_ID")

    def _nodes(self) -> tuple[str, ...]:
        nodelist = self.env.get("SLURM_JOB_NODELIST") or self.env.get("SLURM_NODELIST")
        if not nodelist:
            raise BatchError(
                "SLURM_JOB_NODELIST is not set; run inside a SLURM job or give the nodes"
            )
        reply = ask(["scontrol", "show", "hostnames", nodelist])
        hosts = tuple(dict.fromkeys(line.strip() for line in reply.stdout.splitlines()))
        hosts = tuple(h for h in hosts if h)
        if not hosts or any(not _is_hostname(h) for h in hosts):
            raise BatchError(
                f"`{reply.command}` printed {excerpt(reply.stdout) or 'nothing'!r}, "
                "not one host name per line"
            )
        return hosts

    def _gpu_ids(self) -> tuple[str, ...]:
        count = self._gpu_count()
        visible = [d for d in self.env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
        if count and len(visible) == count:
            return tuple(d.strip() for d in visible)
        return tuple(str(i) for i in range(count))

    def _gpu_count(self) -> int:
        on_node = self.env.get("SLURM_GPUS_ON_NODE", "").strip()
        if on_node:
            if not on_node.isdigit():
                raise BatchError(f"SLURM_GPUS_ON_NODE is {on_node!r}, not a number of GPUs")
            return int(on_node)
        job_gpus = self.env.get("SLURM_JOB_GPUS", "").strip()
        if job_gpus:
            return len(_expand_ids(job_gpus, "SLURM_JOB_GPUS"))
        per_node = self.env.get("SLURM_GPUS_PER_NODE", "").strip()
        if per_node:
            # "4" or "a100:4"; several types ("a100:2,v100:2") add up.
            total = 0
            for part in per_node.split(","):
                number = part.rsplit(":", 1)[-1]
                if not number.isdigit():
                    raise BatchError(
                        f"SLURM_GPUS_PER_NODE is {per_node!r}, not a GPU count such as 4 or a100:4"
                    )
                total += int(number)
            return total
        return 0

    def _switches(self) -> list[tuple[str, tuple[str, ...]]]:
        # `scontrol show topology` fails ("No topology information available") where SLURM
        # has no topology plugin: blocks then follow hostname order.
        try:
            reply = run_query(["scontrol", "show", "topology"], timeout=20)
            if reply.returncode != 0:
                return []
            out = []
            for switch, nodes in parse_slurm_topology(reply.stdout):
                hosts = ask(["scontrol", "show", "hostnames", nodes]).stdout.split()
                out.append((switch, tuple(hosts)))
            return out
        except BatchError:
            return []

    def _node_memory(self, host: str) -> int | None:
        """``RealMemory`` (megabytes) of ``scontrol show node``, else the node's own."""
        try:
            reply = run_query(["scontrol", "show", "node", host], timeout=20)
        except BatchError:
            reply = None  # not installed here: the node's own
        if reply is not None and reply.returncode == 0:
            mem = parse_real_memory(reply.stdout)
            if mem is not None:
                return mem
        return super()._node_memory(host)

    def _machine(self) -> str:
        return self.env.get("SLURM_CLUSTER_NAME") or "slurm"

    def _query_end_time(self) -> float | None:
        jobid = _checked_jobid(self.jobid, "the job id")
        reply = ask(["squeue", "-h", "-j", jobid, "-o", "%e"], env=_STANDARD_TIME)
        end_text = _only_line(reply.stdout, reply.command, jobid)
        end = parse_end_time(end_text)
        if end is not None:
            return end
        # No usable end date (an unlimited job shows none): ask for the time left instead.
        now = self.clock()
        left_reply = ask(["squeue", "-h", "-j", jobid, "-o", "%L"], env=_STANDARD_TIME)
        left_text = _only_line(left_reply.stdout, left_reply.command, jobid)
        try:
            left = parse_time_left(left_text)
        except BatchError:
            raise BatchError(
                f"SLURM gave no readable end for job {jobid}: `{reply.command}` printed "
                f"{end_text!r} and `{left_reply.command}` printed {left_text!r}"
            ) from None
        return None if left is None else now + left

    def is_alive(self, jobid: str) -> bool:
        jobid = _checked_jobid(jobid, "the job id")
        reply = run_query(["squeue", "-h", "-j", jobid, "-o", "%T"])
        if reply.returncode != 0:
            if "invalid job id" in reply.stderr.lower():
                return False  # purged from the controller's memory: long gone
            raise reply.failure()
        states = [s.strip().upper() for s in reply.stdout.splitlines() if s.strip()]
        for state in states:
            if not re.fullmatch(r"[A-Z_]+", state):
                raise BatchError(
                    f"`{reply.command}` printed {state!r}, not a job state such as RUNNING"
                )
        return any(state not in DEAD_STATES for state in states)


def parse_real_memory(text: str) -> int | None:
    """Bytes from the ``RealMemory=<MB>`` of ``scontrol show node``'s output; ``None`` when
    it is missing or 0 (SLURM's default when a node's memory is not configured)."""
    m = re.search(r"\bRealMemory=(\d+)\b", text)
    return int(m.group(1)) << 20 if m is not None and int(m.group(1)) > 0 else None


def parse_end_time(text: str) -> float | None:
    """Read ``squeue -o %e`` (``2024-05-01T12:34:56``, local time) as Unix seconds.

    Returns ``None`` when SLURM shows no date (``N/A``, ``Unknown``, ``NONE``) or the text is
    not a date at all, so that the caller can fall back on the time left.
    """
    text = text.strip()
    if text.upper() in _NO_DATE:
        return None
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))
    except (ValueError, OverflowError):
        return None


def parse_time_left(text: str) -> float | None:
    """Read ``squeue -o %L`` (``D-HH:MM:SS``, ``HH:MM:SS`` or ``MM:SS``) as seconds.

    ``UNLIMITED`` gives ``None``; anything else that is not a time raises :class:`BatchError`.
    """
    text = text.strip()
    if text.upper() == "UNLIMITED":
        return None
    if ":" not in text:
        raise BatchError(f"{text!r} is not a SLURM time left such as 1-02:03:04")
    try:
        return parse_duration(text)
    except DurationError as e:
        raise BatchError(f"{text!r} is not a SLURM time left: {e}") from None


def _only_line(stdout: str, command: str, jobid: str) -> str:
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    if len(lines) != 1:
        said = "nothing" if not lines else f"{len(lines)} lines"
        raise BatchError(f"`{command}` printed {said}; expected one line for job {jobid}")
    return lines[0]


def _checked_jobid(jobid: str, where: str) -> str:
    jobid = jobid.strip()
    if not _JOBID.match(jobid):
        raise BatchError(f"{where} is {jobid!r}, not a SLURM job id such as 1234 or 1234_5")
    return jobid


def _expand_ids(text: str, where: str) -> list[str]:
    """Expand a device id list such as ``0,1,4-5`` into ``['0', '1', '4', '5']``."""
    ids: list[str] = []
    for part in text.split(","):
        part = part.strip()
        lo, dash, hi = part.partition("-")
        if lo.isdigit() and (not dash or hi.isdigit()):
            ids.extend(str(i) for i in range(int(lo), int(hi if dash else lo) + 1))
        else:
            raise BatchError(f"{where} is {text!r}, not a list of GPU ids such as 0,1,2")
    return ids


def _is_hostname(name: str) -> bool:
    return re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name) is not None
