"""Faults around the runner: tasks that misbehave, signals, a vanished queue, a full disk, a
clock that jumps, and a runner killed with ``kill -9`` whose leases the next one reclaims."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from metaq_py.launch.cgroup import runner_cgroup
from metaq_py.queue.logbook import read_logbook
from metaq_py.queue.store import Queue
from tests.runner_helpers import events, make_queue, of, runner, task, wait_until, where

METAQ = [sys.executable, "-m", "metaq_py"]


def _alive(token: str) -> list[int]:
    """Pids whose command line contains ``token``."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if token.encode() in f.read():
                        out.append(int(entry))
            except OSError:
                pass
    return out



def test_a_task_ignoring_sigterm_is_killed_after_the_grace_period(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    task(q, "stubborn.sh", "trap '' TERM; sleep 60 & wait; sleep 60", MIN_WC_TIME="1s")
    t0 = time.monotonic()
    runner(q, walltime=3.5, grace=1.0, margin=0.5).run()
    took = time.monotonic() - t0
    # Its allocation's 3.5 s; a runner that waited for the task (which ignores SIGTERM and
    # sleeps a minute) would take over 60. A loaded machine delays the kill by seconds only.
    assert took < 30
    end = of(events(q), "end", task="todo/stubborn.sh")[0]
    assert (end["outcome"], end["signal"]) == ("requeued", "SIGKILL")
    assert where(q, "stubborn.sh") == "pending"
    path = q.root / "todo/stubborn.sh"
    rec = read_logbook(path, path.stat().st_ino)
    assert rec is not None and rec.attempts == 0  # an interruption is not a failure


def test_children_that_try_to_outlive_their_task_die_with_it(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    token = f"orphan-{os.getpid()}-{time.time_ns()}"
    task(q, "forks.sh", f"""
        (exec -a {token} sleep 300) &
        nohup bash -c 'exec -a {token} sleep 300' >/dev/null 2>&1 &
        disown -a
        exit 0
    """)
    runner(q).run()
    assert where(q, "forks.sh") == "finished"
    assert wait_until(lambda: not _alive(token), 5), "a child outlived its task"


def test_a_gigabyte_of_output(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    task(q, "chatty.sh", "head -c 1G /dev/zero")
    task(q, "quiet.sh", "echo quiet")
    t0 = time.monotonic()
    runner(q).run()
    took = time.monotonic() - t0
    log = next((q.root / "jobs").glob("*/logs/todo/chatty.sh.log"))
    assert log.stat().st_size == 1 << 30
    assert where(q, "chatty.sh") == "finished" and where(q, "quiet.sh") == "finished"
    log.unlink()
    assert took < 30


def test_the_queue_removed_mid_run_ends_with_a_clear_message(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    task(q, "long.sh", "sleep 60")
    said: list[str] = []
    r = runner(q, say=said.append)

    def remove() -> None:
        wait_until(lambda: any((q.root / "working").rglob("long.sh")), 10)
        # As a person would: `rm -rf` again while the runner still writes its event log
        # into a folder being removed (one rmtree can then fail on "Directory not empty").
        while q.root.exists():
            shutil.rmtree(q.root, ignore_errors=True)

    remover = threading.Thread(target=remove)
    remover.start()
    t0 = time.monotonic()
    assert r.run() == 1
    assert time.monotonic() - t0 < 10
    assert any("has disappeared" in line for line in said)
    remover.join(10)
    assert not q.root.exists()  # the runner never makes a vanished queue again


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_a_full_disk_while_a_log_is_written_loses_no_task(tmp_path: Path) -> None:
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        q = make_queue(mount / "q")
        token = f"flood-{time.time_ns()}"
        started = tmp_path / "small-started"  # outside the small disk
        # The flood waits for the small task's start: started on a full disk, it could not
        # even write its hostfile (it would stay claimed for the next runner, still not lost,
        # but not what this test is about).
        task(q, "floods.sh", f"while [ ! -e {started} ]; do sleep 0.01; done\n"
                             f"(exec -a {token} head -c 8M /dev/zero)")
        task(q, "small.sh", f"touch {started}; sleep 0.5; echo small")
        said: list[str] = []
        r = runner(q, say=said.append)

        def operator() -> None:  # frees space once the flood is over, as a person would
            wait_until(lambda: any("cannot move" in line for line in said), 20)
            wait_until(lambda: not _alive(token), 20)
            next((q.root / "jobs").glob("*/logs/todo/floods.sh.log")).unlink()

        threading.Thread(target=operator).start()
        r.run()
        assert any("No space left on device" in line for line in said), said
        # Its output failed with ENOSPC, so the flooding task failed; the other one finished
        # once there was room to record it. Nothing was lost, nothing ran twice.
        assert where(q, "small.sh") == "finished", said
        assert where(q, "floods.sh") == "failed"
        assert (q.root / "jobs").glob("*/logs/todo/small.sh.log")
        starts = [e for e in events(q) if e["event"] == "start"]
        assert sorted(e["task"] for e in starts) == ["todo/floods.sh", "todo/small.sh"]
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_task_limited_in_file_size_fails_cleanly(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    task(q, "big.sh", "ulimit -f 64; head -c 1M /dev/zero > $METAQ_LOG.extra")
    runner(q).run()
    assert where(q, "big.sh") == "failed"
    assert "153" in (q.root / "failed/todo/big.sh.reason").read_text()  # 128 + SIGXFSZ


def test_a_clock_jump_on_the_batch_node_moves_no_deadline(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    q = make_queue(tmp_path / "q")
    started = tmp_path / "a-started"
    task(q, "a.sh", f"touch {started}; sleep 0.3", MIN_WC_TIME="1s")
    task(q, "b.sh", "sleep 0.3", MIN_WC_TIME="1s")
    r = runner(q, walltime=5.0, linger=True, max_tasks=1)
    real = time.time
    jumped = threading.Event()

    def jump() -> None:  # while the first task runs
        if wait_until(started.exists, 60):
            monkeypatch.setattr(time, "time", lambda: real() + 7200.0)  # two hours ahead
            jumped.set()

    threading.Thread(target=jump).start()
    t0 = time.monotonic()
    r.run()
    took = time.monotonic() - t0
    assert jumped.is_set()
    # Lingering, the runner stops at its own deadline (5 s - grace - margin = 3.5 s after its
    # start), not at once. A loaded machine only makes it later: the upper bound is there to
    # catch a runner that waits for the jumped clock (two hours), with room for any load.
    assert 2.8 <= took <= 60.0
    assert where(q, "a.sh") == "finished" and where(q, "b.sh") == "finished"


def test_a_signal_requeues_every_task_and_the_runner_exits(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    marker = tmp_path / "warned"
    ready = tmp_path / "ready"  # each task writes it once its trap is set
    ready.mkdir()
    task(q, "warned.sh", f"trap 'echo warned > {marker}; exit 0' USR1; touch {ready}/warned; "
                         f"sleep 60 & wait", SIGNAL="USR1@3")
    task(q, "plain.sh", f"touch {ready}/plain; sleep 60 & wait")
    proc = subprocess.Popen([*METAQ, "run", "--queue", str(q.root), "--nodes", "2",
                             "--grace", "1"], stderr=subprocess.PIPE, text=True)
    assert wait_until(lambda: len(list(ready.iterdir())) == 2, 60)
    proc.send_signal(signal.SIGUSR1)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert marker.read_text().strip() == "warned"
    assert where(q, "warned.sh") == "pending" and where(q, "plain.sh") == "pending"
    outcomes = sorted(e["outcome"] for e in of(events(q), "end"))
    assert outcomes == ["requeued", "requeued"]
    assert "received SIGUSR1" in of(events(q), "runner-stop")[0]["reason"]
    assert not list((q.root / "working").rglob("*.sh"))


def _kill_9_mid_task(q: Queue, out: Path) -> int:
    """Start a runner, kill -9 it once its task has written ``out``; return its pid."""
    proc = subprocess.Popen([*METAQ, "run", "--queue", str(q.root), "--nodes", "1"],
                            stderr=subprocess.DEVNULL)
    assert wait_until(out.exists, 20)
    proc.kill()
    proc.wait()
    return proc.pid


def _end_orphans(q: Queue) -> None:
    """Without a batch system to end them, tasks outlive a killed runner: end them here."""
    for pid in _alive(str(q.root / "working")):
        os.kill(pid, signal.SIGKILL)


def test_kill_9_leaves_leases_that_the_next_runner_reclaims(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    out = tmp_path / "runs"
    task(q, "work.sh", f"""
        echo "$METAQ_ATTEMPT $METAQ_RESUME" >> {out}
        if [ "$METAQ_ATTEMPT" = 1 ]; then sleep 30; fi
    """)
    dead = _kill_9_mid_task(q, out)
    leases = q.leases()
    assert len(leases) == 1 and leases[0].jobid.endswith(f"-{dead}")
    _end_orphans(q)
    listed = subprocess.run([*METAQ, "running", "--queue", str(q.root), "--json"],
                            capture_output=True, text=True, check=True)
    rows = json.loads(listed.stdout)
    assert rows[0]["alive"] is False and "is gone" in rows[0]["lost"]

    runner(q, nodes=1).run()
    reclaim = of(events(q), "reclaim", task="todo/work.sh")
    assert len(reclaim) == 1 and "is gone" in reclaim[0]["reason"]
    assert reclaim[0]["jobid"] == leases[0].jobid
    assert out.read_text().splitlines() == ["1 0", "2 1"]  # attempt raised, resumes
    assert where(q, "work.sh") == "finished"
    assert not q.leases()


@pytest.mark.skipif(runner_cgroup() is None, reason="no cgroup v2 this process may write")
def test_what_a_killed_runner_left_running_dies_before_its_task_runs_again(
        tmp_path: Path) -> None:
    """No task runs twice at once: the next runner on this machine kills what the tasks of a
    runner killed with kill -9 left running (their cgroups) before it takes the claims back."""
    q = make_queue(tmp_path / "q")
    out = tmp_path / "runs"
    task(q, "work.sh", f"""
        echo "$METAQ_ATTEMPT $$" >> {out}
        if [ "$METAQ_ATTEMPT" = 1 ]; then sleep 300; fi
    """)
    _kill_9_mid_task(q, out)
    orphan = int(out.read_text().split()[1])
    assert _running(orphan)  # nothing ended it: the runner's death alone does not
    subprocess.run([*METAQ, "run", "--queue", str(q.root), "--nodes", "1"], check=True,
                   capture_output=True, timeout=60)
    assert not _running(orphan)
    runs = out.read_text().splitlines()
    assert [r.split()[0] for r in runs] == ["1", "2"]
    assert where(q, "work.sh") == "finished" and not q.leases()


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_the_lease_of_a_second_claim_is_reclaimed_like_the_first(tmp_path: Path) -> None:
    """The killed runner had finished a task first: the lease of the task it was running is
    the one the next runner reads and reclaims, and the finished task's is gone."""
    q = make_queue(tmp_path / "q")
    out = tmp_path / "runs"
    quick = task(q, "quick.sh", "true")
    os.utime(quick, (time.time() - 60, time.time() - 60))  # queue order: quick.sh first
    task(q, "work.sh", f"""
        echo "$METAQ_ATTEMPT" >> {out}
        if [ "$METAQ_ATTEMPT" = 1 ]; then sleep 30; fi
    """)
    dead = _kill_9_mid_task(q, out)
    assert where(q, "quick.sh") == "finished"
    [lease] = q.leases()
    assert (lease.id, lease.pid) == ("todo/work.sh", dead)
    _end_orphans(q)
    runner(q, nodes=1).run()
    assert len(of(events(q), "reclaim", task="todo/work.sh")) == 1
    assert out.read_text().splitlines() == ["1", "2"]
    assert where(q, "work.sh") == "finished" and not q.leases()


def test_reset_dead_by_hand(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    task(q, "a.sh", "true")
    t = q.pending()[0]
    host = os.uname().nodename.split(".")[0]
    claim = q.claim(t, machine=host, jobid=f"{host}-999999", host=host, pid=999999)
    assert claim is not None
    done = subprocess.run([*METAQ, "reset", "--queue", str(q.root), "--dead"],
                          capture_output=True, text=True, check=True)
    assert "todo/a.sh" in done.stdout and "back in todo/" in done.stdout
    assert where(q, "a.sh") == "pending"
    path = q.root / "todo/a.sh"
    rec = read_logbook(path, path.stat().st_ino)
    assert rec is not None and rec.attempts == 1
    assert "metaq reset --dead" in rec.history[-1]["reason"]


def test_metaq_checkpoint_touches_the_file(tmp_path: Path) -> None:
    target = tmp_path / "cp"
    env = {**os.environ, "METAQ_CHECKPOINT_FILE": str(target)}
    subprocess.run([*METAQ, "checkpoint"], env=env, check=True)
    assert target.exists()
    env.pop("METAQ_CHECKPOINT_FILE")
    done = subprocess.run([*METAQ, "checkpoint"], env=env, capture_output=True, text=True)
    assert done.returncode == 1 and "METAQ_CHECKPOINT_FILE is not set" in done.stderr


def test_running_lists_nothing_on_an_idle_queue(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    done = subprocess.run([*METAQ, "running", "--queue", str(q.root)],
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "no task is running"
    assert isinstance(Queue(q.root), Queue)
