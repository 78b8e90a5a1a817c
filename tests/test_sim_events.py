"""The event heap's order: time, then kind (finish, notice, submit, wake), then push order."""

from __future__ import annotations

import math

from sim.events import EventHeap, EventKind


def test_same_instant_pops_finishes_then_notices_then_submits_then_wakes() -> None:
    heap = EventHeap()
    heap.push(5.0, EventKind.WAKE, "wake")
    heap.push(5.0, EventKind.SUBMIT, "submit")
    heap.push(5.0, EventKind.NOTICE, "notice")
    heap.push(5.0, EventKind.FINISH, "finish")
    heap.push(4.0, EventKind.WAKE, "earlier")
    assert [heap.pop()[3] for _ in range(5)] == ["earlier", "finish", "notice", "submit", "wake"]


def test_equal_time_and_kind_pop_in_push_order_without_comparing_subjects() -> None:
    heap = EventHeap()
    # dicts are not orderable: comparing subjects would raise TypeError
    subjects = [{"job": k} for k in (3, 1, 2)]
    for s in subjects:
        heap.push(1.0, EventKind.FINISH, s)
    assert [heap.pop()[3] for _ in range(3)] == subjects


def test_versions_travel_with_events_and_next_time_is_infinite_when_empty() -> None:
    heap = EventHeap()
    assert heap.next_time() == math.inf
    heap.push(2.5, EventKind.FINISH, 7, version=3)
    assert heap.next_time() == 2.5 and len(heap) == 1
    time, kind, _, subject, version = heap.pop()
    assert (time, kind, subject, version) == (2.5, EventKind.FINISH, 7, 3)
    assert len(heap) == 0
