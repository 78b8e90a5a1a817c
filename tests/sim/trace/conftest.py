"""Every trace test reads and writes its own cache of parsed traces, never the user's."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def private_trace_cache(tmp_path_factory: pytest.TempPathFactory,
                        monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path_factory.mktemp("trace-cache")
    monkeypatch.setenv("METAQ_CACHE_DIR", str(folder))
    monkeypatch.delenv("METAQ_TRACE_CACHE", raising=False)
    return folder
