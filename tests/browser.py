"""A page opened in Debian's headless Chromium, watched through the DevTools protocol.

Chromium is started with ``--remote-debugging-pipe``: it reads the protocol's JSON messages
(each ended by a NUL byte) on its file descriptor 3 and writes on 4, so nothing listens on
the network. :func:`open_page` loads a local file in a fresh profile and reports what a
person would care about: every request the page made (a self-contained page makes none but
its own file), every console error and uncaught exception, how long it took to render, and a
screenshot. :meth:`Page.evaluate` asks the page anything; :meth:`Page.hover` moves the mouse.

Chromium runs as root here, as CI does, so it needs ``--no-sandbox``; the other switches keep
it from reaching for the network on its own (updates, sync, QUIC).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SWITCHES = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-extensions", "--disable-default-apps", "--hide-scrollbars",
            "--remote-debugging-pipe")


def chromium() -> str | None:
    """The Chromium binary Debian installs, or ``None``."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def need_chromium() -> None:
    """Skip the calling test when Chromium is missing, or fail it in CI, which installs it
    (``tests/capability.py``)."""
    if chromium() is None:
        from tests.capability import missing

        missing("chromium is not installed (apt-get install chromium; .ci/run does)")


class BrowserError(RuntimeError):
    """Chromium did not answer, or answered with an error."""


@dataclass
class Page:
    """A page loaded in a running Chromium; close it with :meth:`close`."""

    pid: int
    to_browser: int
    from_browser: int
    session: str
    profile: str
    url: str
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    render_seconds: float = 0.0
    _next: int = 0
    _buffer: bytes = b""

    @property
    def outside_requests(self) -> list[str]:
        """Requests for anything but the page's own file and the ``data:`` URLs inside it:
        what a self-contained page never makes."""
        return [u for u in self.requests if u != self.url and not u.startswith("data:")]

    # --- the protocol -------------------------------------------------------------------

    def _send(self, method: str, params: dict[str, Any] | None = None, *,
              session: bool = True) -> int:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        return self._next

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("Chromium did not answer in time")
            ready, _, _ = select.select([self.from_browser], [], [], left)
            if ready:
                chunk = os.read(self.from_browser, 1 << 20)
                if not chunk:
                    raise BrowserError("Chromium closed its pipe")
                self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        message: dict[str, Any] = json.loads(raw)
        self._note(message)
        return message

    def _note(self, message: dict[str, Any]) -> None:
        """Record the events a test judges: requests, console errors, exceptions."""
        method, params = message.get("method"), message.get("params", {})
        if method == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            self.errors.append(details.get("exception", {}).get("description")
                               or details.get("text", "an exception"))
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.errors.append(" ".join(str(a.get("value", a.get("description", "")))
                                        for a in params.get("args", [])))
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            self.errors.append(params["entry"].get("text", ""))

    def call(self, method: str, params: dict[str, Any] | None = None, *,
             session: bool = True, timeout: float = 60) -> dict[str, Any]:
        wanted = self._send(method, params, session=session)
        deadline = time.monotonic() + timeout
        while True:
            message = self._read(deadline)
            if message.get("id") == wanted:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result

    def wait_for(self, method: str, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            message = self._read(deadline)
            if message.get("method") == method:
                params: dict[str, Any] = message.get("params", {})
                return params

    # --- what a test asks --------------------------------------------------------------

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        result = self.call("Runtime.evaluate", {"expression": expression,
                                                "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression!r} threw {result['exceptionDetails']}")
        return result["result"].get("value")

    def hover(self, x: float, y: float) -> None:
        self.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})

    def screenshot(self, path: Path, *, full: bool = False) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full:
            params["captureBeyondViewport"] = True
        data = self.call("Page.captureScreenshot", params)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        """Close the browser (killed, if it does not answer) and remove its profile."""
        try:
            self.call("Browser.close", session=False, timeout=10)
        except (BrowserError, OSError):
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        for fd in (self.to_browser, self.from_browser):
            os.close(fd)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)
        shutil.rmtree(self.profile, ignore_errors=True)


def open_page(path: Path, *, width: int = 1280, height: int = 900) -> Page:
    """Start Chromium on a fresh profile and load ``path``; return when the page has loaded
    and painted, with its requests and errors so far recorded."""
    binary = chromium()
    if binary is None:
        raise BrowserError("chromium is not installed (apt-get install chromium)")
    profile = tempfile.mkdtemp(prefix="metaq-chromium-")
    commands_r, commands_w = os.pipe()
    replies_r, replies_w = os.pipe()
    actions = [(os.POSIX_SPAWN_DUP2, commands_r, 3), (os.POSIX_SPAWN_DUP2, replies_w, 4),
               (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
               (os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0),
               (os.POSIX_SPAWN_OPEN, 2, "/dev/null", os.O_WRONLY, 0)]
    pid = os.posix_spawn(binary, [binary, *SWITCHES, f"--user-data-dir={profile}",
                                  f"--window-size={width},{height}", "about:blank"],
                         os.environ, file_actions=actions)
    os.close(commands_r)
    os.close(replies_w)
    page = Page(pid, commands_w, replies_r, session="", profile=profile,
                url=path.resolve().as_uri())
    try:
        targets = page.call("Target.getTargets", session=False)["targetInfos"]
        target = next(t["targetId"] for t in targets if t["type"] == "page")
        page.session = page.call("Target.attachToTarget", {"targetId": target, "flatten": True},
                                 session=False)["sessionId"]
        for domain in ("Network", "Runtime", "Log", "Page"):
            page.call(f"{domain}.enable")
        page.call("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        began = time.monotonic()
        page.call("Page.navigate", {"url": page.url})
        page.wait_for("Page.loadEventFired")
        # one frame after the load event: the page has been laid out and painted
        page.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        page.render_seconds = time.monotonic() - began
    except BaseException:
        page.close()
        raise
    return page
