"""The event log of a batch job (``metaq_py/queue/eventlog.py``): lines read back as written,
a torn last line skipped, and folders made below the queue but never the queue itself."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from metaq_py.clock import Clock
from metaq_py.queue.eventlog import EventLog

values = st.one_of(st.none(), st.booleans(), st.integers(-2**53, 2**53), st.text(max_size=20))


keys = st.from_regex("[a-z]{1,8}", fullmatch=True).filter(lambda k: k not in ("time", "event"))


@given(events=st.lists(st.tuples(st.sampled_from(["start", "end", "arrival"]),
                                 st.dictionaries(keys, values, max_size=4)), max_size=8),
       cut=st.integers(1, 20))
def test_events_read_back_as_written_and_a_torn_last_line_is_skipped(
        tmp_path_factory: pytest.TempPathFactory, events: list, cut: int) -> None:
    root = tmp_path_factory.mktemp("q")
    log = EventLog(root / "jobs" / "7" / "events.jsonl", within=root, clock=Clock(start=5.0))
    written = [log.append(name, **fields) for name, fields in events]
    log.path.parent.mkdir(parents=True, exist_ok=True)
    with open(log.path, "ab") as f:  # a crash mid-write leaves a line without its end
        f.write(b'{"time": 6.0, "event": "end", "task": "todo/a.sh"}'[:cut])
    assert list(log) == written
    assert all(e["time"] == 5.0 for e in written)


def test_missing_folders_below_the_queue_are_made(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "jobs" / "7" / "events.jsonl", within=tmp_path)
    log.append("runner-start")
    shutil.rmtree(tmp_path / "jobs")  # removed by hand during the run
    log.append_many([{"time": 1.0, "event": "end"}])
    assert [e["event"] for e in log] == ["end"]


def test_a_removed_queue_is_never_made_again(tmp_path: Path) -> None:
    root = tmp_path / "q"
    log = EventLog(root / "jobs" / "7" / "events.jsonl", within=root)
    root.mkdir()
    log.append("runner-start")
    shutil.rmtree(root)
    with pytest.raises(FileNotFoundError):
        log.append("runner-stop", reason="the queue directory disappeared")
    with pytest.raises(FileNotFoundError):
        log.append_many([{"time": 1.0, "event": "end"}])
    assert not root.exists()


def test_something_planted_where_the_job_folder_goes_is_moved_aside(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "q"
    (root / "jobs").mkdir(parents=True)
    (root / "jobs" / "7").symlink_to(outside)  # a hostile link where the job's folder goes
    (root / "jobs" / "8").write_text("not a folder")
    (root / "jobs" / "9").mkdir()
    (root / "jobs" / "9" / "events.jsonl").symlink_to(outside / "events.jsonl")
    for job in ("7", "8", "9"):
        log = EventLog(root / "jobs" / job / "events.jsonl", within=root)
        log.append("runner-start")
        assert (root / "jobs" / job).is_dir() and not (root / "jobs" / job).is_symlink()
        assert [e["event"] for e in log] == ["runner-start"]
    assert list(outside.iterdir()) == []
    assert len(list((root / "jobs").glob("*.planted-*"))) == 2
    assert len(list((root / "jobs" / "9").glob("events.jsonl.planted-*"))) == 1
