"""Issue 15, findings 9 and 15 and the weaker points: signals that used to kill the runner
outright, a task's setsid child, a cancel reaching a running task, a metaq.yaml that blocks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from metaq_py.errors import ConfigError
from metaq_py.queue.admin import QueueAdmin
from metaq_py.queue.store import Queue
from tests.hostile.harness import make_world, run_world
from tests.runner_helpers import make_queue, task, wait_until

METAQ = [sys.executable, "-m", "metaq_py"]



@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGUSR2, signal.SIGALRM])
def test_hup_usr2_and_alrm_requeue_like_term(tmp_path: Path, sig: signal.Signals) -> None:
    q = make_queue(tmp_path / "q")
    started = tmp_path / "started"
    task(q, "t.sh", f"touch {started}; sleep 30")
    proc = subprocess.Popen([*METAQ, "run", "--queue", str(q.root), "--nodes", "1",
                             "--grace", "1"], stderr=subprocess.PIPE, text=True)
    assert wait_until(started.exists, 20)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert f"received {sig.name}" in err
    assert (q.root / "todo/t.sh").exists()  # requeued, not orphaned in working/
    assert not list((q.root / "working").rglob("t.sh"))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_a_setsid_child_dies_with_its_task(tmp_path: Path) -> None:
    w = make_world(tmp_path, walltime=4.0, grace=0.5, margin=0.5)
    pidfile = tmp_path / "child.pid"
    task(w.q, "escape.sh", f"setsid bash -c 'echo $$ > {pidfile}; exec sleep 60' & sleep 60",
         MIN_WC_TIME="1s")
    run_world(w)
    assert pidfile.exists()
    child = int(pidfile.read_text())
    assert wait_until(lambda: not _alive(child), 5), "the setsid child outlived its task"


def test_a_cancel_reaches_a_running_task_within_two_seconds(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    started = tmp_path / "started"
    task(w.q, "long.sh", f"touch {started}; sleep 60")
    stopped: list[float] = []

    def cancel() -> None:
        assert wait_until(started.exists, 20)
        t0 = time.monotonic()
        QueueAdmin(Queue(w.q.root)).cancel("todo/long.sh")
        wait_until(lambda: (w.q.root / "cancelled/todo/long.sh").exists(), 10)
        stopped.append(time.monotonic() - t0)

    helper = threading.Thread(target=cancel)
    helper.start()
    run_world(w)
    helper.join(15)
    assert stopped and stopped[0] < 2.0, stopped
    assert w.where("todo/long.sh") == ["cancelled"]


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "deep"])
def test_a_metaq_yaml_that_would_block_is_one_sentence(tmp_path: Path, kind: str) -> None:
    q = make_queue(tmp_path / "q")
    config = q.root / "metaq.yaml"
    config.unlink()
    if kind == "fifo":
        os.mkfifo(config)
    elif kind == "dev-zero":
        config.symlink_to("/dev/zero")
    else:
        config.write_text("a: " + "[" * 100000)
    t0 = time.monotonic()
    with pytest.raises(ConfigError) as caught:
        Queue(q.root)
    assert time.monotonic() - t0 < 5
    assert "\n" not in str(caught.value) and str(config) in str(caught.value)
    done = subprocess.run([*METAQ, "status", "--queue", str(q.root)], capture_output=True,
                          text=True, timeout=20)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
