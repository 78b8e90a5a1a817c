"""Jobs of several shapes: the decision starts the shape that starts soonest, ties go to the
task's first choice, and the Cluster runs the job in the shape its Start names."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metaq_py.cluster import Cluster, ClusterError
from metaq_py.policy import Job, Start, make_scheduler
from metaq_py.policy.model import Kind
from metaq_py.policy.snapshot import Snapshot
from tests.policy.test_shares import SHAPE, Driver

POLICIES = ["easy", "conservative", "CUA&SPAA"]


def shaped(jid: str, *shapes: tuple[int, float] | tuple[int, float, int, int],
           submit: float = 0.0) -> Job:
    """A rigid job whose shapes are ``(nodes, walltime)`` or, for a share of one node,
    ``(1, walltime, cores, gpus)``; the first is its own."""
    jobs = []
    for i, s in enumerate(shapes):
        cores, gpus = (s[2], s[3]) if len(s) == 4 else (0, 0)
        jobs.append(Job(jid, Kind.RIGID, s[0], s[1], submit, shape=i, cores=cores, gpus=gpus))
    first = jobs[0]
    return Job(first.id, first.kind, first.size, first.walltime, submit, cores=first.cores,
               gpus=first.gpus, shapes=tuple(jobs[1:]))


def busy(cluster: Cluster, nodes: tuple[int, ...], end: float, jid: str = "busy") -> None:
    cluster.start(Job(jid, Kind.RIGID, len(nodes), end, 0.0), nodes, now=0.0)


def starts(cluster: Cluster, *waiting: Job, policy: str = "easy") -> list[Start]:
    snap = cluster.snapshot(now=0.0, waiting=list(waiting), shaped=None)
    return [a for a in make_scheduler(policy).decide(snap).actions if isinstance(a, Start)]


@pytest.mark.parametrize("policy", POLICIES)
def test_the_shape_that_fits_now_starts_rather_than_the_first_choice(policy: str) -> None:
    c = Cluster(8)
    busy(c, (0, 1, 2, 3), 100.0)
    [start] = starts(c, shaped("t", (8, 3600.0), (4, 7200.0)), policy=policy)
    assert (start.shape, len(start.nodes)) == (1, 4)
    r = c.apply(start, now=0.0, job=shaped("t", (8, 3600.0), (4, 7200.0)))
    assert r is not None and (r.job.size, r.end, r.job.shape) == (4, 7200.0, 1)


@pytest.mark.parametrize("policy", POLICIES)
def test_when_several_shapes_fit_now_the_first_named_starts(policy: str) -> None:
    c = Cluster(8)
    [start] = starts(c, shaped("t", (4, 7200.0), (8, 3600.0)), policy=policy)
    assert (start.shape, len(start.nodes)) == (0, 4)
    [start] = starts(c, shaped("t", (8, 3600.0), (4, 7200.0)), policy=policy)
    assert (start.shape, len(start.nodes)) == (0, 8)


def test_the_head_waits_in_the_shape_that_starts_soonest_and_is_protected() -> None:
    # 2 free nodes; 2 more free at t=100 and 4 more at t=500. Shape 0 (8 nodes) could start
    # at 500, shape 1 (4 nodes) at 100: the head takes shape 1 and its shadow time is 100.
    c = Cluster(8)
    busy(c, (2, 3), 100.0, "a")
    busy(c, (4, 5, 6, 7), 500.0, "b")
    head = shaped("t", (8, 60.0), (4, 200.0))
    short = Job("short", Kind.RIGID, 2, 100.0, 1.0)
    long = Job("long", Kind.RIGID, 2, 101.0, 1.0)
    assert [s.job for s in starts(c, head, short)] == ["short"]
    # 'long' would hold 2 of the 4 nodes shape 1 needs at t=100 past it: it must wait. With
    # the head in shape 0 (shadow 500, no extra nodes) it would have started.
    assert starts(c, head, long) == []
    assert [s.job for s in starts(c, Job("h", Kind.RIGID, 8, 60.0, 0.0), long)] == ["long"]


def test_a_whole_node_job_may_start_as_a_share_where_a_node_has_room() -> None:
    c = Cluster(2, shape=SHAPE)
    busy(c, (0,), 1000.0)
    c.start(Job("s", Kind.RIGID, 1, 1000.0, 0.0, cores=1), (1,), now=0.0)
    # no node is free: 2 whole nodes start at t=1000 at the soonest, the share now
    job = shaped("t", (2, 100.0), (1, 300.0, 2, 1))
    [start] = starts(c, job)
    assert (start.shape, start.nodes) == (1, (1,))
    r = c.apply(start, now=0.0, job=job)
    assert r is not None and (r.job.cores, r.job.gpus) == (2, 1)
    assert len(c.placements["t"].cores) == 2


def test_a_shape_that_would_not_end_in_time_is_never_chosen() -> None:
    c = Cluster(8)
    job = shaped("t", (4, 7200.0), (8, 3600.0))
    snap = Snapshot(0.0, 8, frozenset(range(8)), {}, [job], end=5000.0)
    [start] = [a for a in make_scheduler("easy").decide(snap).actions]
    assert isinstance(start, Start) and (start.shape, len(start.nodes)) == (1, 8)
    assert c.apply(start, now=0.0, job=job) is not None


def test_a_shape_that_ends_exactly_at_the_allocations_end_may_be_chosen() -> None:
    """Its first choice (4 nodes, 7200 s) ends after the end at 3600; the second (8 nodes,
    3600 s) ends exactly at it, which is in time."""
    job = shaped("t", (4, 7200.0), (8, 3600.0))
    snap = Snapshot(0.0, 8, frozenset(range(8)), {}, [job], end=3600.0)
    [start] = [a for a in make_scheduler("easy").decide(snap).actions]
    assert isinstance(start, Start) and (start.shape, len(start.nodes)) == (1, 8)


def test_a_start_naming_a_shape_the_job_lacks_is_refused() -> None:
    c = Cluster(4)
    with pytest.raises(ClusterError, match="has no shape 3"):
        c.apply(Start("t", (0,), None, 3), now=0.0, job=shaped("t", (2, 1.0), (1, 2.0)))


def test_only_rigid_jobs_of_one_id_have_shapes() -> None:
    other = Job("u", Kind.RIGID, 1, 1.0, 0.0, shape=1)
    with pytest.raises(ValueError, match="only a rigid job"):
        Job("t", Kind.RIGID, 2, 1.0, 0.0, shapes=(other,))
    with pytest.raises(ValueError, match="only a rigid job"):
        Job("t", Kind.MALLEABLE, 2, 1.0, 0.0, shapes=(Job("t", Kind.RIGID, 1, 1.0, 0.0),))


_shapes = st.lists(
    st.one_of(
        st.tuples(st.integers(1, 3), st.integers(1, 300).map(float)),
        st.tuples(st.just(1), st.integers(1, 300).map(float), st.integers(1, 4),
                  st.integers(0, 2)),
    ),
    min_size=1, max_size=3, unique=True,
)


@settings(max_examples=120, deadline=None)
@given(st.sampled_from(["easy", "conservative", "N&PAA", "CUA&SPAA"]),
       st.lists(_shapes, min_size=1, max_size=20))
def test_every_job_runs_once_in_one_of_its_shapes_and_nothing_is_given_twice(
        policy: str, spec: list) -> None:
    d = Driver(3, SHAPE, policy)
    jobs = {f"j{i}": shaped(f"j{i}", *s, submit=float(i)) for i, s in enumerate(spec)}
    d.submit(*jobs.values())
    ran: dict[str, Job] = {}
    for _ in range(10_000):
        for jid, r in d.cluster.running.items():
            ran.setdefault(str(jid), r.job)  # Driver.decide checks every invariant
        d.decide()
        for jid, r in d.cluster.running.items():
            ran.setdefault(str(jid), r.job)
        if not d.step():
            break
    assert not d.waiting and not d.cluster.running, "every job ran to its end"
    assert set(d.starts) == set(jobs)
    assert all(len(t) == 1 and math.isfinite(t[0]) for t in d.starts.values())
    for jid, job in jobs.items():
        assert ran[jid] in (job, *job.shapes), "it ran in one of its own shapes"
