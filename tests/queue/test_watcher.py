"""Wake-ups of :class:`~metaq_py.queue.watcher.QueueWatcher` with file-system events: a task
arriving right after another one was claimed (renamed out of the watched folder) must wake the
runner at once, not after watchdog's half-second hold of unpaired renames (the latency itself
is measured by bench/wakeup_latency.py)."""

from __future__ import annotations

import importlib
import time
from pathlib import Path

import pytest

from metaq_py.queue.watcher import _PAIRING_CLASSES, MOVE_PAIRING, QueueWatcher
from tests.capability import inotify_problem, missing


@pytest.fixture(autouse=True)
def _events_here() -> None:
    """These tests need file-system events: whether the machine has them is read from the
    machine, so that a watcher wrongly falling back to polling fails them."""
    problem = inotify_problem()
    if problem is not None:
        missing(problem)


def test_an_arrival_right_after_a_claim_wakes_at_once(tmp_path: Path) -> None:
    todo, working = tmp_path / "todo", tmp_path / "working"
    todo.mkdir()
    working.mkdir()
    (todo / "claimed.sh").write_text("#!/bin/sh\n")
    # Polling alone would take 30 s: only a file-system event can wake it in time.
    with QueueWatcher([todo], interval=30) as w:
        assert w.live, "watchdog and inotify are here, but the watcher fell back to polling"
        took = []
        for i in range(3):
            (todo / f"claimed{i}.sh").write_text("#!/bin/sh\n")
            assert w.wait(timeout=5)
            t0 = time.monotonic()
            (todo / f"claimed{i}.sh").rename(working / f"claimed{i}.sh")  # a claim
            (todo / f"new{i}.sh").write_text("#!/bin/sh\n")  # an arrival just after it
            assert w.wait(timeout=5)
            took.append(time.monotonic() - t0)
            while w.wait(timeout=0.3):  # let the rest of this round's events go by
                pass
        # At once: not after watchdog's half-second hold of an unpaired rename, which the
        # watcher shortens; the 30 s poll is the only other way to wake. How quick "at once"
        # is belongs to bench/wakeup_latency.py (beside watchdog's own hold); here, a bound
        # a loaded machine cannot miss and that a wake by the poll would.
        assert max(took) < 10, took
    for module, name in _PAIRING_CLASSES:
        try:
            cls = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
        assert cls.delay <= MOVE_PAIRING, f"{name} still holds renames {cls.delay} s"


def _woken(w: QueueWatcher, within: float) -> bool:
    """Whether a file-system event woke ``w`` within ``within`` seconds (the poll, every 30 s
    here, is left out: it sees any change to a folder's mtime, a runner's own moves too)."""
    woke = w._changed.wait(within)
    w._changed.clear()
    return woke


def test_reads_and_a_runners_own_claims_wake_no_one_and_others_do(tmp_path: Path) -> None:
    from metaq_py.queue.watcher import OwnMoves

    todo, working = tmp_path / "todo", tmp_path / "working"
    todo.mkdir()
    working.mkdir()
    for name in ("mine.sh", "theirs.sh", "lost.sh", "read.sh"):
        (todo / name).write_text("#!/bin/sh\n")
    own = OwnMoves()
    with QueueWatcher([todo], interval=30, own=own) as w:
        assert w.live, "watchdog and inotify are here, but the watcher fell back to polling"
        assert not _woken(w, 0.3)
        (todo / "read.sh").read_bytes()  # a scan reading a task: no change
        assert not _woken(w, 0.5)
        own.add(todo / "mine.sh")
        (todo / "mine.sh").rename(working / "mine.sh")  # this runner's claim
        assert not _woken(w, 0.5)
        (todo / "theirs.sh").rename(working / "theirs.sh")  # another runner's claim
        assert _woken(w, 5)
        own.add(todo / "lost.sh")
        own.discard(todo / "lost.sh")  # this runner's rename did not happen...
        (todo / "lost.sh").rename(working / "lost.sh")  # ...someone else's did
        assert _woken(w, 5)
        (todo / "new.sh").write_text("#!/bin/sh\n")  # an arrival
        assert _woken(w, 5)


def test_own_moves_forget_what_they_never_hear_of() -> None:
    """Moves whose events never came (an inotify overflow) are not kept for ever."""
    from metaq_py.queue.watcher import _OWN_MOVES_KEPT, OwnMoves

    own = OwnMoves()
    for i in range(_OWN_MOVES_KEPT):
        own.add(f"/q/todo/t{i}.sh")
    assert own.left("/q/todo/t0.sh") and own.folder_changed("/q/todo")
    assert not own.folder_changed("/q/todo")  # once per leaving
    own.add("/q/todo/one-more.sh")
    own.add("/q/todo/and-another.sh")  # past the bound: the old ones are forgotten
    assert not own.left("/q/todo/t1.sh")
    assert own.left("/q/todo/and-another.sh")


def test_resting_watches_hear_nothing_and_armed_again_report_a_change(tmp_path: Path) -> None:
    from metaq_py.queue.watcher import OwnMoves

    todo = tmp_path / "todo"
    (todo / "sub").mkdir(parents=True)
    own = OwnMoves()
    with QueueWatcher([todo], interval=30, own=own) as w:
        assert w.live, "watchdog and inotify are here, but the watcher fell back to polling"
        w.rest()
        assert w.resting and w.rests == 1 and own.paused
        own.add(todo / "mine.sh")  # a claim while resting is not noted: no event will come
        assert not own.left(str(todo / "mine.sh"))
        (todo / "a.sh").write_text("#!/bin/sh\n")
        (todo / "sub" / "b.sh").write_text("#!/bin/sh\n")
        assert not _woken(w, 0.5)  # no event is read while the watches rest
        w.arm()
        assert not w.resting and not own.paused
        assert _woken(w, 0.1)  # what came meanwhile was heard by no one: a change at once
        assert not _woken(w, 0.3)
        (todo / "sub" / "c.sh").write_text("#!/bin/sh\n")  # the watches work again, below too
        assert _woken(w, 2)
        w.rest()
        w.rest()  # resting twice is resting once
        assert w.rests == 2
