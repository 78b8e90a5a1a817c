"""A cache of parsed traces, so that reading the same file again costs a hash and a copy.

Entries are keyed by the SHA-256 of the file's bytes (not its name or time stamp), the reader
variant (format, and the unit for logs whose reader picks a size column) and
:data:`CACHE_VERSION`: a changed file is a new key, so no entry can be stale, and a renamed
or copied one still hits. They live in ``$METAQ_CACHE_DIR`` if set, else
``$XDG_CACHE_HOME/metaq/traces``, else ``~/.cache/metaq/traces``. The command line uses it
by default (``metaq simulate --no-cache`` or ``METAQ_TRACE_CACHE=0`` turn it off); the
library only when asked (``load_trace(..., cache=True)``).

An entry is one file: a magic line, a JSON description (header, reading notes, the labels of
each text column), then the numeric columns as one float64 matrix and the text columns as one
int32 matrix of label codes. No pickle: an entry is only ever data. A file that does not read
back (truncated, another version) is ignored and rewritten.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from sim.trace.columns import FLOAT_COLUMNS, INT_COLUMNS, TEXT_COLUMNS, JobTable
from sim.trace.formats.swf import SwfHeader

CACHE_VERSION = 2
"""Bumped whenever a reader's output changes, so that old entries are never used."""
MAGIC = b"metaq-trace-cache\n"
NUMERIC = FLOAT_COLUMNS + INT_COLUMNS
OFF_WORDS = frozenset({"0", "off", "no", "false"})


@dataclass(frozen=True, slots=True, eq=False)
class RawTrace:
    """What a reader returns: the SWF header (``None`` for other formats), the raw uncleaned
    jobs and the reading notes."""

    header: SwfHeader | None
    table: JobTable
    notes: tuple[str, ...] = ()


def cache_dir() -> Path | None:
    """Where entries live, or ``None`` when ``METAQ_TRACE_CACHE`` turns the cache off."""
    if os.environ.get("METAQ_TRACE_CACHE", "").strip().lower() in OFF_WORDS:
        return None
    explicit = os.environ.get("METAQ_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "metaq" / "traces"


def cached_read(path: str | Path, variant: str, read: Callable[[], RawTrace], *,
                cache: bool = True) -> RawTrace:
    """``read()``'s result for the file at ``path``, from the cache when an entry for its
    content and ``variant`` exists, else read and stored. Errors of ``read`` pass through
    (a file that cannot be read is never cached); a cache that cannot be written is skipped.
    """
    folder = cache_dir() if cache else None
    if folder is None:
        return read()
    try:
        digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return read()  # the reader reports the problem in its own words
    entry = folder / f"{digest[:40]}-{variant}-v{CACHE_VERSION}.bin"
    found = _load(entry)
    if found is not None:
        return found
    raw = read()
    _store(entry, raw)
    return raw


def _describe(raw: RawTrace, labels: dict[str, list[str | None]]) -> bytes:
    header = None if raw.header is None else asdict(raw.header)
    return json.dumps({"version": CACHE_VERSION, "rows": len(raw.table), "header": header,
                       "notes": list(raw.notes), "labels": labels}).encode()


def _store(entry: Path, raw: RawTrace) -> None:
    table = raw.table
    numbers = np.column_stack([getattr(table, c).astype(np.float64) for c in NUMERIC]) \
        if len(table) else np.empty((0, len(NUMERIC)))
    labels: dict[str, list[str | None]] = {}
    codes = np.empty((len(table), len(TEXT_COLUMNS)), dtype=np.int32)
    for j, name in enumerate(TEXT_COLUMNS):
        index: dict[str | None, int] = {}
        codes[:, j] = [index.setdefault(v, len(index)) for v in getattr(table, name).tolist()]
        labels[name] = list(index)
    meta = _describe(raw, labels)
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=entry.parent, delete=False) as out:
            out.write(MAGIC + struct.pack("<Q", len(meta)) + meta)
            out.write(np.ascontiguousarray(numbers).tobytes())
            out.write(np.ascontiguousarray(codes).tobytes())
        os.replace(out.name, entry)  # readers never see half an entry
    except OSError:
        return


def _load(entry: Path) -> RawTrace | None:
    try:
        data = entry.read_bytes()
    except OSError:
        return None
    try:
        if not data.startswith(MAGIC):
            return None
        at = len(MAGIC)
        (size,) = struct.unpack_from("<Q", data, at)
        meta = json.loads(data[at + 8:at + 8 + size])
        if meta["version"] != CACHE_VERSION:
            return None
        rows = int(meta["rows"])
        start = at + 8 + size
        numbers = np.frombuffer(data, dtype=np.float64, count=rows * len(NUMERIC),
                                offset=start).reshape(rows, len(NUMERIC))
        codes = np.frombuffer(data, dtype=np.int32, count=rows * len(TEXT_COLUMNS),
                              offset=start + numbers.nbytes).reshape(rows, len(TEXT_COLUMNS))
        if start + numbers.nbytes + codes.nbytes != len(data):
            return None
        columns: dict[str, np.ndarray] = {}
        for i, name in enumerate(NUMERIC):
            column = numbers[:, i]
            columns[name] = column.astype(np.int64) if name in INT_COLUMNS else column.copy()
        for j, name in enumerate(TEXT_COLUMNS):
            labels = np.empty(len(meta["labels"][name]), dtype=object)
            labels[:] = meta["labels"][name]
            columns[name] = labels[codes[:, j]] if rows else np.empty(0, dtype=object)
        header = None
        if meta["header"] is not None:
            fields = dict(meta["header"])
            fields["entries"] = tuple(tuple(e) for e in fields["entries"])
            header = SwfHeader(**fields)
        return RawTrace(header, JobTable(**columns), tuple(meta["notes"]))
    except (ValueError, KeyError, TypeError, struct.error):
        return None
