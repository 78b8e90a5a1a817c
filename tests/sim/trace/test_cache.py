"""The cache of parsed traces: a repeat read comes from it, a changed file never does, it can
be turned off, and a damaged entry is read again from the file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sim.trace import cache as trace_cache
from sim.trace.cache import RawTrace, cache_dir, cached_read
from sim.trace.formats.swf import read_swf
from sim.trace.loader import load_trace

RECORD = "{id} {submit} -1 100 {size} -1 -1 {size} 200 -1 1 7 -1 -1 2 -1 -1 -1\n"


def swf(path: Path, sizes: list[int]) -> Path:
    path.write_text("; MaxProcs: 64\n; Note: test\n" + "".join(
        RECORD.format(id=i, submit=i * 10, size=s) for i, s in enumerate(sizes, start=1)))
    return path


def counting_reader(path: Path, calls: list[int]):
    def read() -> RawTrace:
        calls.append(1)
        return RawTrace(*read_swf(path))
    return read


def test_a_repeat_read_comes_from_the_cache(tmp_path: Path,
                                            private_trace_cache: Path) -> None:
    path = swf(tmp_path / "t.swf", [4, 8, 16])
    calls: list[int] = []
    first = cached_read(path, "swf", counting_reader(path, calls))
    again = cached_read(path, "swf", counting_reader(path, calls))
    assert calls == [1]
    assert len(list(private_trace_cache.iterdir())) == 1
    assert again.header == first.header
    assert list(again.table) == list(first.table)
    # content, not the name, is the key: a copy hits
    copy = tmp_path / "copy.swf"
    shutil.copy(path, copy)
    cached_read(copy, "swf", counting_reader(copy, calls))
    assert calls == [1]


def test_a_changed_file_is_never_served_stale(tmp_path: Path) -> None:
    path = swf(tmp_path / "t.swf", [4, 8, 16])
    assert list(load_trace(path, cache=True).jobs.nodes) == [4, 8, 16]
    swf(path, [4, 8, 32])  # same name, same length, new content
    assert list(load_trace(path, cache=True).jobs.nodes) == [4, 8, 32]
    swf(path, [4, 8, 16])  # and back: the first entry serves it again
    assert list(load_trace(path, cache=True).jobs.nodes) == [4, 8, 16]


def test_the_cache_can_be_turned_off(tmp_path: Path, private_trace_cache: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = swf(tmp_path / "t.swf", [4])
    load_trace(path)  # the library's default: no cache
    load_trace(path, cache=False)
    assert list(private_trace_cache.iterdir()) == []
    monkeypatch.setenv("METAQ_TRACE_CACHE", "0")
    assert cache_dir() is None
    load_trace(path, cache=True)
    assert list(private_trace_cache.iterdir()) == []
    monkeypatch.delenv("METAQ_TRACE_CACHE")
    load_trace(path, cache=True)
    assert len(list(private_trace_cache.iterdir())) == 1


def test_a_damaged_or_old_entry_is_read_again(tmp_path: Path,
                                              private_trace_cache: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    path = swf(tmp_path / "t.swf", [4, 8])
    calls: list[int] = []
    cached_read(path, "swf", counting_reader(path, calls))
    (entry,) = private_trace_cache.iterdir()
    entry.write_bytes(entry.read_bytes()[:-5])  # truncated
    again = cached_read(path, "swf", counting_reader(path, calls))
    assert calls == [1, 1] and list(again.table.nodes) == [4, 8]
    monkeypatch.setattr(trace_cache, "CACHE_VERSION", trace_cache.CACHE_VERSION + 1)
    cached_read(path, "swf", counting_reader(path, calls))
    assert calls == [1, 1, 1]


def test_every_format_round_trips_through_the_cache() -> None:
    samples = Path(__file__).parent / "samples"
    for name, kwargs in (("sacct.txt", {"nodes": 16}), ("pbs_20240301", {"nodes": 8}),
                         ("sacct_array_het.txt", {"unit": "processors", "procs": 128})):
        cold = load_trace(samples / name, **kwargs)
        warm = [load_trace(samples / name, cache=True, **kwargs) for _ in range(2)][-1]
        assert list(warm) == list(cold) and warm.notes == cold.notes
        assert warm.report == cold.report
