"""What a claimed task runs: the very bytes that were checked, never a path read again.

A task folder is written by the whole group, so between the check of a claimed task file
(its owner, its mode, its header) and its start, a member could rename another file into its
place, or change the array folder whose script an index runs. A runner therefore reads the
whole file once, judges what it read, and keeps those bytes as a :class:`Program`; the start
executes them from a sealed in-memory file (:mod:`metaq_py.launch.checked`), and a start on
another node (a wrapped SLURM step) reads the file there and runs it only when its digest is
the one checked.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = ["Program"]


@dataclass(frozen=True, slots=True)
class Program:
    """The checked content of a task: ``data`` read from ``source`` (the claimed task file,
    or the script stored beside an array's index files), whose owner was ``owner`` when it
    was read, and the variables ``env`` the start adds (an array index's
    ``METAQ_ARRAY_INDEX`` and ``METAQ_ARRAY_ID``)."""

    data: bytes = field(repr=False)
    source: str
    owner: int
    env: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "env", MappingProxyType(dict(self.env)))

    @property
    def digest(self) -> str:
        """The SHA-256 of ``data``, in hex: what a start elsewhere checks the file against."""
        return hashlib.sha256(self.data).hexdigest()
