"""Where the shared real traces live for tests: ``<repo>/../shared/traces``, or ``$METAQ_TRACES``.

Tests that need a trace call :func:`real_trace`, which skips with a reason when it is absent.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def traces_dir() -> Path:
    return Path(os.environ.get("METAQ_TRACES", REPO.parent / "shared" / "traces"))


def real_trace(name: str) -> Path:
    path = traces_dir() / name
    if not path.is_file():
        pytest.skip(f"real trace {name} not found in {traces_dir()} (set METAQ_TRACES)")
    return path
