"""The PBS adapter (PBS Pro / OpenPBS and Torque): a runner inside ``qsub`` asks PBS.

- job id: ``PBS_JOBID`` (METAQ read ``PBS_JOB_ID``, which PBS never sets);
- nodes: ``$PBS_NODEFILE``, which names a host once per slot; each host is kept once, in
  file order;
- GPUs: ``CUDA_VISIBLE_DEVICES`` when the site's hooks set it, else ``$PBS_GPUFILE``
  (Torque: lines like ``node01-gpu0``), else ``ngpus`` from ``qstat -f`` (per chunk in
  ``Resource_List.select``, else the job's total divided by its nodes);
- end time: ``qstat -f ID``; Torque's ``Walltime.Remaining`` (seconds) when present, else
  the start (``stime``, or Torque's ``start_time``) plus ``Resource_List.walltime``;
- liveness: ``job_state`` from ``qstat -f ID``; a job PBS reports unknown or finished is dead.

``qstat -f`` wraps long values onto continuation lines that start with a tab;
:func:`parse_qstat_full` joins them back.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from metaq_py.batch.base import BatchError, BatchSystem
from metaq_py.batch.commands import Reply, ask, excerpt, run_query
from metaq_py.durations import DurationError, parse_duration

__all__ = ["DEAD_STATES", "PbsBatch", "parse_qstat_full"]

DEAD_STATES = frozenset({"C", "F", "X"})
"""``job_state`` letters of an ended job: completed (Torque), finished and expired (PBS Pro).

``E`` (exiting) is not among them: the job still holds its nodes while it cleans up.
"""

_JOBID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-\[\]@]*$")
_GONE = ("unknown job id", "job has finished")


class PbsBatch(BatchSystem):
    """A batch job under PBS; see the module text for where each answer comes from."""

    system = "pbs"

    def _jobid(self) -> str:
        jobid = self.env.get("PBS_JOBID")
        if not jobid:
            raise BatchError("PBS_JOBID is not set; run inside a PBS job or give a job id")
        return _checked_jobid(jobid, "PBS_JOBID")

    def _nodes(self) -> tuple[str, ...]:
        path = self.env.get("PBS_NODEFILE")
        if not path:
            raise BatchError("PBS_NODEFILE is not set; run inside a PBS job or give the nodes")
        try:
            lines = Path(path).read_text(errors="replace").splitlines()
        except OSError as e:
            raise BatchError(f"PBS_NODEFILE {path} cannot be read: {e.strerror}") from None
        hosts = tuple(dict.fromkeys(line.strip() for line in lines if line.strip()))
        if not hosts:
            raise BatchError(f"PBS_NODEFILE {path} names no host")
        for host in hosts:
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", host):
                raise BatchError(f"PBS_NODEFILE {path} has {host!r}, which is not a host name")
        return hosts

    def _gpu_ids(self) -> tuple[str, ...]:
        visible = [d.strip() for d in self.env.get("CUDA_VISIBLE_DEVICES", "").split(",")]
        visible = [d for d in visible if d]
        if visible:
            return tuple(visible)
        gpufile = self.env.get("PBS_GPUFILE")
        if gpufile:
            return _gpufile_ids(gpufile)
        return tuple(str(i) for i in range(self._qstat_gpu_count()))

    def _qstat_gpu_count(self) -> int:
        fields = self._qstat_self()
        select = fields.get("Resource_List.select", "")
        per_chunk = re.search(r"(?:^|:)ngpus=([0-9]+)", select)
        if per_chunk:
            return int(per_chunk.group(1))
        total = fields.get("Resource_List.ngpus", "").strip()
        if not total:
            return 0
        if not total.isdigit():
            raise BatchError(f"qstat -f gives Resource_List.ngpus = {total!r}, not a number")
        return int(total) // max(1, len(self._nodes()))

    def _node_memory(self, host: str) -> int | None:
        """``resources_available.mem`` of ``pbsnodes``, else the node's own."""
        try:
            reply = run_query(["pbsnodes", host], timeout=20)
        except BatchError:
            reply = None  # not installed here: the node's own
        if reply is not None and reply.returncode == 0:
            mem = parse_pbs_mem(reply.stdout)
            if mem is not None:
                return mem
        return super()._node_memory(host)

    def _machine(self) -> str:
        _, _, server = self.jobid.partition(".")
        server = server or self.env.get("PBS_SERVER", "")
        return server.split(".")[0] or "pbs"

    def _query_end_time(self) -> float | None:
        now = self.clock()
        fields = self._qstat_self()
        remaining = fields.get("Walltime.Remaining")
        if remaining is not None:
            return now + _seconds(remaining, "Walltime.Remaining")
        walltime = fields.get("Resource_List.walltime")
        if walltime is None:
            return None  # no limit asked for, and the server sets none
        start_text = fields.get("stime") or fields.get("start_time")
        if start_text is None:
            raise BatchError(
                f"qstat -f {self.jobid} shows no stime or start_time; is the job running?"
            )
        return _start_time(start_text) + _seconds(walltime, "Resource_List.walltime")

    def is_alive(self, jobid: str) -> bool:
        jobid = _checked_jobid(jobid, "the job id")
        reply = run_query(["qstat", "-f", jobid])
        if reply.returncode != 0:
            said = (reply.stderr + reply.stdout).lower()
            if any(phrase in said for phrase in _GONE):
                return False
            raise reply.failure()
        state = _fields(reply).get("job_state", "").strip().upper()
        if not re.fullmatch(r"[A-Z]", state):
            raise BatchError(
                f"`{reply.command}` shows job_state {state!r}, not a PBS state letter such as R"
            )
        return state not in DEAD_STATES

    def _qstat_self(self) -> dict[str, str]:
        return _fields(ask(["qstat", "-f", _checked_jobid(self.jobid, "the job id")]))


def parse_qstat_full(text: str) -> dict[str, str]:
    """Read one job's ``qstat -f`` output into ``{attribute: value}``.

    Attribute lines are indented ``name = value``; a line starting with a tab continues the
    value before it. The ``Job Id:`` header is kept under the key ``Job Id``.
    """
    fields: dict[str, str] = {}
    last: str | None = None
    for line in text.splitlines():
        if line.startswith("\t") and last is not None:
            fields[last] += line.strip()
            continue
        header = re.match(r"^Job Id:\s*(\S+)", line)
        if header:
            fields["Job Id"] = header.group(1)
            last = None
            continue
        m = re.match(r"^\s+([A-Za-z_][\w.]*) = ?(.*)$", line)
        if m:
            last = m.group(1)
            fields[last] = m.group(2).strip()
    return fields


def _fields(reply: Reply) -> dict[str, str]:
    fields = parse_qstat_full(reply.stdout)
    if "job_state" not in fields:
        raise BatchError(
            f"`{reply.command}` printed {excerpt(reply.stdout) or 'nothing'!r}, "
            "not a job's attributes (no job_state line)"
        )
    return fields


def _seconds(text: str, name: str) -> float:
    try:
        return parse_duration(text)
    except DurationError as e:
        raise BatchError(f"qstat -f gives {name} = {text!r}, not a duration: {e}") from None


def _start_time(text: str) -> float:
    """Read a ``qstat -f`` time stamp (``Mon May  6 10:00:05 2024``, local time; Torque may
    print epoch seconds instead)."""
    text = text.strip()
    if text.isdigit():
        return float(text)
    try:
        return time.mktime(time.strptime(" ".join(text.split()), "%a %b %d %H:%M:%S %Y"))
    except (ValueError, OverflowError):
        raise BatchError(
            f"qstat -f gives a start time {text!r}, not a date like 'Mon May  6 10:00:05 2024'"
        ) from None


def _gpufile_ids(path: str) -> tuple[str, ...]:
    """The GPU ids of the first host in a Torque ``PBS_GPUFILE`` (``host-gpuN`` lines)."""
    try:
        lines = [line.strip() for line in Path(path).read_text().splitlines() if line.strip()]
    except OSError as e:
        raise BatchError(f"PBS_GPUFILE {path} cannot be read: {e.strerror}") from None
    ids: dict[str, list[str]] = {}
    for line in lines:
        m = re.fullmatch(r"(.+)-gpu([0-9]+)", line)
        if not m:
            raise BatchError(f"PBS_GPUFILE {path} has {line!r}, not a line like node01-gpu0")
        ids.setdefault(m.group(1), []).append(m.group(2))
    first = next(iter(ids.values()), [])
    return tuple(dict.fromkeys(first))


def _checked_jobid(jobid: str, where: str) -> str:
    jobid = jobid.strip()
    if not _JOBID.match(jobid):
        raise BatchError(f"{where} is {jobid!r}, not a PBS job id such as 1234.server")
    return jobid


_PBS_UNITS = {"b": 1, "kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30, "tb": 1 << 40, "pb": 1 << 50}


def parse_pbs_mem(text: str) -> int | None:
    """Bytes from the ``resources_available.mem = <size>`` line of ``pbsnodes``'s output (a
    PBS size: a whole number with ``b``, ``kb``, ``mb``, ``gb``, ``tb`` or ``pb``; kilobytes
    without a unit, as PBS reads a bare ``mem``); ``None`` when it is missing."""
    m = re.search(r"resources_available\.mem\s*=\s*(\d+)([kmgtp]?b)?\s*$", text,
                  re.MULTILINE | re.IGNORECASE)
    if m is None:
        return None
    return int(m.group(1)) * _PBS_UNITS[(m.group(2) or "kb").lower()]
