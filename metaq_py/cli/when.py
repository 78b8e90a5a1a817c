"""Times and durations as people read them in ``metaq show``: local ISO 8601 date-times and
durations in words (``3 minutes 20 seconds``)."""

from __future__ import annotations

import math
from datetime import datetime

__all__ = ["in_words", "iso_local"]

_UNITS = (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1))


def iso_local(moment: float) -> str:
    """A Unix timestamp as local ISO 8601 to the second, with the offset from UTC
    (``2025-03-01T14:30:05+01:00``), so it says the same thing read from anywhere."""
    return datetime.fromtimestamp(moment).astimezone().isoformat(timespec="seconds")


def in_words(seconds: float) -> str:
    """A duration in words, in its two largest units (``1 hour 5 minutes``, ``2 days``,
    ``40 seconds``), rounded to the second; under half a second is ``less than a second``."""
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"cannot write {seconds!r} as a duration")
    left = round(seconds)
    if left == 0:
        return "less than a second"
    parts = []
    for name, size in _UNITS:
        count, left = divmod(left, size)
        if count:
            parts.append(f"{count} {name}{'' if count == 1 else 's'}")
        elif parts:
            break  # "1 hour 5 seconds" reads as a slip: stop at the first gap
    return " ".join(parts[:2])
