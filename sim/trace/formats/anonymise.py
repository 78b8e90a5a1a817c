"""Anonymising a trace's identities, as the Parallel Workloads Archive does: every user, group,
executable, queue, partition and project (account) label is replaced by a natural number,
1, 2, ... in order of first appearance, each column numbered on its own.

A site that shares a converted log gives away no login, group, account or queue name; the
numbers still tell which jobs share a user or a queue, which is all a replay or a study of
the workload needs. ``metaq trace convert`` and every output that carries a trace's jobs
anonymise by default; ``--keep-names`` keeps the labels.
"""

from __future__ import annotations

import numpy as np

from sim.trace.columns import TEXT_COLUMNS, JobTable

__all__ = ["anonymise"]


def anonymise(table: JobTable) -> JobTable:
    """``table`` with each identity label replaced by its number (unknown stays unknown)."""
    return table.with_columns(**{name: _numbered(getattr(table, name)) for name in TEXT_COLUMNS})


def _numbered(column: np.ndarray) -> np.ndarray:
    codes: dict[object, str] = {}
    out = np.empty(len(column), dtype=object)
    for i, label in enumerate(column):
        if label is None:
            out[i] = None
            continue
        code = codes.get(label)
        if code is None:
            code = codes[label] = str(len(codes) + 1)
        out[i] = code
    return out
