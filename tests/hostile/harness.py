"""The hostile-queue harness: a queue with one good task, something planted in it, and a
real runner (in this process, on the local pretend cluster) that must get through.

A case is one row of ``(name, plant, expect)``: ``plant(world)`` puts its junk in place,
the runner runs for at most :data:`LIMIT` seconds, and ``expect(world)`` asserts what must be
true after. Adding a case is writing those two small functions and one row.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from metaq_py.queue.store import Queue
from metaq_py.runner.loop import Runner
from tests.runner_helpers import make_queue, runner, task

LIMIT = 30.0
"""Seconds a runner may take on a hostile queue before the case counts as a hang."""


@dataclass
class World:
    """One hostile queue: ``q`` with the good task ``todo/good.sh``, a private folder
    ``victim/`` outside the queue whose files must stay as they are, and the runner."""

    q: Queue
    tmp: Path
    victim: Path
    run: Runner
    lines: list[str] = field(default_factory=list)
    error: BaseException | None = None

    @property
    def jobid(self) -> str:
        return self.run.jobid

    def ran(self, marker: str) -> bool:
        """Whether a task wrote ``marker`` into the shared output folder."""
        return (self.tmp / "out" / marker).exists()

    def where(self, ident: str) -> list[str]:
        """The folders of the queue a task file ``ident`` (``todo/x.sh``) is found under."""
        folder, rel = ident.split("/", 1)
        found = []
        for state in ("", "hold/", "finished/", "failed/", "rejected/", "cancelled/"):
            if (self.q.root / f"{state}{folder}" / rel).exists():
                found.append(state.rstrip("/") or "pending")
        found += ["working" for _ in (self.q.root / "working").rglob(rel.rsplit("/")[-1])]
        return found


def good_task(q: Queue, name: str, out: Path, body: str = "true", **directives: object) -> Path:
    """A task that records that it ran in ``out/<name>`` and then runs ``body``."""
    return task(q, name, f"touch {out}/{name}\n{body}\n", **directives)


def age(q: Queue) -> None:
    """Make every file under the task folders and notices look settled (a minute old)."""
    old = time.time() - 60
    for folder in (*q.config.folders, "notices"):
        top = q.root / folder
        paths = [str(top)]
        for dirpath, dirs, files in os.walk(top):  # what cannot be listed (too deep) is left
            paths += [os.path.join(dirpath, n) for n in (*dirs, *files)]
        for p in paths:
            with contextlib.suppress(OSError):
                os.utime(p, (old, old), follow_symlinks=False)


def make_world(tmp: Path, *, settings: str | None = None, nodes: int = 2,
               **options: object) -> World:
    """A queue with one good task and a private victim folder; the runner is made but not
    started."""
    q = make_queue(tmp / "q") if settings is None else make_queue(tmp / "q", settings)
    (tmp / "out").mkdir()
    victim = tmp / "victim"
    victim.mkdir(mode=0o700)
    (victim / "notes.txt").write_text("secret\n")
    good_task(q, "good.sh", tmp / "out")
    lines: list[str] = []
    return World(q, tmp, victim, runner(q, nodes=nodes, say=lines.append, **options), lines)


def run_world(world: World, limit: float = LIMIT) -> None:
    """Run the world's runner in a thread; a hang (over ``limit`` s) fails the case."""
    def go() -> None:
        try:
            world.run.run()
        except BaseException as e:  # reported by the case
            world.error = e

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    thread.join(limit)
    assert not thread.is_alive(), f"the runner hung on the hostile queue: {world.lines[-5:]}"
    assert world.error is None, f"the runner crashed: {world.error!r}"


Plant = Callable[[World], None]
Expect = Callable[[World], None]
