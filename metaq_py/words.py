"""Counts for people: a number with its noun in the right number, ``1 batch job`` and
``2 batch jobs``, where ``batch job(s)`` would make every reader do the choosing."""

from __future__ import annotations

__all__ = ["counted"]


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and ``noun`` (``1 task``, ``0 tasks``, ``3 tasks``); ``plural`` is the
    noun's plural where it is not the noun with an ``s`` (``counted(2, "index", "indices")``)."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
