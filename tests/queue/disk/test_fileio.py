"""write_all: every byte reaches the file, even when the kernel takes them in pieces."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from metaq_py.queue.disk.fileio import write_all


def test_a_pipe_takes_more_than_its_buffer_in_pieces() -> None:
    data = bytes(range(256)) * 4096  # 1 MiB: a pipe buffer holds 64 KiB, so writes are short
    r, w = os.pipe()
    got = bytearray()

    def drain() -> None:
        while chunk := os.read(r, 1 << 16):
            got.extend(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    write_all(w, data)
    os.close(w)
    reader.join(10)
    os.close(r)
    assert bytes(got) == data


def test_a_regular_file_gets_it_all(tmp_path: Path) -> None:
    path = tmp_path / "f"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        write_all(fd, b"abc" * 1000)
        write_all(fd, b"")
    finally:
        os.close(fd)
    assert path.read_bytes() == b"abc" * 1000
