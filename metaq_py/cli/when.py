"""Times and durations as people read them: local ISO 8601 date-times and durations in words
(``3 minutes 20 seconds``) for ``metaq show``, and short durations with their units (``7.9 s``,
``3 min 20 s``) for the columns of ``metaq running``."""

from __future__ import annotations

import math
from datetime import datetime

__all__ = ["in_units", "in_words", "iso_local"]

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


_SHORT_UNITS = (("d", 86400), ("h", 3600), ("min", 60), ("s", 1))


def in_units(seconds: float) -> str:
    """A duration with its units, short: tenths of a second under a minute (``7.9 s``), else
    its two largest units in whole numbers (``3 min 20 s``, ``2 h 5 min``, ``1 d 3 h``; ``1 h``
    when the second is 0)."""
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"cannot write {seconds!r} as a duration")
    if seconds < 59.95:
        return f"{seconds:.1f} s"
    left = round(seconds)
    parts = []
    for name, size in _SHORT_UNITS:
        count, left = divmod(left, size)
        if count or parts:
            parts.append((count, name))
        if len(parts) == 2:
            break
    if parts[-1][0] == 0:
        parts.pop()
    return " ".join(f"{count} {name}" for count, name in parts)
