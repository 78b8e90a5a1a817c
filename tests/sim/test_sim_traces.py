"""The real-trace helper finds CI's layout, fails in CI when a trace is missing and skips
elsewhere (:func:`tests.capability.missing`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import sim_traces


def test_the_default_is_shared_traces_beside_the_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("METAQ_TRACES", raising=False)
    checkout = Path(__file__).resolve().parents[2]
    assert sim_traces.traces_dir() == checkout.parent / "shared" / "traces"


def test_a_missing_trace_fails_in_ci(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("METAQ_TRACES", str(tmp_path))
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception,
                       match=f"CI must have this, but: real trace theta_2022.swf.gz not "
                             f"found in {tmp_path}"):
        sim_traces.real_trace("theta_2022.swf.gz")


@pytest.mark.parametrize("ci", [None, "", "false"])
def test_a_missing_trace_skips_outside_ci(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                          ci: str | None) -> None:
    monkeypatch.setenv("METAQ_TRACES", str(tmp_path))
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.skip.Exception, match=f"not found in {tmp_path}"):
        sim_traces.real_trace("theta_2022.swf.gz")


def test_a_present_trace_is_found(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "t.swf.gz").write_bytes(b"")
    monkeypatch.setenv("METAQ_TRACES", str(tmp_path))
    monkeypatch.setenv("CI", "true")
    assert sim_traces.real_trace("t.swf.gz") == tmp_path / "t.swf.gz"
