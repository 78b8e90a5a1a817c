"""The stream files of a batch job: frames written and read back, torn frames found and
skipped, plants refused (issue 29, part 1). Real files."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from metaq_py.queue.streams import (
    FRAME_LIMIT,
    STDERR,
    STDOUT,
    Frame,
    StreamWriter,
    Torn,
    read_frames,
    stream_files,
)

Writes = list[tuple[str, int, int, bytes]]
writes = st.lists(st.tuples(st.sampled_from(["todo/a.sh", "todo/b/c.sh", "todo/é.sh/7"]),
                            st.integers(1, 5), st.sampled_from([STDOUT, STDERR]),
                            st.binary(min_size=1, max_size=300)), max_size=30)


def written(tmp: Path, items: Writes) -> Path:
    w = StreamWriter(tmp, tmp / "jobs/j")
    for task, attempt, stream, data in items:
        w.write(task, attempt, stream, data)
    w.close()
    [path] = stream_files(tmp / "jobs/j")
    return path


@settings(max_examples=60, deadline=None)
@given(items=writes)
def test_every_frame_reads_back_as_written(tmp_path_factory, items: Writes) -> None:
    tmp = tmp_path_factory.mktemp("s")
    (tmp / "jobs").mkdir()
    if not items:
        return
    path = written(tmp, items)
    back = [(f.task, f.attempt, f.stream, f.data) for f in read_frames(path)]
    assert back == items
    one = [(f.task, f.data) for f in read_frames(path, task="todo/a.sh")]
    assert one == [(t, d) for t, _, _, d in items if t == "todo/a.sh"]


def test_a_large_write_is_cut_into_bounded_frames(tmp_path: Path) -> None:
    data = os.urandom(FRAME_LIMIT * 2 + 12345)
    path = written(tmp_path, [("todo/big.sh", 1, STDOUT, data)])
    frames = list(read_frames(path))
    assert all(isinstance(f, Frame) and len(f.data) <= FRAME_LIMIT for f in frames)
    assert len(frames) == 3 and b"".join(f.data for f in frames) == data


def test_a_torn_last_frame_is_awaited_while_written_and_torn_once_ended(tmp_path: Path) -> None:
    path = written(tmp_path, [("todo/a.sh", 1, STDOUT, b"one\n"), ("todo/a.sh", 1, STDOUT,
                                                                  b"two\n")])
    size = path.stat().st_size
    os.truncate(path, size - 3)  # a kill -9 of the runner mid-frame
    live = list(read_frames(path))
    assert [f.data for f in live if isinstance(f, Frame)] == [b"one\n"]
    assert not any(isinstance(t, Torn) for t in live)  # may still be being written
    ended = list(read_frames(path, ended=True))
    torn = [t for t in ended if isinstance(t, Torn)]
    first = ended[0]
    assert isinstance(first, Frame) and len(torn) == 1
    assert torn[0].offset == first.end and torn[0].offset + torn[0].size == size - 3


def test_garbage_between_frames_is_skipped_and_reported(tmp_path: Path) -> None:
    path = written(tmp_path, [("todo/a.sh", 1, STDOUT, b"before\n")])
    junk = b"MQF1" + b"\xff" * 40 + b"not a frame at all"  # even with the magic in it
    with open(path, "ab") as f:
        f.write(junk)
    w = StreamWriter(tmp_path, tmp_path / "jobs/j")
    w._fd = os.open(path, os.O_WRONLY | os.O_APPEND)  # the same file, written on after it
    w.write("todo/a.sh", 1, STDOUT, b"after\n")
    w.close()
    items = list(read_frames(path))
    assert [f.data for f in items if isinstance(f, Frame)] == [b"before\n", b"after\n"]
    [torn] = [t for t in items if isinstance(t, Torn)]
    assert torn.size == len(junk) and "no whole frame" in torn.sentence()


def test_a_plant_at_the_next_name_is_passed_over(tmp_path: Path) -> None:
    folder = tmp_path / "jobs/j/streams"
    folder.mkdir(parents=True)
    secret = tmp_path / "secret"
    secret.write_bytes(b"")
    (folder / f"{os.getpid()}-1.frames").symlink_to(secret)
    os.mkfifo(folder / f"{os.getpid()}-2.frames")
    w = StreamWriter(tmp_path, tmp_path / "jobs/j")
    w.write("todo/a.sh", 1, STDOUT, b"x")  # never blocks on the FIFO
    w.close()
    assert w.path == folder / f"{os.getpid()}-3.frames"
    assert secret.read_bytes() == b""


def test_a_full_disk_costs_the_rest_of_the_output_in_one_sentence(tmp_path: Path) -> None:
    """A file-size limit stands in for a full disk: the copier says so once and keeps
    draining, so the task never blocks; what was written before stays readable."""
    script = textwrap.dedent(f"""
        import os, resource, signal, sys
        sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
        from pathlib import Path
        from metaq_py.launch.streamcopy import StreamCopier
        from metaq_py.queue.streams import StreamWriter
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))
        root = Path({str(tmp_path)!r})
        w = StreamWriter(root, root / "jobs/j")
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        c = StreamCopier(out_r, err_r, w, task="todo/full.sh", attempt=1)
        c.start()
        for i in range(60):
            os.write(out_w, bytes([65 + i % 26]) * 10_000)
        os.close(out_w); os.close(err_w)
        print("\\n".join(c.finish()))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1 and "failed" in lines[0] and "the rest of it is lost" in lines[0]
    [path] = stream_files(tmp_path / "jobs/j")
    frames = [f for f in read_frames(path, ended=True) if isinstance(f, Frame)]
    data = b"".join(f.data for f in frames)
    assert 0 < len(data) <= 200_000
    expected = b"".join(bytes([65 + i % 26]) * 10_000 for i in range(60))
    assert expected.startswith(data)  # nothing before the failure is lost or garbled
