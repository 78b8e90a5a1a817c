"""Fixtures of the report tests: real users of one collaboration (``members``), for the
accounting per user."""

from tests.hostile.members import members  # noqa: F401
