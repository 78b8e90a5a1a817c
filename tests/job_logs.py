"""Helpers for tests that need a queue with batch jobs in it: task scripts, claims with real
leases, and event logs written in the runner's vocabulary (``runner-start``, ``start``,
``end``, ``preempt``, ``shrink``, ``expand``, ``reserve``, ``release``, ...)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from metaq_py.queue.lease import Claim
from metaq_py.queue.store import Queue

REPO = Path(__file__).resolve().parent.parent


def metaq(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real ``metaq`` command line in a subprocess."""
    return subprocess.run([sys.executable, "-m", "metaq_py", *args], cwd=cwd or REPO,
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "COLUMNS": "200"})


def new_queue(root: Path, config: str = "") -> Queue:
    """An initialised queue at ``root`` with ``config`` as its metaq.yaml (if given)."""
    Queue.init(root)
    if config:
        (root / "metaq.yaml").write_text(config)
    return Queue(root)


def add_task(q: Queue, relpath: str, directives: str = "", *, folder: str = "todo",
             age: float = 60.0) -> Path:
    """A task script at ``<folder>/<relpath>``, last changed ``age`` seconds ago (so it has
    settled, and so earlier-made tasks come first)."""
    path = q.root / folder / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{directives}echo hi\n")
    path.chmod(0o755)
    stamp = path.stat().st_mtime - age
    os.utime(path, (stamp, stamp))
    return path


def claim(q: Queue, task_id: str, *, jobid: str, machine: str = "m") -> Claim:
    """Claim the waiting task ``task_id`` for ``jobid``, as a runner does (a real lease)."""
    task = next(t for t in q.pending() if t.id == task_id)
    got = q.claim(task, machine=machine, jobid=jobid)
    assert got is not None
    return got


def write_log(root: Path, jobid: str, events: list[dict[str, Any]], *, tail: bytes = b""
              ) -> Path:
    """Write ``jobs/<jobid>/events.jsonl`` with ``events`` (each needs ``time`` and
    ``event``), then the raw bytes ``tail`` (such as a line cut short)."""
    path = root / "jobs" / jobid / "events.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = b"".join(json.dumps(e).encode() + b"\n" for e in events)
    path.write_bytes(data + tail)
    return path


def runner_start(t: float, hosts: list[str], *, end: float | None, machine: str = "m",
                 gpus_per_node: int = 0, mechanism: str = "CUA&SPAA", jobid: str = "1"
                 ) -> dict[str, Any]:
    return {"time": t, "event": "runner-start", "jobid": jobid, "machine": machine,
            "hosts": hosts, "gpus_per_node": gpus_per_node, "end": end, "mechanism": mechanism}


def start(t: float, task: str, hosts: list[str], *, kind: str = "rigid", project: str | None
          = None, notice: str | None = None, instant: bool | None = None, gpus: int = 0,
          attempt: int = 1) -> dict[str, Any]:
    return {"time": t, "event": "start", "task": task, "attempt": attempt, "hosts": hosts,
            "gpus": gpus, "project": project, "kind": kind, "resume": False, "notice": notice,
            "instant": instant, "lenders": []}


def end(t: float, task: str, hosts: list[str], *, outcome: str = "finished", seconds: float,
        gpus: int = 0, project: str | None = None, kind: str = "rigid", attempt: int = 1,
        user: str | None = None) -> dict[str, Any]:
    """An ``end`` event; without ``user``, as runners wrote it before they named the user."""
    return {"time": t, "event": "end", "task": task, "attempt": attempt, "hosts": hosts,
            "outcome": outcome, "exit_code": 0 if outcome == "finished" else 1,
            "signal": None, "seconds": seconds, "node_seconds": seconds * len(hosts),
            "gpu_seconds": seconds * gpus, "project": project, "kind": kind,
            **({"user": user} if user is not None else {})}
