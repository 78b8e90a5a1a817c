"""The hostile tests' fixtures: real users of one collaboration (``members``)."""

from tests.hostile.members import members  # noqa: F401
