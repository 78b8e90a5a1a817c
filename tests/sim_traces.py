"""Where the shared real traces live for tests: ``$METAQ_TRACES``, else ``../shared/traces``
beside the checkout (CI's layout: ``.ci/run`` runs on a clean checkout whose parent holds
``shared/``, as ``/work/main`` beside ``/work/shared``).

Tests that need a trace call :func:`real_trace`. These are the only checks against CQSim, so
in CI (``CI=true``) a missing trace fails the test, saying where it looked; elsewhere the test
skips cleanly with that reason.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def traces_dir() -> Path:
    return Path(os.environ.get("METAQ_TRACES", REPO.parent / "shared" / "traces"))


def in_ci() -> bool:
    """Whether the suite runs in CI, as CI systems say (``CI=true``), never decided by the
    code under test."""
    return os.environ.get("CI", "").strip().lower() == "true"


def real_trace(name: str) -> Path:
    path = traces_dir() / name
    if not path.is_file():
        reason = f"real trace {name} not found in {traces_dir()} (set METAQ_TRACES)"
        if in_ci():
            pytest.fail(f"{reason}: CI must provide ../shared/traces beside the checkout")
        pytest.skip(reason)
    return path
