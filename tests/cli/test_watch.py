"""``metaq status --watch`` as a real process: its screens, a refresh on a change in the
queue, and a clean exit on Ctrl-C (SIGINT)."""

from __future__ import annotations

import os
import queue as stdqueue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from metaq_py.queue.store import Queue

REPO = Path(__file__).resolve().parents[2]


def task(root: Path, rel: str, project: str = "lat") -> Path:
    path = root / "todo" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n#METAQ PROJECT {project}\nexit 0\n")
    path.chmod(0o755)
    return path


def waiting(total_row: str) -> str:
    """The waiting tasks in the ``total`` row of the counts table."""
    return [c.strip() for c in total_row.split("│")][2]


class Watching:
    """A running ``metaq status --watch`` whose output lines are collected as they come."""

    def __init__(self, root: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "metaq_py", "status", "--watch", "--interval", "1",
             "-q", str(root)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env={**os.environ, "COLUMNS": "160"})
        self.lines: stdqueue.Queue[str] = stdqueue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def until(self, wanted: str, timeout: float = 30.0) -> str:
        """The first line from now on that contains ``wanted``."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                line = self.lines.get(timeout=0.2)
            except stdqueue.Empty:
                continue
            self.seen.append(line)
            if wanted in line:
                return line
        raise AssertionError(f"no line with {wanted!r} in {timeout} s; saw:\n"
                             + "".join(self.seen[-40:]))


def test_watch_refreshes_on_a_change_and_exits_cleanly_on_sigint(tmp_path: Path) -> None:
    root = tmp_path / "q"
    q = Queue.init(root)
    for i in range(4):
        task(root, f"camp/t{i}.sh")
    for t in q.pending()[:3]:
        q.finish(q.claim(t, machine="m", jobid="7"), exit_code=0)
    w = Watching(root)
    try:
        w.until("metaq status --watch")
        progress = w.until("todo/camp")
        assert "3/4" in progress
        assert waiting(w.until("total")) == "1"
        task(root, "late.sh")  # a new task: the next screen counts it
        for _ in range(20):
            if waiting(w.until("total")) == "2":
                break
        else:
            raise AssertionError("no screen counted the new task")
        w.proc.send_signal(signal.SIGINT)
        _, err = w.proc.communicate(timeout=30)
    finally:
        if w.proc.poll() is None:
            w.proc.kill()
    assert w.proc.returncode == 0, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err


def test_watch_refuses_json_with_one_sentence(tmp_path: Path) -> None:
    Queue.init(tmp_path / "q")
    r = subprocess.run([sys.executable, "-m", "metaq_py", "status", "--watch", "--json", "-q",
                        str(tmp_path / "q")], cwd=REPO, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1
    assert r.stderr.strip() == ("metaq: --json, --watch and --prometheus each choose the "
                                "whole output; give one of them.")


def test_the_watch_screen_tells_of_junk_in_a_few_escaped_lines(tmp_path: Path) -> None:
    """Junk by the dozen makes the first few lines and a count, never a line each, and a name
    with a terminal escape reaches the screen escaped (as in ``metaq status``)."""
    from rich.console import Console

    from metaq_py.cli.status_commands import INVALID_SHOWN, watch_screen

    q = Queue.init(tmp_path / "q")
    (q.root / "todo" / "a\x1b[2Jb.sh").write_text("#!/bin/sh\n")  # not executable

    def shown() -> tuple[list[str], str]:
        console = Console(width=400, record=True, force_terminal=False)
        console.print(watch_screen(q, now=time.time()))
        text = console.export_text()
        return [line for line in text.splitlines() if line.startswith("invalid:")], text

    lines, text = shown()
    assert len(lines) == 1 and "a\\x1b[2Jb.sh" in lines[0] and "\x1b" not in text
    for i in range(INVALID_SHOWN + 5):
        (q.root / "todo" / f"junk-{i:02d}.txt").write_text("not a task\n")
    lines, text = shown()
    assert len(lines) == INVALID_SHOWN + 1 and "\x1b" not in text
    assert lines[-1].startswith("invalid: and 6 more files that are not tasks")
