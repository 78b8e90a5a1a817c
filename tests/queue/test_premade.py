"""Files made ahead of need (metaq_py.queue.premade) and shared hostfiles
(metaq_py.launch.hostfiles): what they put in place, and what they must never replace."""

from __future__ import annotations

import math
import os
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from metaq_py.launch import HostFiles, LaunchError
from metaq_py.queue.premade import PROBE_EVERY, Kind, Spares


@pytest.fixture
def spares(tmp_path: Path) -> Iterator[Spares]:
    made = Spares(tmp_path / ".spares", depth=3, slow=0.0)  # the helper always makes them
    deadline = time.monotonic() + 5
    while any(made.ready(k) < 3 for k in Kind) and time.monotonic() < deadline:
        time.sleep(0.01)
    yield made
    made.close()


def test_a_spare_folder_goes_only_where_nothing_is(spares: Spares, tmp_path: Path) -> None:
    assert spares.folder(tmp_path / "run")
    assert (tmp_path / "run").is_dir() and not any((tmp_path / "run").iterdir())
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "state").write_text("42")
    assert not spares.folder(kept)  # an earlier attempt's folder stays as it was
    assert (kept / "state").read_text() == "42"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert not spares.folder(empty)
    assert not spares.folder(tmp_path / "no" / "parent")  # the caller makes those itself


def test_a_spare_file_never_replaces_a_log(spares: Spares, tmp_path: Path) -> None:
    log = tmp_path / "t.log"
    assert spares.empty_file(log)
    assert log.read_bytes() == b"" and stat.S_IMODE(log.stat().st_mode) == 0o644 & ~_umask()
    log.write_text("first attempt\n")
    assert not spares.empty_file(log)  # a resumed task appends to what it wrote before
    assert log.read_text() == "first attempt\n"


def test_a_block_file_is_handed_over_open(spares: Spares, tmp_path: Path) -> None:
    taken = spares.block_file()
    assert taken is not None
    fd, path = taken
    os.write(fd, b"{}")
    os.ftruncate(fd, 2)
    os.close(fd)
    assert path.read_bytes() == b"{}"
    assert spares.block_file() is not None and spares.block_file()[1] != path


def test_without_spares_the_callers_make_their_own(tmp_path: Path) -> None:
    made = Spares(tmp_path / ".spares", depth=0)
    try:
        assert not made.folder(tmp_path / "run")
        assert not made.empty_file(tmp_path / "t.log")
        assert made.block_file() is None
    finally:
        made.close()


def _helpers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "metaq spares"]


def test_where_creates_are_cheap_the_loop_makes_one_spare_now_and_then(tmp_path: Path) -> None:
    before = _helpers()
    made = Spares(tmp_path / ".spares", depth=4, slow=math.inf)  # no create is dear
    try:
        assert not made.ahead and _helpers() == before  # no helper thread at all
        assert 0 <= made.create_time < 1  # timed: the first spare of each kind
        assert [made.ready(k) for k in Kind] == [1, 1, 1]
        assert made.folder(tmp_path / "first")
        taken = 1
        while taken < PROBE_EVERY - 1:
            assert not made.folder(tmp_path / f"d{taken}")  # none ready: the caller makes it
            taken += 1
        assert made.ready(Kind.DIR) == 0
        assert not made.folder(tmp_path / "last")  # the 256th ask makes one, timed ...
        assert made.ready(Kind.DIR) == 1 and made.folder(tmp_path / "next")  # ... for the next
    finally:
        made.close()


def test_the_helper_rests_once_creates_are_cheap_again(tmp_path: Path) -> None:
    made = Spares(tmp_path / ".spares", depth=4, slow=0.0)  # every create is dear
    try:
        assert made.ahead and len(_helpers()) == 1
        made.slow = math.inf  # from now on, every create is cheap
        deadline = time.monotonic() + 5
        while made.ahead and time.monotonic() < deadline:
            made.folder(tmp_path / f"d{time.monotonic_ns()}")  # takes wake the helper
            time.sleep(0.01)
        assert not made.ahead  # the helper's own creates turned it off
        ready = [made.ready(k) for k in Kind]
        time.sleep(0.1)
        assert [made.ready(k) for k in Kind] == ready  # and it makes no more
    finally:
        made.close()


def _slow_mkdir(monkeypatch: pytest.MonkeyPatch, *, waits: bool) -> None:
    """Make every folder of the spares take 20 ms: waiting (as for a metadata server), or
    spinning on the CPU (as the kernel does for a dear local inode)."""
    real = os.mkdir

    def mkdir(path: str, mode: int = 0o777) -> None:
        if waits:
            time.sleep(0.02)
        else:
            end = time.thread_time() + 0.02
            while time.thread_time() < end:
                pass
        real(path, mode)

    monkeypatch.setattr("metaq_py.queue.premade.os.mkdir", mkdir)


def test_a_create_that_waits_turns_the_helper_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _slow_mkdir(monkeypatch, waits=True)
    made = Spares(tmp_path / ".spares", depth=4, slow=0.005)
    try:
        assert made.create_time > 0.005 and made.ahead
    finally:
        made.close()


def test_a_create_that_costs_only_cpu_leaves_the_loop_to_make_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _slow_mkdir(monkeypatch, waits=False)
    before = _helpers()
    made = Spares(tmp_path / ".spares", depth=4, slow=0.005)
    try:
        # 20 ms of the thread's own CPU in the one timed folder, and still no wait to hide
        assert made.create_time < 0.005 and not made.ahead and _helpers() == before
    finally:
        made.close()


@pytest.mark.skipif(not Path("/proc/thread-self/schedstat").exists(),
                    reason="the kernel keeps no scheduler statistics here")
def test_a_create_that_waits_only_for_a_cpu_leaves_the_loop_to_make_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a busy node a create's wall time includes waiting for a CPU, which a helper thread
    more would only lengthen: that wait is not counted (seen on a loaded CI machine)."""
    _slow_mkdir(monkeypatch, waits=False)
    cpu = min(os.sched_getaffinity(0))
    mine = os.sched_getaffinity(0)
    rival = subprocess.Popen([sys.executable, "-c", f"import os\nos.sched_setaffinity(0, {{{cpu}}})"
                              "\nprint(flush=True)\nwhile True: pass"], stdout=subprocess.PIPE)
    try:
        assert rival.stdout is not None and rival.stdout.readline()  # spinning on ``cpu``
        os.sched_setaffinity(0, {cpu})  # this thread shares that one CPU with it
        began = time.perf_counter()
        made = Spares(tmp_path / ".spares", depth=4, slow=0.005)
        shared = time.perf_counter() - began
    finally:
        os.sched_setaffinity(0, mine)
        rival.kill()
        rival.wait()
    try:
        assert shared > 0.030  # 20 ms of CPU, with a rival on the CPU: the wait was real
        assert made.create_time < 0.005 and not made.ahead
    finally:
        made.close()


def test_closing_removes_every_spare(spares: Spares, tmp_path: Path) -> None:
    spares.folder(tmp_path / "run")
    spares.close()
    assert not (tmp_path / ".spares").exists()
    assert (tmp_path / "run").is_dir()  # what was handed out stays


def test_one_hostfile_per_host_list(tmp_path: Path) -> None:
    files = HostFiles(tmp_path / "hostfiles")
    ab = files.path(("a", "b"))
    assert files.path(["a", "b"]) == ab
    assert ab.read_text() == "a\nb\n"
    ba = files.path(("b", "a"))  # the order is the task's, so it is another list
    assert ba != ab and ba.read_text() == "b\na\n"
    assert not os.access(ab, os.W_OK) or os.geteuid() == 0  # read-only (root writes anyway)
    assert stat.S_IMODE(ab.stat().st_mode) == 0o444
    assert sorted(p.name for p in (tmp_path / "hostfiles").iterdir()) == sorted(
        [ab.name, ba.name])  # no temporary file left behind


def test_a_hostfile_that_cannot_be_written_is_a_launch_error(tmp_path: Path) -> None:
    (tmp_path / "hostfiles").write_text("not a folder")
    with pytest.raises(LaunchError, match="cannot write the hostfile"):
        HostFiles(tmp_path / "hostfiles").path(("a",))


def _umask() -> int:
    old = os.umask(0)
    os.umask(old)
    return old
