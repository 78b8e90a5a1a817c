"""Conservative backfilling with shares stops keeping its availability profile once no job left
can start on a free node, and walks the rest of the queue for joins only. Its decisions are
those of the plain pass that keeps the profile to the end of the queue (written out below as
it was before the early stop), on random machines and queues of shares and whole-node jobs."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metaq_py.cluster import Cluster
from metaq_py.policy import Job, Kind, availability, backfill, make_scheduler, queue_key
from metaq_py.policy.model import Decision
from metaq_py.policy.shares import NodeShape, SharedNodes, ShareRoom
from metaq_py.policy.work import Work


def plain_pass(work: Work, queue: Sequence[Job], room: ShareRoom) -> None:
    """The reference: every job of the queue in order, the profile kept throughout."""
    pool = work.free
    now, end, oracle, started = work.now, work.end, work.oracle, work.started
    total = work.snap.total
    profile = availability.Profile(work)
    for job in queue:
        if pool.count == 0 and not room.any_open():
            return
        if job.id in started or job.min_size > total \
                or now + job.time_at(job.size, oracle) > end:
            continue
        if job.cores:
            if not room.shape.fits(job.cores, job.gpus):
                continue
            finish = now + job.time_at(1, oracle)
            node = room.join(job.cores, job.gpus, finish, shadow=math.inf, extend=False)
            if node is not None:
                work.start(job, (node,))
                continue
        if pool.count == 0:
            continue
        k = profile.largest_now(job, now, end, oracle, pool.count) \
            if job.min_size <= pool.count else 0
        if k:
            nodes = pool.take(k)
            if job.cores:
                room.open_node(nodes[0])
            work.start(job, nodes)
            profile.hold(now, now + job.time_at(k, oracle), k)
            continue
        profile.reserve(job, end, oracle)


WALLS = [10.0, 50.0, 100.0, 300.0, 1000.0]

running_jobs = st.lists(st.one_of(
    st.tuples(st.just("whole"), st.integers(1, 4), st.sampled_from(WALLS), st.floats(0.0, 0.99)),
    st.tuples(st.just("share"), st.integers(0, 7), st.tuples(st.integers(1, 8),
              st.integers(0, 2)), st.sampled_from(WALLS), st.floats(0.0, 0.99)),
), max_size=12)
waiting_jobs = st.lists(st.one_of(
    st.tuples(st.just("share"), st.integers(1, 9), st.integers(0, 3), st.sampled_from(WALLS)),
    st.tuples(st.just("whole"), st.integers(1, 9), st.integers(0, 4), st.sampled_from(WALLS)),
), max_size=20)


def machine(total: int, shape: NodeShape, running: list) -> Cluster:
    """A cluster running whole-node jobs on its lowest free nodes and shares on the named
    nodes, where they fit; what does not fit is left out."""
    c = Cluster(total, shape=shape)
    assert c.shares is not None
    for i, spec in enumerate(running):
        if spec[0] == "whole":
            _, size, wall, elapsed = spec
            free = sorted(c.free)
            if size <= len(free):
                c.start(Job(f"r{i}", Kind.RIGID, size, wall, -wall, runtime=wall * 0.7),
                        tuple(free[:size]), now=-elapsed * wall)
            continue
        _, node, (cores, gpus), wall, elapsed = spec
        node %= total
        load = c.shares.loads.get(node)
        if not shape.fits(cores, gpus) or (load is None and node not in c.free) or (
                load is not None and not load.fits(cores, gpus)):
            continue
        c.start(Job(f"r{i}", Kind.RIGID, 1, wall, -wall, runtime=wall * 0.4, cores=cores,
                    gpus=gpus), (node,), now=-elapsed * wall)
    return c


def queue_of(waiting: list, total: int) -> list[Job]:
    """Shares and whole-node jobs (rigid, or malleable when ``low`` is above 0) in queue
    order; some too big for the machine or the node."""
    jobs = []
    for k, (what, a, b, wall) in enumerate(waiting):
        if what == "share":
            jobs.append(Job(f"q{k}", Kind.RIGID, 1, wall, float(-k), runtime=wall * 0.5,
                            cores=a, gpus=b))
        elif b:
            jobs.append(Job(f"q{k}", Kind.MALLEABLE, a, wall, float(-k), runtime=wall * 0.9,
                            min_size=min(a, b)))
        else:
            jobs.append(Job(f"q{k}", Kind.RIGID, a, wall, float(-k), runtime=wall * 0.6))
    return sorted(jobs, key=queue_key)


def decide(c: Cluster, queue: list[Job], end: float, oracle: bool, *, plain: bool) -> Decision:
    work = Work(c.snapshot(now=0.0, waiting=queue, end=end, ordered=True), oracle=oracle)
    assert work.shares is not None
    if plain:
        plain_pass(work, queue, work.shares)
    else:
        backfill.backfill(work, queue, backfill.ALL)
    return work.decision()


@settings(max_examples=400, deadline=None)
@given(st.integers(2, 8), st.sampled_from([NodeShape(8, 2), NodeShape(8, 2, 2), NodeShape(4)]),
       running_jobs, waiting_jobs, st.sampled_from([math.inf, 120.0, 600.0]), st.booleans())
def test_the_early_stop_changes_no_decision(total: int, shape: NodeShape, running: list,
                                            waiting: list, end: float, oracle: bool) -> None:
    c = machine(total, shape, running)
    queue = queue_of(waiting, total)
    assert decide(c, queue, end, oracle, plain=False) == \
        decide(c, queue, end, oracle, plain=True)


def test_a_queue_that_cannot_start_on_free_nodes_still_joins_shared_nodes() -> None:
    """The second stage is reached and does its work: once a reservation holds the free node
    from now on, the profile's walk ends, and the shares behind it still join the shared
    node."""
    c = Cluster(3, shape=NodeShape(8, 2))
    c.start(Job("w", Kind.RIGID, 1, 50.0, 0.0), (0,), now=0.0)
    c.start(Job("s", Kind.RIGID, 1, 400.0, 0.0, cores=2, gpus=1), (1,), now=0.0)
    queue = [Job("big", Kind.RIGID, 2, 100.0, -3.0),
             Job("j1", Kind.RIGID, 1, 100.0, -2.0, cores=2, gpus=1),
             Job("j2", Kind.RIGID, 1, 100.0, -1.0, cores=4)]
    new = decide(c, queue, math.inf, False, plain=False)
    assert new == decide(c, queue, math.inf, False, plain=True)
    # big is reserved nodes 0 and 2 from 50 s, when w ends: a share of 100 s no longer fits
    # on the free node 2, so the walk with the profile stops at j1 ...
    work = Work(c.snapshot(now=0.0, waiting=queue, ordered=True), oracle=False)
    assert work.shares is not None
    assert backfill._reserving(work, queue, 0, backfill.ALL, work.shares) == 1
    # ... and j1 and j2, which end by the shared node's end (400 s), join it
    assert {a.job: a.nodes for a in new.actions} == {"j1": (1,), "j2": (1,)}


@pytest.mark.parametrize("shape", [None, NodeShape(8, 2)])
def test_a_task_past_its_expected_end_frees_no_node_now(shape: NodeShape | None) -> None:
    """A task overrunning its estimate is released "now" in the profile, yet holds its node:
    a malleable job is started on the nodes really free (it used to ask for more and fail)."""
    c = Cluster(3, shape=shape)
    c.start(Job("late", Kind.RIGID, 1, 10.0, 0.0), (0,), now=0.0)
    queue = [Job("m", Kind.MALLEABLE, 3, 10.0, 0.0, min_size=1)]
    d = make_scheduler("conservative").decide(c.snapshot(now=20.0, waiting=queue))
    assert [(a.job, a.nodes) for a in d.actions] == [("m", (1, 2))]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 4), st.integers(0, 2),
                          st.sampled_from(WALLS), st.floats(0.0, 1.0)), max_size=40),
       st.randoms(use_true_random=False))
def test_the_shared_nodes_stay_listed_in_end_order(adds: list, rng: random.Random) -> None:
    """The ends a decision reads the shared nodes' releases from are every shared node's
    latest end, ascending, after any mix of shares starting and ending."""
    shared = SharedNodes(NodeShape(4, 2))
    running: list[tuple[int, str]] = []
    for i, (node, cores, gpus, wall, ratio) in enumerate(adds):
        load = shared.loads.get(node)
        if load is None or load.fits(cores, gpus):
            shared.add(node, f"j{i}", cores, gpus, float(i) + wall, float(i) + wall * ratio)
            running.append((node, f"j{i}"))
        if running and rng.random() < 0.4:
            shared.remove(*running.pop(rng.randrange(len(running))))
        assert shared.ends == sorted((ld.end, n) for n, ld in shared.loads.items())
        assert shared.true_ends == sorted((ld.true_end, n) for n, ld in shared.loads.items())


class WrittenOut:
    """The availability profile that writes every hold into each step it covers (the plain
    form of :class:`~metaq_py.policy.availability.Profile`, which keeps holds from now apart)."""

    def __init__(self, profile: availability.Profile) -> None:
        self.times = list(profile.times)
        self.avail = [profile.level(i) for i in range(len(profile.times))]

    def hold(self, t0: float, t1: float, k: int) -> None:
        for t in (t0, t1):
            if t != math.inf and t not in self.times:
                i = next((i for i, s in enumerate(self.times) if s > t), len(self.times))
                self.times.insert(i, t)
                self.avail.insert(i, self.avail[i - 1])
        for i, t in enumerate(self.times):
            if t0 <= t < t1:
                self.avail[i] -= k


@settings(max_examples=300, deadline=None)
@given(st.integers(2, 8), running_jobs,
       st.lists(st.tuples(st.booleans(), st.integers(0, 30), st.sampled_from([*WALLS, math.inf]),
                          st.integers(1, 4)), max_size=25))
def test_the_profile_keeps_holds_from_now_apart_without_changing_a_level(
        total: int, running: list, holds: list) -> None:
    """Holds from now and from later steps, in any order: the same steps at the same levels
    as the profile that writes each hold out, and the same answers to the pass's questions."""
    c = machine(total, NodeShape(8, 2), running)
    profile = availability.Profile(Work(c.snapshot(now=0.0, waiting=[]), oracle=False))
    plain = WrittenOut(profile)
    for from_now, step, length, k in holds:
        t0 = 0.0 if from_now else profile.times[step % len(profile.times)]
        profile.hold(t0, t0 + length, k)
        plain.hold(t0, t0 + length, k)
        levels = [profile.level(i) for i in range(len(profile.times))]
        assert (profile.times, levels) == (plain.times, plain.avail)
        for until in (1.0, 60.0, 400.0, math.inf):
            stop = max(1, sum(1 for t in plain.times if t < until))
            assert profile.lowest(until, -1000) == min(plain.avail[:stop])
        for size, duration in ((1, 50.0), (3, 100.0), (total, 300.0)):
            assert profile.earliest(size, duration) == earliest(plain, size, duration)


def earliest(plain: WrittenOut, k: int, duration: float) -> float:
    """The earliest step from which ``k`` nodes stay free for ``duration``, read plainly."""
    times, avail = plain.times, plain.avail
    for i, begin in enumerate(times):
        ends = [j for j in range(i, len(times)) if avail[j] < k]
        stop = times[ends[0]] if ends else math.inf
        if avail[i] >= k and stop - begin >= duration:
            return begin
    return math.inf
