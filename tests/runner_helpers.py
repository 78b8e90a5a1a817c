"""Helpers for the runner's tests: a small queue with fast heartbeats, task scripts, an
in-process runner on the local batch adapter, and readers for what it recorded."""

from __future__ import annotations

import itertools
import json
import textwrap
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from metaq_py.batch import BatchOverrides, detect_batch
from metaq_py.queue.finding import locate
from metaq_py.queue.store import Queue
from metaq_py.runner.loop import Runner, RunOptions

SETTINGS = """\
folders: [priority, todo]
defaults:
  min_wc_time: "5m"
caps:
  launch_pause: 0
  attempts: 5
heartbeat: 1s
stale_after: 3s
poll_interval: 1s
"""


def make_queue(root: Path, settings: str = SETTINGS) -> Queue:
    """A fresh queue at ``root`` with test-friendly settings."""
    Queue.init(root)
    (root / "metaq.yaml").write_text(settings)
    return Queue(root)


def task(q: Queue, name: str, body: str, *, folder: str = "todo", **directives: object) -> Path:
    """Write an executable bash task ``folder/name`` with ``#METAQ`` directives (keys in
    upper case, ``MIN_WC_TIME`` defaulting to 1 minute) and ``body``."""
    directives.setdefault("MIN_WC_TIME", "1m")
    lines = ["#!/bin/bash"]
    lines += [f"#METAQ {k} {v}" for k, v in directives.items()]
    path = q.root / folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    # Whole and executable at once, as `metaq submit` does: a scan never sees half a task.
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("\n".join(lines) + "\n" + textwrap.dedent(body).lstrip("\n"))
    tmp.chmod(0o755)
    tmp.rename(path)
    return path


def runner(q: Queue, *, nodes: int = 4, walltime: float | None = None, gpus: int | None = None,
           cores: int | None = None, say: Callable[[str], None] | None = None,
           **options: object) -> Runner:
    """An in-process runner on a local pretend cluster (no signal handlers), telling its
    lines to ``say`` (by default to no one)."""
    batch = detect_batch(overrides=BatchOverrides(system="local", nnodes=nodes,
                                                  walltime=walltime, gpus_per_node=gpus,
                                                  cores_per_node=cores),
                         env={})
    options.setdefault("grace", 1.0)
    options.setdefault("margin", 0.5)
    return Runner(q, batch, options=RunOptions(handle_signals=False, **options),
                  say=say or (lambda line: None))


def events(q: Queue) -> list[dict]:
    """Every event of every job of ``q``, in time order."""
    out = []
    for log in sorted((q.root / "jobs").glob("*/events.jsonl")):
        out += [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return sorted(out, key=lambda e: e["time"])


def of(evs: list[dict], kind: str, **match: object) -> list[dict]:
    """The events named ``kind`` whose fields equal ``match``."""
    return [e for e in evs if e["event"] == kind and all(e.get(k) == v for k, v in match.items())]


def host_intervals(evs: list[dict]) -> dict[str, list[tuple[float, float, str]]]:
    """For each host, the (start, end, task) intervals during which a task held it."""
    open_: dict[str, dict] = {}
    out: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    for e in evs:
        if e["event"] == "start":
            open_[e["task"]] = e
        elif e["event"] == "end" and e["task"] in open_:
            s = open_.pop(e["task"])
            for h in s["hosts"]:
                out[h].append((s["time"], e["time"], e["task"]))
    return out


def assert_no_shared_host(evs: list[dict]) -> None:
    """No host ever ran two tasks at the same time."""
    for host, spans in host_intervals(evs).items():
        spans.sort()
        for (_s1, e1, t1), (s2, _e2, t2) in itertools.pairwise(spans):
            assert s2 >= e1, f"{host} ran {t1} until {e1} and {t2} from {s2}"


def where(q: Queue, relpath: str, folder: str = "todo") -> str:
    """The state of task ``folder/relpath``."""
    e = locate(q, folder, relpath)
    assert e is not None, f"{folder}/{relpath} is lost"
    return e.state


def wait_until(predicate: Callable[[], object], timeout: float = 20.0) -> bool:
    """Whether ``predicate()`` came true within ``timeout`` seconds (checked every 50 ms), for
    tests that watch a real runner from outside."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False
