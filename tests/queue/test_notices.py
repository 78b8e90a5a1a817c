"""Advance notices on disk: the file format, writing, cancelling, loading and housekeeping."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from metaq_py.durations import DurationError, format_time, parse_time
from metaq_py.policy.model import Notice
from metaq_py.queue.notices import (
    EXPIRE_AFTER,
    MAX_AHEAD,
    MAX_WALLTIME,
    RELEASE_AFTER,
    NodeLimit,
    NoticeError,
    NoticeFile,
    cancel_notice,
    format_notice,
    load_notices,
    parse_notice,
    read_notices,
    write_notice,
)

NOW = 1_750_000_000.0

names = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,30}", fullmatch=True)
times = st.floats(min_value=0, max_value=4e9, allow_nan=False)


def _age(path: Path) -> None:
    """Make ``path`` look written a minute before NOW: settled, as far as loading goes."""
    os.utime(path, (NOW - 60, NOW - 60))


# --- format ----------------------------------------------------------------------------------


@given(name=names, nodes=st.integers(1, 100_000), issued=times,
       ahead=st.floats(min_value=-4e9, max_value=MAX_AHEAD, allow_nan=False),
       walltime=st.floats(min_value=1e-3, max_value=MAX_WALLTIME, allow_nan=False),
       who=st.text(st.characters(blacklist_categories=("Cc",)), max_size=20))
def test_format_and_parse_round_trip(name: str, nodes: int, issued: float, ahead: float,
                                     walltime: float, who: str) -> None:
    arrival = max(0.0, issued + ahead)
    stored = NoticeFile(Notice(name, nodes, arrival, walltime, issued), who)
    back = parse_notice(format_notice(stored), path=f"notices/{name}.json")
    assert back.notice == stored.notice
    assert back.who == who


@settings(max_examples=300)
@given(data=st.binary(max_size=200))
def test_any_bytes_give_a_notice_or_one_sentence_naming_the_file(data: bytes) -> None:
    try:
        parse_notice(data, path="notices/x.json")
    except NoticeError as e:
        text = str(e)
        assert text.startswith("notices/x.json: ") and text.endswith(".")
        assert "\n" not in text


JUNK = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=True),
                 st.text(max_size=5))
FIELDS = {"name": st.just("x"), "nodes": st.integers(1, 64), "arrival": st.integers(0, 3600),
          "walltime": st.integers(1, 3600), "issued": st.integers(0, 3600)}


@st.composite
def notice_objects(draw: st.DrawFn) -> dict:
    """JSON objects shaped like a notice: each field most often valid, else junk or missing,
    sometimes with a ``who`` or an unknown key. Whole notices are common."""
    often = st.sampled_from([True, True, True, True, True, True, False])
    rarely = st.sampled_from([False, False, False, True])
    obj: dict = {}
    for key, valid in FIELDS.items():
        if draw(often):
            obj[key] = draw(valid if draw(often) else JUNK)
    if draw(rarely):
        obj["who"] = draw(st.one_of(st.just("alice"), JUNK))
    if draw(rarely):
        obj["extra"] = draw(JUNK)
    return obj


@example(obj={"name": "x", "nodes": 2, "arrival": 10, "walltime": 5, "issued": 0})
@given(obj=notice_objects())
def test_json_objects_of_any_shape_are_parsed_or_refused_cleanly(obj: dict) -> None:
    try:
        rec = parse_notice(json.dumps(obj).encode(), path="x.json")
    except NoticeError as e:
        assert str(e).startswith("x.json: ")
        return
    # Parsed: every field was there and valid, and reads back as written.
    notice = rec.notice
    assert (rec.name, notice.nodes, notice.arrival, notice.walltime, notice.issued) == (
        "x", obj["nodes"], obj["arrival"], obj["walltime"], obj["issued"])
    assert rec.who == obj.get("who", "unknown") and "extra" not in obj


@pytest.mark.parametrize(("text", "words"), [
    (b"{", "not valid JSON"),
    (b"[1, 2]", "one JSON object"),
    (b"\xff\xfe", "not UTF-8"),
    (b'{"name": "n", "nodes": 2, "arrival": 1, "walltime": 5}', "lacks 'issued'"),
    (b'{"name": "n", "nodes": 0, "arrival": 1, "walltime": 5, "issued": 0}', "'nodes'"),
    (b'{"name": "n", "nodes": true, "arrival": 1, "walltime": 5, "issued": 0}', "'nodes'"),
    (b'{"name": "n", "nodes": 2, "arrival": "soon", "walltime": 5, "issued": 0}', "'arrival'"),
    (b'{"name": "n", "nodes": 2, "arrival": 1, "walltime": 0, "issued": 0}', "'walltime'"),
    (b'{"name": "n", "nodes": 2, "arrival": 1, "walltime": 5, "issued": 0, "node": 3}',
     "unknown key 'node'"),
    (b'{"name": "other", "nodes": 2, "arrival": 1, "walltime": 5, "issued": 0}',
     "calls itself 'other'"),
    (b'{"name": "a b", "nodes": 2, "arrival": 1, "walltime": 5, "issued": 0}', "plain name"),
])
def test_each_malformed_notice_is_named(text: bytes, words: str) -> None:
    with pytest.raises(NoticeError) as err:
        parse_notice(text, path="notices/n.json")
    assert words in str(err.value)
    assert str(err.value).startswith("notices/n.json: ")


# --- time handling ---------------------------------------------------------------------------


@given(seconds=st.integers(0, 10**7))
def test_relative_arrival_is_now_plus_the_duration(seconds: int) -> None:
    assert parse_time(f"+{seconds}s", now=NOW) == NOW + seconds


@given(h=st.integers(0, 23), m=st.integers(0, 59))
def test_clock_arrival_is_within_a_day_ahead(h: int, m: int) -> None:
    t = parse_time(f"{h:02d}:{m:02d}", now=NOW)
    assert NOW <= t < NOW + 86400 + 3600  # a DST change may add an hour


@pytest.mark.parametrize("text", ["soon", "+", "+-5m", "25:00", "2025-13-01T00:00", ""])
def test_bad_times_are_refused(text: str) -> None:
    with pytest.raises(DurationError):
        parse_time(text, now=NOW)


# --- writing and cancelling ------------------------------------------------------------------


def test_write_creates_one_file_that_reads_back(tmp_path: Path) -> None:
    rec = write_notice(tmp_path, nodes=4, arrival=NOW + 1200, walltime=3600, now=NOW,
                       name="beam-7", who="alice")
    path = tmp_path / "notices" / "beam-7.json"
    assert rec.path == path
    assert json.loads(path.read_text()) == {"name": "beam-7", "nodes": 4,
                                            "arrival": NOW + 1200, "walltime": 3600.0,
                                            "issued": NOW, "who": "alice"}
    assert [p.name for p in (tmp_path / "notices").iterdir()] == ["beam-7.json"]  # no temp


def test_a_generated_name_is_valid_and_unique(tmp_path: Path) -> None:
    a = write_notice(tmp_path, nodes=1, arrival=NOW + 60, walltime=60, now=NOW)
    b = write_notice(tmp_path, nodes=1, arrival=NOW + 60, walltime=60, now=NOW)
    assert a.name != b.name and a.name.startswith("notice-")
    assert {n.id for n in load_notices(tmp_path, now=NOW)} == {a.name, b.name}


def test_a_duplicate_name_is_refused_and_the_first_kept(tmp_path: Path) -> None:
    write_notice(tmp_path, nodes=4, arrival=NOW + 60, walltime=60, now=NOW, name="x", who="al")
    before = (tmp_path / "notices" / "x.json").read_bytes()
    with pytest.raises(NoticeError, match=r"already exists .*by al for 4 nodes"):
        write_notice(tmp_path, nodes=9, arrival=NOW + 90, walltime=60, now=NOW, name="x")
    assert (tmp_path / "notices" / "x.json").read_bytes() == before
    assert len(list((tmp_path / "notices").iterdir())) == 1


def test_a_notice_in_the_past_is_refused(tmp_path: Path) -> None:
    with pytest.raises(NoticeError, match="already past"):
        write_notice(tmp_path, nodes=1, arrival=NOW - 1, walltime=60, now=NOW)
    assert not (tmp_path / "notices").exists()  # nothing was written


def test_a_notice_over_the_limit_is_refused_with_its_source(tmp_path: Path) -> None:
    with pytest.raises(NoticeError, match=r"8 nodes can never be served: caps\.nodes .* only 4"):
        write_notice(tmp_path, nodes=8, arrival=NOW + 60, walltime=60, now=NOW,
                     limit=NodeLimit(4, "caps.nodes in metaq.yaml"))
    write_notice(tmp_path, nodes=4, arrival=NOW + 60, walltime=60, now=NOW, name="ok",
                 limit=NodeLimit(4, "caps.nodes in metaq.yaml"))


@pytest.mark.parametrize("name", ["a b", ".hidden", "x/y", "", "é"])
def test_bad_names_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(NoticeError, match="cannot name a notice"):
        write_notice(tmp_path, nodes=1, arrival=NOW + 60, walltime=60, now=NOW, name=name)


def test_cancel_moves_the_notice_aside_with_a_reason(tmp_path: Path) -> None:
    write_notice(tmp_path, nodes=2, arrival=NOW + 60, walltime=60, now=NOW, name="x")
    moved = cancel_notice(tmp_path, "x", now=NOW, who="bob")
    assert moved == tmp_path / "notices" / "cancelled" / "x.json"
    assert "cancelled by bob" in Path(f"{moved}.reason").read_text()
    assert load_notices(tmp_path, now=NOW) == []
    # the name is free again, and a second cancellation of it keeps both files
    write_notice(tmp_path, nodes=2, arrival=NOW + 60, walltime=60, now=NOW, name="x")
    again = cancel_notice(tmp_path, "x", now=NOW)
    assert again.name == "x.json.1" and moved.exists()


def test_cancelling_an_unknown_notice_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(NoticeError, match="no live notice named 'nope'"):
        cancel_notice(tmp_path, "nope", now=NOW)


# --- loading and housekeeping ----------------------------------------------------------------


def test_load_returns_live_notices_earliest_issued_first(tmp_path: Path) -> None:
    write_notice(tmp_path, nodes=2, arrival=NOW + 500, walltime=60, now=NOW + 5, name="late")
    write_notice(tmp_path, nodes=3, arrival=NOW + 900, walltime=60, now=NOW, name="early")
    got = load_notices(tmp_path, now=NOW + 10)
    assert [n.id for n in got] == ["early", "late"]
    assert got[0] == Notice("early", 3, NOW + 900, 60.0, NOW)


def test_a_malformed_notice_is_moved_to_rejected_and_reported(tmp_path: Path) -> None:
    write_notice(tmp_path, nodes=2, arrival=NOW + 60, walltime=60, now=NOW, name="good")
    bad = tmp_path / "notices" / "bad.json"
    bad.write_text('{"name": "bad", "nodes": "many"}')
    _age(bad)
    told: list[str] = []
    got = load_notices(tmp_path, now=NOW + 1, report=told.append)
    assert [n.id for n in got] == ["good"]
    assert not bad.exists()
    kept = tmp_path / "notices" / "rejected" / "bad.json"
    assert kept.read_text() == '{"name": "bad", "nodes": "many"}'  # nothing is lost
    assert "lacks 'arrival'" in Path(f"{kept}.reason").read_text()
    assert len(told) == 1 and str(bad) in told[0] and "rejected" in told[0]


def test_a_file_being_written_is_left_alone_until_it_settles(tmp_path: Path) -> None:
    (tmp_path / "notices").mkdir()
    half = tmp_path / "notices" / "half.json"
    half.write_text('{"name": "ha')
    os.utime(half, (NOW, NOW))
    told: list[str] = []
    assert load_notices(tmp_path, now=NOW + 0.5, report=told.append) == []
    assert told == []
    assert half.exists()


def test_a_file_not_named_json_is_moved_aside(tmp_path: Path) -> None:
    (tmp_path / "notices").mkdir()
    note = tmp_path / "notices" / "README"
    note.write_text("hello")
    _age(note)
    load_notices(tmp_path, now=NOW, report=lambda s: None)
    assert (tmp_path / "notices" / "rejected" / "README").read_text() == "hello"


def test_a_notice_past_its_release_is_kept_then_expired(tmp_path: Path) -> None:
    write_notice(tmp_path, nodes=2, arrival=NOW + 60, walltime=60, now=NOW, name="old")
    released = NOW + 60 + RELEASE_AFTER
    assert [n.id for n in load_notices(tmp_path, now=released + 1)] == ["old"]
    assert [n.id for n in load_notices(tmp_path, now=released + EXPIRE_AFTER)] == ["old"]
    told: list[str] = []
    assert load_notices(tmp_path, now=released + EXPIRE_AFTER + 1, report=told.append) == []
    moved = tmp_path / "notices" / "expired" / "old.json"
    assert moved.exists() and "never redeemed" in Path(f"{moved}.reason").read_text()
    assert len(told) == 1 and "old" in told[0]


def test_read_notices_only_reads(tmp_path: Path) -> None:
    write_notice(tmp_path, nodes=2, arrival=NOW + 60, walltime=60, now=NOW, name="a")
    bad = tmp_path / "notices" / "b.json"
    bad.write_text("nope")
    _age(bad)
    found, problems = read_notices(tmp_path)
    assert [r.name for r in found] == ["a"]
    assert len(problems) == 1 and str(bad) in problems[0]
    assert bad.exists()
    assert read_notices(tmp_path / "missing") == ([], [])


@given(moment=st.integers(0, 4_000_000_000))
def test_times_in_messages_read_back_to_the_second(moment: int) -> None:
    assume(datetime.fromtimestamp(moment).fold == 0)  # the repeated hour when clocks go back
    assert parse_time(format_time(moment), now=NOW) == moment
