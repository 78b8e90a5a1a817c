"""``metaq log`` on a queue whose output goes to stream files (issue 29, part 1): real
runners, real task processes, the real command line."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

from tests.runner_helpers import SETTINGS, make_queue, runner, task, where

STREAMS = SETTINGS + "output: streams\n"


def log(q, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["metaq", "log", "--queue", str(q.root), *args],
                          capture_output=True, timeout=timeout)


def test_binary_output_without_a_newline_comes_back_byte_for_byte(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q", STREAMS)
    task(q, "bin.sh", "printf 'a\\000b\\377c'\nprintf 'oops' >&2\nhead -c 3000000 /dev/zero\n")
    assert runner(q).run() == 0
    assert where(q, "bin.sh") == "finished"
    out = log(q, "bin.sh")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(b"a\x00b\xffc") and b"oops" in out.stdout
    assert out.stdout.count(b"\x00") == 3_000_001 and len(out.stdout) == 5 + 4 + 3_000_000
    err = log(q, "bin.sh", "--stderr")
    assert err.stdout == b"oops"
    # One inode per finished task: no log file, no run folder, no logbook beside it.
    assert not list((q.root / "jobs").rglob("*.log"))
    assert sorted(p.name for p in (q.root / "finished/todo").iterdir()) == ["bin.sh"]


def test_each_attempt_has_its_own_output(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q", STREAMS)
    task(q, "again.sh", 'echo "attempt $METAQ_ATTEMPT"\n[ "$METAQ_ATTEMPT" -gt 1 ] || exit 3\n',
         RETRIES=1)
    assert runner(q).run() == 0
    assert where(q, "again.sh") == "finished"
    assert log(q, "again.sh").stdout == b"attempt 2\n"
    assert log(q, "again.sh", "--attempt", "1").stdout == b"attempt 1\n"
    none = log(q, "again.sh", "--attempt", "3")
    assert none.stdout == b"" and b"no output of attempt 3 of todo/again.sh" in none.stderr


def test_follow_prints_a_running_task_until_it_ends(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q", STREAMS)
    go = tmp_path / "go"
    task(q, "slow.sh", f'echo first\nwhile [ ! -e {go} ]; do sleep 0.05; done\necho second\n')
    r = runner(q)
    done: list[int] = []
    t = threading.Thread(target=lambda: done.append(r.run()))
    t.start()
    try:
        follow = subprocess.Popen(["metaq", "log", "--queue", str(q.root), "--follow",
                                   "slow.sh"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert follow.stdout is not None
        assert follow.stdout.readline() == b"first\n"  # the event itself: its first line
        go.touch()
        rest, err = follow.communicate(timeout=60)
    finally:
        go.touch()
        t.join(60)
    assert done == [0]
    assert follow.returncode == 0, err
    assert rest == b"second\n"


def test_a_torn_frame_is_skipped_by_log_and_listed_by_doctor(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q", STREAMS)
    task(q, "a.sh", "echo hello\n")
    assert runner(q).run() == 0
    [stream] = list((q.root / "jobs").rglob("*.frames"))
    with open(stream, "ab") as f:
        f.write(b"MQF1\x05\x00\x01")  # a runner killed a few bytes into its next frame
    old = os.stat(stream).st_mtime - 7200
    os.utime(stream, (old, old))  # its runner long gone
    assert log(q, "a.sh").stdout == b"hello\n"
    doctor = subprocess.run(["metaq", "doctor", "--queue", str(q.root)], capture_output=True,
                            text=True, timeout=60)
    assert "torn" in doctor.stdout and "no whole frame" in doctor.stdout, doctor.stdout


def test_a_fifo_planted_among_the_streams_never_blocks_log(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q", STREAMS)
    task(q, "a.sh", "echo hello\n")
    assert runner(q).run() == 0
    [stream] = list((q.root / "jobs").rglob("*.frames"))
    os.mkfifo(stream.with_name("0-0.frames"))
    out = log(q, "a.sh", timeout=30)
    assert out.returncode == 0 and out.stdout == b"hello\n"
    assert b"FIFO" in out.stderr and b"skipped" in out.stderr


def test_a_queue_of_log_files_prints_the_task_log(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    task(q, "f.sh", "echo from a file\n")
    assert runner(q).run() == 0
    assert log(q, "f.sh").stdout == b"from a file\n"
    refused = log(q, "f.sh", "--stderr")
    assert refused.returncode == 1 and b"output: streams" in refused.stderr


def test_a_task_with_a_log_gets_its_file_and_its_frames(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q", STREAMS)
    mine = tmp_path / "mine" / "gen.log"
    task(q, "gen.sh", 'echo "out to $METAQ_LOG"\necho err >&2\n', LOG=str(mine))
    assert runner(q).run() == 0
    assert where(q, "gen.sh") == "finished"
    assert mine.read_bytes() == f"out to {mine}\nerr\n".encode()  # METAQ's LOG, as asked
    assert log(q, "gen.sh").stdout == f"out to {mine}\nerr\n".encode()
    assert log(q, "gen.sh", "--stderr").stdout == b"err\n"
    assert not list((q.root / "jobs").rglob("*.log"))  # no log of its own besides
