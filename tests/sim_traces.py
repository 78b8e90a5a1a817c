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

from tests.capability import missing

REPO = Path(__file__).resolve().parents[1]


def traces_dir() -> Path:
    return Path(os.environ.get("METAQ_TRACES", REPO.parent / "shared" / "traces"))


def real_trace(name: str) -> Path:
    path = traces_dir() / name
    if not path.is_file():
        missing(f"real trace {name} not found in {traces_dir()} (set METAQ_TRACES; CI "
                f"provides ../shared/traces beside the checkout)")
    return path
