"""The engine's waiting jobs: queue order under submits, requeues and starts, the counts its
skipping rules read, and the waitlist it keeps while the queue is long."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from metaq_py.policy.model import Job, Kind
from metaq_py.policy.order import queue_key
from sim.engine.waiting import Waiting

# (rank, priority, submit, size): few values, so equal keys are common
arrivals = st.lists(st.tuples(st.integers(0, 1), st.integers(0, 2), st.integers(0, 6),
                              st.integers(1, 5)), min_size=12, max_size=60)


@settings(max_examples=200, deadline=None)
@given(arrivals, st.lists(st.tuples(st.integers(0, 9), st.integers(0, 2**16)), min_size=20,
                          max_size=80),
       st.sampled_from([None, False, True]))
def test_the_waiting_jobs_keep_queue_order_and_a_waitlist_while_long(
        jobs: list[tuple[int, int, int, int]], steps: list[tuple[int, int]],
        oracle: bool | None) -> None:
    waiting = Waiting(oracle, long=8, short=3)
    # the reference: sorted by key, equal keys in the order they came in (or came back)
    reference: list[tuple[tuple[int, int, float], int, Job]] = []
    came = 0
    pending = [Job(i, Kind.RIGID, size, 10.0 * size, float(submit), priority=priority,
                   rank=rank, runtime=5.0 * size)
               for i, (rank, priority, submit, size) in enumerate(jobs)]
    # submits, starts and preemptions, then starts until the queue is empty
    drain = [(6, k) for k in range(len(jobs))]
    for what, pick in steps + drain:
        if what <= 5 and pending:  # a submit
            job = pending.pop(0)
            waiting.submit(job)
        elif what in (6, 7) and waiting.jobs:  # a decision starts a few jobs
            started = [waiting.jobs[k] for k in sorted({pick % len(waiting.jobs),
                                                        pick // 7 % len(waiting.jobs)})]
            for job in started:
                waiting.take(job.id)
            waiting.remove(started)
            reference = [r for r in reference if all(r[2] is not j for j in started)]
            job = None
        elif what >= 8 and waiting.jobs:  # a started job is preempted and comes back
            job = waiting.jobs[pick % len(waiting.jobs)]
            waiting.take(job.id)
            waiting.remove([job])
            reference = [r for r in reference if r[2] is not job]
            waiting.requeue(job)
        else:
            job = None
        if job is not None:
            reference.append((queue_key(job), came, job))
            came += 1
        reference.sort(key=lambda r: (r[0], r[1]))
        assert [r[2] for r in reference] == waiting.jobs
        assert all(a is b for a, b in zip([r[2] for r in reference], waiting.jobs, strict=True))
        for free in range(7):
            assert waiting.fits_none(free) == all(j.min_size > free for j in waiting.jobs)
        waitlist = waiting.waitlist
        if oracle is None:
            assert waitlist is None
        elif len(waiting) >= 8:
            assert waitlist is not None
        elif len(waiting) < 3:
            assert waitlist is None
        if waitlist is not None:
            assert waitlist.oracle is oracle
            assert all(a is b for a, b in zip(waitlist.jobs(), waiting.jobs, strict=True))
            assert len(waitlist) == len(waiting)
    assert not waiting.jobs and waiting.waitlist is None
