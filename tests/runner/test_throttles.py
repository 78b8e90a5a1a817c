"""An array's throttle (``ARRAY 0-19%4``), as the offer window keeps to it: the indices
running anywhere (every runner's leases) count."""

from __future__ import annotations

from pathlib import Path

from metaq_py.queue.fit import job_of
from metaq_py.queue.store import Queue
from metaq_py.queue.submit import Submitter
from metaq_py.runner.offers import Throttles


def _script(path: Path) -> Path:
    path.write_text("#!/bin/sh\ntrue\n")
    path.chmod(0o755)
    return path


def test_the_indices_offered_are_the_throttle_less_those_running_anywhere(
        tmp_path: Path) -> None:
    q = Queue.init(tmp_path / "q")
    Submitter(q).submit(_script(tmp_path / "p.sh"), array="0-9%3")
    Submitter(q).submit(_script(tmp_path / "free.sh"), array="0-4")
    Submitter(q).submit(_script(tmp_path / "solo.sh"))
    tasks = q.scan().tasks
    # Another runner (another batch job) runs two indices of p.sh.
    for t in tasks[:2]:
        assert q.claim(t, machine="m", jobid="other") is not None
    waiting = q.scan().tasks
    throttles = Throttles(q.root, q.leases)
    kept = throttles.keep([job_of(t, gpus_per_node=0) for t in waiting])
    ids = [j.id for j in kept]
    assert [i for i in ids if i.startswith("todo/p.sh/")] == ["todo/p.sh/2"]
    assert len([i for i in ids if i.startswith("todo/free.sh/")]) == 5
    assert "todo/solo.sh" in ids
    # One more starts (here): none of p.sh may start now.
    p2 = next(t for t in waiting if t.id == "todo/p.sh/2")
    assert q.claim(p2, machine="m", jobid="here") is not None
    again = throttles.keep([job_of(t, gpus_per_node=0) for t in q.scan().tasks])
    assert not [j for j in again if j.id.startswith("todo/p.sh/")]
    assert throttles.limit("todo/free.sh") is None and throttles.limit("todo/p.sh") == 3


def test_claims_made_at_once_over_the_throttle_are_given_back(tmp_path: Path) -> None:
    q = Queue.init(tmp_path / "q")
    Submitter(q).submit(_script(tmp_path / "p.sh"), array="0-3%1")
    throttles = Throttles(q.root, q.leases)
    first, second = q.scan().tasks[:2]
    # Two runners each offered one index (the throttle left one) and claimed it at once.
    a = q.claim(first, machine="m", jobid="A")
    b = q.claim(second, machine="m", jobid="B")
    assert a is not None and b is not None
    why = throttles.over(b.id)
    assert why == ("given back unstarted: 2 indices of the array todo/p.sh were claimed at "
                   "once, over its throttle of 1")
    assert throttles.over(a.id) is not None  # each sees both: neither starts over it
    q.requeue(b, reason=why, started=False)
    assert throttles.over(a.id) is None  # alone now: it starts
    assert throttles.over("todo/solo.sh") is None
