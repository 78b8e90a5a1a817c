"""The time spellings batch systems print, read into seconds: durations such as SLURM's
``[DD-]HH:MM:SS`` and PBS's ``HH:MM:SS``, and wall-clock timestamps.

Timestamps without a zone (SLURM's ``2024-03-01T10:00:00``, PBS's record times) are read as
UTC. The logs print the cluster's local time; reading it as UTC shifts every time by the same
offset, which no duration, wait or schedule depends on (only a daylight-saving change inside
the log moves times by an hour, and the log itself is ambiguous there).
"""

from __future__ import annotations

import math
from datetime import datetime, timezone

UNKNOWN_WORDS = frozenset({"", "UNKNOWN", "NONE", "N/A", "INVALID"})


def duration(text: str) -> float:
    """Seconds in ``[DD-][[HH:]MM:]SS[.frac]`` (or plain seconds); NaN for an unknown word.

    Raises ``ValueError`` for anything else.
    """
    t = text.strip()
    if t.upper() in UNKNOWN_WORDS:
        return math.nan
    days = 0.0
    if "-" in t:
        head, _, t = t.partition("-")
        days = float(_number(head, text))
    parts = t.split(":")
    if len(parts) > 3 or not all(parts):
        raise ValueError(f"{text!r} is not a duration like 1-02:03:04")
    seconds = 0.0
    for part in parts:
        seconds = seconds * 60 + _number(part, text)
    return days * 86400 + seconds


def timestamp(text: str) -> float:
    """Epoch seconds of an ISO-like timestamp (zone-less ones are UTC); NaN for an unknown
    word. Raises ``ValueError`` for anything else."""
    t = text.strip()
    if t.upper() in UNKNOWN_WORDS:
        return math.nan
    moment = datetime.fromisoformat(t)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def _number(part: str, text: str) -> float:
    value = float(part)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{text!r} is not a duration like 1-02:03:04")
    return value
