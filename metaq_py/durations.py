"""The one place where durations and points in time are read and written.

Every duration in the project goes through :func:`parse_duration`: ``#METAQ`` directives
(``MIN_WC_TIME``, ``SETUP``, ``CHECKPOINT``, ``SIGNAL``), command-line flags such as
``--walltime``, settings in ``metaq.yaml`` and on-demand notices. The accepted forms are those
of SLURM plus unit suffixes:

``3600``, ``90.5``
    plain seconds.
``MM:SS``, ``HH:MM:SS``, ``D-HH:MM:SS``, ``D-HH``, ``D-HH:MM``
    clock forms, as in ``sbatch --time``. Every field is decimal, so ``08`` and ``09`` are
    eight and nine (METAQ's bash read them as invalid octal and silently got 0).
``90s``, ``30m``, ``2h``, ``1d``, ``1.5h``, ``2hr``, ``30min``
    a number with a unit suffix; ``hr`` and ``min`` are METAQ's spellings (``x/seconds``),
    so every ``MIN_WC_TIME`` METAQ reads (``Nd``, ``Nhr``, ``Nmin``, ``[[D-]HH:]MM:SS[.f]``,
    plain seconds) means the same here.

Every duration is at most :data:`MAX_DURATION` (ten years): more is surely a typo, and
would overflow the dates it is added to. Each use bounds it more tightly where it matters
(``SIGNAL`` leads, notices, settings).

A malformed duration raises :class:`DurationError` (a ``ValueError``) with one sentence saying
what is wrong; callers add the file and line.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta
from decimal import Decimal
from functools import lru_cache

from metaq_py.errors import MetaqError

__all__ = ["MAX_DURATION", "DurationError", "format_duration", "format_time", "parse_duration",
           "parse_time"]


class DurationError(MetaqError, ValueError):
    """A duration or time that cannot be read. ``str()`` is one sentence, without location.

    A ``ValueError`` for the parsers that catch it, and a :class:`~metaq_py.errors.MetaqError`
    so that one reaching the command line uncaught is still printed as that one sentence."""


_NUMBER = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
_SUFFIXED = re.compile(rf"^({_NUMBER})\s*(hr|min|[smhd])$", re.IGNORECASE)
_PLAIN = re.compile(rf"^{_NUMBER}$")
_FIELD = re.compile(r"^[0-9]+$")
_LAST_FIELD = re.compile(rf"^{_NUMBER}$")
_UNIT = {"s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "hr": 3600.0, "d": 86400.0}

MAX_DURATION = 10 * 365 * 86400.0
"""The longest duration :func:`parse_duration` reads: ten years, in seconds."""

_FORMS = ("use seconds, MM:SS, HH:MM:SS, D-HH:MM:SS or a number with s, m, min, h, hr "
          "or d")


@lru_cache(maxsize=4096)
def parse_duration(text: str) -> float:
    """Read a duration and return it in seconds (never negative, always finite).

    Results are cached: a large queue repeats the same few durations thousands of times."""
    s = text.strip()
    if not s:
        raise DurationError(f"empty duration; {_FORMS}")
    if s.startswith("-"):
        raise DurationError(f"{text!r} is negative; a duration must be zero or more")
    m = _SUFFIXED.match(s)
    if m:
        return _finite(float(m.group(1)) * _UNIT[m.group(2).lower()], text)
    if _PLAIN.match(s):
        return _finite(float(s), text)
    days = 0
    clock = s
    if "-" in s:
        day_text, _, clock = s.partition("-")
        if not _FIELD.match(day_text):
            raise DurationError(f"{text!r} has a bad day field {day_text!r}; {_FORMS}")
        days = int(day_text, 10)
    parts = clock.split(":")
    if len(parts) > 3 or not all(parts) or (len(parts) == 1 and "-" not in s):
        raise DurationError(f"{text!r} is not a duration; {_FORMS}")
    if not all(_FIELD.match(p) for p in parts[:-1]) or not _LAST_FIELD.match(parts[-1]):
        raise DurationError(f"{text!r} has a field that is not a number; {_FORMS}")
    values = [float(p) for p in parts]
    if "-" in s:
        # After a day field, SLURM reads D-HH, D-HH:MM and D-HH:MM:SS.
        values += [0.0] * (3 - len(values))
        if values[0] >= 24:
            raise DurationError(f"{text!r} has {values[0]:g} hours after a day field; use 0 to 23")
        bounded: tuple[int, ...] = (1, 2)
    else:
        values = [0.0] * (3 - len(values)) + values
        # The leading field may run over (90:00 is 90 minutes); the ones after it may not.
        bounded = tuple(range(4 - len(parts), 3))
    for i in bounded:
        if values[i] >= 60:
            name = ("hours", "minutes", "seconds")[i]
            raise DurationError(f"{text!r} has {values[i]:g} {name}, which must be below 60")
    hours, minutes, seconds = values
    return _finite(days * 86400.0 + hours * 3600.0 + minutes * 60.0 + seconds, text)


def _finite(value: float, text: str) -> float:
    if not math.isfinite(value) or value > MAX_DURATION:
        raise DurationError(f"{text[:40]!r} is too large to be a duration (at most ten years)")
    return value


def format_duration(seconds: float) -> str:
    """Write a duration so that :func:`parse_duration` reads back exactly the same number.

    Whole seconds give ``HH:MM:SS`` (``D-HH:MM:SS`` from one day up), the form SLURM users
    read at a glance; a fraction of a second gives plain seconds such as ``59.5``.
    """
    if not math.isfinite(seconds) or seconds < 0:
        raise DurationError(f"cannot format {seconds!r} as a duration")
    if seconds != int(seconds):
        return format(Decimal(repr(float(seconds))), "f")
    total = int(seconds)
    days, rem = divmod(total, 86400)
    hours, rem = divmod(rem, 3600)
    minutes, secs = divmod(rem, 60)
    clock = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{days}-{clock}" if days else clock


def parse_time(text: str, *, now: float) -> float:
    """Read a point in time as a Unix timestamp.

    Accepted: ``+DURATION`` (that long after ``now``), an ISO-8601 date-time such as
    ``2025-03-01T14:30`` (local time unless it carries an offset), or ``HH:MM`` / ``HH:MM:SS``
    meaning today at that local time (tomorrow if it has already passed today, as ``at`` does).
    """
    s = text.strip()
    if not s:
        raise DurationError("empty time; use +DURATION, an ISO-8601 date-time or HH:MM")
    if s.startswith("+"):
        return now + parse_duration(s[1:])
    clock = re.match(r"^([0-9]{1,2}):([0-9]{2})(?::([0-9]{2}))?$", s)
    if clock:
        h, mi, se = int(clock.group(1), 10), int(clock.group(2), 10), int(clock.group(3) or 0)
        if h > 23 or mi > 59 or se > 59:
            raise DurationError(f"{text!r} is not a time of day; use HH:MM from 00:00 to 23:59")
        today = datetime.fromtimestamp(now).replace(hour=h, minute=mi, second=se, microsecond=0)
        if today.timestamp() < now:
            today += timedelta(days=1)
        return today.timestamp()
    try:
        return datetime.fromisoformat(s).timestamp()
    except (ValueError, OverflowError, OSError):
        raise DurationError(
            f"{text!r} is not a time; use +DURATION, an ISO-8601 date-time or HH:MM"
        ) from None


def format_time(moment: float) -> str:
    """A Unix timestamp as local ``YYYY-MM-DD HH:MM:SS``: the form people read in messages and
    tables, and one that :func:`parse_time` reads back (to the second)."""
    return datetime.fromtimestamp(moment).strftime("%Y-%m-%d %H:%M:%S")
