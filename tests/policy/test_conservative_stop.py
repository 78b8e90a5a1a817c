"""Conservative backfilling stops its pass once no job left could start now; the decisions are
those of the full pass, on random machines and queues."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metaq_py.cluster import Cluster
from metaq_py.policy import Job, Kind, availability, backfill, queue_key
from metaq_py.policy.work import Work

running_jobs = st.lists(st.tuples(st.integers(1, 8), st.sampled_from([10.0, 50.0, 100.0, 500.0]),
                                  st.floats(0.0, 0.99)), max_size=8)
waiting_jobs = st.lists(st.tuples(st.integers(1, 16), st.sampled_from([5.0, 20.0, 60.0, 300.0]),
                                  st.booleans(), st.integers(0, 15)), max_size=15)


def decide(total: int, running: list, waiting: list, *, full: bool,
           monkeypatch: pytest.MonkeyPatch) -> object:
    cluster = Cluster(total)
    free = list(range(total))
    for i, (size, wall, elapsed) in enumerate(running):
        if size > len(free):
            break
        cluster.start(Job(f"r{i}", Kind.RIGID, size, wall, -wall), tuple(free[:size]),
                      now=-elapsed * wall)
        free = free[size:]
    queue = sorted((Job(f"q{k}", Kind.MALLEABLE if malleable else Kind.RIGID, min(size, total),
                        wall, float(-k), min_size=min(low + 1, size, total) if malleable else 0)
                    for k, (size, wall, malleable, low) in enumerate(waiting)), key=queue_key)
    with monkeypatch.context() as patch:
        if full:
            patch.setattr(availability.Shortest, "any_room", lambda *args: True)
        work = Work(cluster.snapshot(now=0.0, waiting=queue, ordered=True), oracle=False)
        backfill.backfill(work, queue, backfill.ALL)
        return work.decision()


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([4, 8, 16]), running_jobs, waiting_jobs)
def test_stopping_early_changes_no_decision(total: int, running: list, waiting: list) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        early = decide(total, running, waiting, full=False, monkeypatch=monkeypatch)
        full = decide(total, running, waiting, full=True, monkeypatch=monkeypatch)
    assert early == full
