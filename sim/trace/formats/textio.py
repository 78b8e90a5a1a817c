"""Reading a trace file line by line, plain or gzipped, with read failures turned into a
:class:`~sim.trace.columns.TraceError` that names the file and the line where reading stopped."""

from __future__ import annotations

import gzip
import io
import zlib
from collections.abc import Iterator
from pathlib import Path

from sim.trace.columns import TraceError

GZIP_MAGIC = b"\x1f\x8b"


def is_gzip(path: Path) -> bool:
    """Whether the file starts with the gzip magic number (the suffix is not trusted)."""
    with path.open("rb") as raw:
        return raw.read(2) == GZIP_MAGIC


def numbered_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line number, text without the newline)`` for every line of ``path``.

    A truncated or corrupt gzip stream, or bytes that are not UTF-8, raise ``TraceError`` at
    the first line that could not be read in full.
    """
    path = Path(path)
    source = str(path)
    try:
        gz = is_gzip(path)
    except OSError as exc:
        raise TraceError(source, None, f"cannot open the file ({exc.strerror or exc}).") from exc
    line = 0
    try:
        with (gzip.open(path, "rb") if gz else path.open("rb")) as binary, \
                io.TextIOWrapper(binary, encoding="utf-8", newline=None) as text:
            for line, content in enumerate(text, start=1):
                yield line, content.rstrip("\n")
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise TraceError(source, line + 1,
                         f"the gzip stream is truncated or corrupt ({exc}).") from exc
    except UnicodeDecodeError as exc:
        raise TraceError(source, line + 1, "the file holds bytes that are not UTF-8 text.") from exc
