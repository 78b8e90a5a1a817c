"""The people's commands: hold, release, cancel and retry, each through one move."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from metaq_py.clock import Clock
from metaq_py.errors import QueueError, TaskError
from metaq_py.queue.admin import QueueAdmin
from metaq_py.queue.store import Queue
from tests.queue.test_store import put, settle


@pytest.fixture
def q(tmp_path: Path) -> Queue:
    return Queue.init(tmp_path / "q")


@pytest.fixture
def admin(q: Queue) -> QueueAdmin:
    return QueueAdmin(q)


# --- moving --------------------------------------------------------------------------------


def test_people_commands(q: Queue, admin: QueueAdmin) -> None:
    put(q.root / "todo" / "a.sh")
    assert admin.hold("todo/a.sh").path == q.root / "hold/todo/a.sh"
    assert q.pending() == []
    with pytest.raises(QueueError, match=r"no task todo/a\.sh is waiting; it is held"):
        admin.hold("todo/a.sh")
    assert admin.release(str(q.root / "hold/todo/a.sh")).state == "todo"
    assert admin.cancel("todo/a.sh").state == "cancelled"
    assert "cancelled by" in (q.root / "cancelled/todo/a.sh.reason").read_text()
    assert admin.retry("todo/a.sh").path == q.root / "todo/a.sh"
    assert not (q.root / "cancelled/todo/a.sh.reason").exists()
    claim = q.claim(q.pending()[0], machine="m", jobid="1")
    assert admin.cancel("todo/a.sh").state == "working" and q.cancel_requested(claim)
    with pytest.raises(QueueError, match="does not name a task"):
        admin.hold("elsewhere/a.sh")


def test_retry_of_a_still_invalid_task_leaves_it(q: Queue, admin: QueueAdmin) -> None:
    put(q.root / "todo" / "bad.sh", "#METAQ NODES -1\n")
    settle(q)
    q.pending()
    with pytest.raises(TaskError, match="at least 1"):
        admin.retry("todo/bad.sh")
    assert (q.root / "rejected/todo/bad.sh").exists()
    put(q.root / "rejected/todo/bad.sh", "#METAQ NODES 1\n")
    assert admin.retry("todo/bad.sh").state == "todo"


def test_a_cancel_and_a_retry_are_stamped_by_the_queue_clock(tmp_path: Path) -> None:
    q = Queue.init(tmp_path / "q", clock=Clock(1_000_000_000.0))
    put(q.root / "todo" / "a.sh")
    admin = QueueAdmin(q)
    admin.cancel("todo/a.sh")
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(1_000_000_000.0))
    assert stamp in (q.root / "cancelled/todo/a.sh.reason").read_text()
    admin.retry("todo/a.sh")
    logbook = (q.root / "todo/.a.sh.record").read_text()
    assert '"event": "retried"' in logbook and '"time": 1000000000.0' in logbook
