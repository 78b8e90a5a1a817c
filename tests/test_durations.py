"""The one duration parser: every form, decimal fields, clear errors, exact round trips."""

from __future__ import annotations

import math
from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metaq_py.durations import (
    MAX_DURATION,
    DurationError,
    format_duration,
    parse_duration,
    parse_time,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("3600", 3600.0),
        ("90.5", 90.5),
        ("0", 0.0),
        ("08:09", 8 * 60 + 9.0),
        ("1:08:09", 3600 + 8 * 60 + 9.0),
        ("09:09:09", 9 * 3600 + 9 * 60 + 9.0),
        ("2-03:04:05", 2 * 86400 + 3 * 3600 + 4 * 60 + 5.0),
        ("1-08", 86400 + 8 * 3600.0),
        ("1-08:30", 86400 + 8 * 3600 + 30 * 60.0),
        ("90s", 90.0),
        ("30m", 1800.0),
        ("2h", 7200.0),
        ("1d", 86400.0),
        ("1.5h", 5400.0),
        ("90:00", 5400.0),
        ("100:00:00", 360000.0),
        (" 08 ", 8.0),
    ],
)
def test_every_form(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_zero_leading_fields_are_decimal_not_octal() -> None:
    # METAQ's bash read 08 and 09 as invalid octal and silently got 0.
    assert parse_duration("00:08:09") == 489.0
    assert parse_duration("08") == 8.0
    assert parse_duration("09m") == 540.0


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "empty"),
        ("soon", "not a duration"),
        ("1:60", "60 seconds"),
        ("1:60:00", "60 minutes"),
        ("1-24:00:00", "24 hours"),
        ("-5", "negative"),
        ("1:2:3:4", "not a duration"),
        ("1e5", "not a duration"),
        ("1:x", "not a number"),
        ("x-01:00:00", "bad day field"),
        ("5w", "not a duration"),
    ],
)
def test_bad_durations_say_what_is_wrong(text: str, words: str) -> None:
    with pytest.raises(DurationError, match=words):
        parse_duration(text)


def test_format_examples() -> None:
    assert format_duration(0) == "00:00:00"
    assert format_duration(3661) == "01:01:01"
    assert format_duration(2 * 86400 + 5) == "2-00:00:05"
    assert format_duration(59.5) == "59.5"
    with pytest.raises(DurationError):
        format_duration(-1)
    with pytest.raises(DurationError):
        format_duration(math.inf)


@settings(max_examples=300)
@given(st.floats(min_value=0, max_value=MAX_DURATION, allow_nan=False, allow_infinity=False))
def test_format_round_trips(seconds: float) -> None:
    assert parse_duration(format_duration(seconds)) == seconds


@pytest.mark.parametrize("text", ["99999999d", "400000000", "3651d", "1e400"])
def test_a_duration_beyond_ten_years_is_one_sentence(text: str) -> None:
    with pytest.raises(DurationError, match=r"too large|not a duration|is not"):
        parse_duration(text)
    with pytest.raises(DurationError):
        parse_time("+" + text, now=0.0)


def test_a_date_beyond_the_calendar_is_one_sentence() -> None:
    with pytest.raises(DurationError, match="not a time"):
        parse_time("99999-12-31T23:59", now=0.0)


@settings(max_examples=300)
@given(st.integers(0, 99), st.integers(0, 23), st.integers(0, 59), st.integers(0, 59))
def test_clock_fields_with_leading_zeros(d: int, h: int, m: int, s: int) -> None:
    assert parse_duration(f"{d}-{h:02d}:{m:02d}:{s:02d}") == d * 86400 + h * 3600 + m * 60 + s
    assert parse_duration(f"{h:02d}:{m:02d}:{s:02d}") == h * 3600 + m * 60 + s


@settings(max_examples=300)
@given(st.text(max_size=20))
def test_any_text_parses_or_raises_duration_error(text: str) -> None:
    try:
        value = parse_duration(text)
    except DurationError as e:
        assert str(e)
    else:
        assert value >= 0 and math.isfinite(value)


def test_parse_time_forms() -> None:
    now = datetime(2025, 3, 1, 12, 0).timestamp()
    assert parse_time("+30m", now=now) == now + 1800
    assert parse_time("2025-03-01T14:30", now=now) == datetime(2025, 3, 1, 14, 30).timestamp()
    assert parse_time("2025-03-01T14:30:00+00:00", now=now) == 1740839400.0
    assert parse_time("13:15", now=now) == datetime(2025, 3, 1, 13, 15).timestamp()
    # A time of day already past today means tomorrow, as `at` reads it.
    assert parse_time("08:00", now=now) == datetime(2025, 3, 2, 8, 0).timestamp()
    for bad in ("", "25:00", "tomorrow", "+soon"):
        with pytest.raises(DurationError):
            parse_time(bad, now=now)


# --- METAQ's forms (its x/seconds reads these; x/timespan writes the clock forms) ----------


@pytest.mark.parametrize(("text", "seconds"), [
    ("2hr", 7200.0), ("30min", 1800.0), ("1d", 86400.0), ("33:00", 1980.0),
    ("90:00", 5400.0), ("5400", 5400.0), ("1:30:00", 5400.0), ("5:00", 300.0),
    ("1-02:03:04", 93784.0), ("2:03:04.5", 7384.5), ("0.25", 0.25), ("0hr", 0.0),
])
def test_metaq_readme_and_seconds_forms(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@settings(max_examples=300)
@given(st.integers(0, 3650), st.sampled_from([("d", 86400), ("hr", 3600), ("min", 60)]))
def test_metaq_unit_suffixes(n: int, unit: tuple[str, int]) -> None:
    suffix, size = unit
    if n * size > MAX_DURATION:
        with pytest.raises(DurationError, match="too large"):
            parse_duration(f"{n}{suffix}")
    else:
        assert parse_duration(f"{n}{suffix}") == n * size


def _timespan(total: int, frac: str) -> str:
    """A duration written as METAQ's x/timespan writes it: ``D-HH:MM:SS``, ``H:MM:SS``,
    ``M:SS`` or ``S``, with the fraction's digits after a dot."""
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        text = f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    elif hours:
        text = f"{hours}:{minutes:02d}:{secs:02d}"
    elif minutes:
        text = f"{minutes}:{secs:02d}"
    else:
        text = str(secs)
    return f"{text}.{frac}" if frac else text


@settings(max_examples=500)
@given(st.integers(0, 3649 * 86400), st.text("0123456789", max_size=3))
def test_what_metaq_timespan_writes_reads_back(total: int, frac: str) -> None:
    expected = total + (float(f"0.{frac}") if frac else 0.0)
    assert parse_duration(_timespan(total, frac)) == pytest.approx(expected, abs=1e-6)


@settings(max_examples=300)
@given(st.integers(0, 99), st.integers(0, 23), st.integers(0, 59), st.integers(0, 59),
       st.booleans())
def test_metaq_clock_forms_without_padding(d: int, h: int, m: int, s: int, day: bool) -> None:
    # x/seconds takes [[D-]HH:]MM:SS with or without leading zeros.
    text = f"{d}-{h}:{m}:{s}" if day else f"{h}:{m}:{s}"
    assert parse_duration(text) == (d * 86400 if day else 0) + h * 3600 + m * 60 + s
