"""``metaq status --watch`` in a real terminal (a pseudo-terminal), ended by a signal: the
live display hides the cursor while it redraws, and must show it again however it ends, or
the person's shell is left without one."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from metaq_py.queue.store import Queue

REPO = Path(__file__).resolve().parents[2]
HIDE, SHOW = b"\x1b[?25l", b"\x1b[?25h"
"""The terminal's escapes that hide and show the cursor (DECTCEM), as rich writes them."""


def _read(fd: int, until: bytes | None, timeout: float = 30.0) -> bytes:
    """What the terminal shows until ``until`` appears (``None``: until the process closes
    it), within ``timeout`` seconds."""
    got = b""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: every writer of the terminal has closed it
            return got
        if not chunk:
            return got
        got += chunk
        if until is not None and until in got:
            return got
    raise AssertionError(f"no {until!r} in {timeout} s; the terminal showed {got[-400:]!r}")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT],
                         ids=["SIGTERM", "SIGHUP", "SIGINT"])
def test_watch_shows_the_cursor_again_when_a_signal_ends_it(tmp_path: Path,
                                                            signum: signal.Signals) -> None:
    root = tmp_path / "q"
    Queue.init(root)
    main, terminal = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "metaq_py", "status", "--watch", "-q", str(root)], cwd=REPO,
        stdin=terminal, stdout=terminal, stderr=terminal, start_new_session=True,
        env={**os.environ, "TERM": "xterm", "COLUMNS": "120", "LINES": "40"})
    os.close(terminal)
    try:
        shown = _read(main, b"metaq status --watch")
        assert HIDE in shown  # a live display in a terminal: the cursor is hidden
        proc.send_signal(signum)
        shown += _read(main, None)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(main)
    assert shown.rfind(SHOW) > shown.rfind(HIDE), shown[-400:]
