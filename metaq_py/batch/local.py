"""The local adapter: a pretend cluster on one machine, for laptops, workstations and tests.

The nodes are names only (``local0 .. localN-1``, ``N`` from the ``nnodes`` override, one by
default); every task really runs on this host. The job is the runner process itself, named
``<host>-<pid>``, so another runner on the same host can tell whether it is still alive. There
is no time limit unless a ``walltime`` or ``end_time`` override sets one. GPUs exist only when
the ``gpus_per_node`` override says so.
"""

from __future__ import annotations

import os
import re
import socket

from metaq_py.batch.base import BatchError, BatchSystem

__all__ = ["LocalBatch", "local_jobid"]


def local_jobid(host: str, pid: int) -> str:
    """The job id of a local runner: its host and process id."""
    return f"{host}-{pid}"


class LocalBatch(BatchSystem):
    """A pretend allocation on this host; see the module text."""

    system = "local"

    def _jobid(self) -> str:
        return local_jobid(_short_hostname(), os.getpid())

    def _nodes(self) -> tuple[str, ...]:
        count = self.overrides.nnodes or 1
        return tuple(f"local{i}" for i in range(count))

    def _gpu_ids(self) -> tuple[str, ...]:
        return ()

    def _machine(self) -> str:
        return _short_hostname()

    def _query_end_time(self) -> float | None:
        return None

    def is_alive(self, jobid: str) -> bool:
        m = re.fullmatch(r"(.+)-([0-9]+)", jobid.strip())
        if not m:
            raise BatchError(f"{jobid!r} is not a local job id such as myhost-12345")
        host, pid = m.group(1), int(m.group(2))
        if host != _short_hostname():
            raise BatchError(
                f"local job {jobid} ran on host {host}; only a runner there can tell "
                "whether it is alive"
            )
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True  # it exists, under another user
        return True


def _short_hostname() -> str:
    return socket.gethostname().split(".")[0]
