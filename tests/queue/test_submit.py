"""``metaq submit``'s half of the queue: scripts judged, then copied in all or nothing, on
the queue's folders alone (a :class:`~metaq_py.queue.layout.Layout`, never the runner's
moves)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from metaq_py.errors import QueueError, TaskError
from metaq_py.queue.layout import Layout
from metaq_py.queue.submit import Submitter
from tests.queue.test_store import put


@pytest.fixture
def q(tmp_path: Path) -> Layout:
    return Layout.init(tmp_path / "q")


@pytest.fixture
def submitter(q: Layout) -> Submitter:
    return Submitter(q)



def test_submit_validates_then_writes_atomically(q: Layout, submitter: Submitter,
                                                 tmp_path: Path) -> None:
    src = put(tmp_path / "job.sh", "#METAQ NODES 2\n", mode=0o775)
    dst = submitter.submit(src, sub="alice/run1")
    assert dst == q.root / "todo/alice/run1/job.sh"
    assert dst.read_bytes() == src.read_bytes() and os.stat(dst).st_mode & 0o777 == 0o755
    assert [p.name for p in dst.parent.iterdir()] == ["job.sh"]  # no temporary left
    with pytest.raises(QueueError, match="already in the queue"):
        submitter.submit(src, sub="alice/run1")
    held = submitter.submit(src, hold=True, folder="priority")
    assert held == q.root / "hold/priority/job.sh"


@pytest.mark.parametrize(
    ("content", "mode", "words"),
    [
        (b"#!/bin/sh\n#METAQ NODES 0\n", 0o755, "line 2"),
        (b"\x00\x01", 0o755, "binary"),
        (b"#!/bin/sh\n", 0o644, "not executable"),
        (b"#!/bin/sh\n#METAQ LOG jobs/x.log\n", 0o755, "jobs/ folder"),
        (b"#!/bin/sh\n#METAQ LOG jobs/7/events.jsonl\n", 0o755, "event log"),
    ],
)
def test_submit_refuses_bad_scripts_and_writes_nothing(q: Layout, submitter: Submitter,
                                                       tmp_path: Path, content: bytes,
                                                       mode: int, words: str) -> None:
    src = tmp_path / "bad.sh"
    src.write_bytes(content)
    src.chmod(mode)
    before = sorted(p for p in q.root.rglob("*"))
    with pytest.raises(TaskError, match=words):
        submitter.submit(src)
    assert sorted(p for p in q.root.rglob("*")) == before


def test_submit_refuses_escaping_subfolders(submitter: Submitter, tmp_path: Path) -> None:
    src = put(tmp_path / "a.sh")
    for sub in ("../x", "/abs", ".hidden"):
        with pytest.raises(QueueError):
            submitter.submit(src, sub=sub)
