"""The waitlist (metaq_py/policy/waitlist.py): its staircases, its order under every change a
driver makes, its cursor against a plain walk, and EASY deciding the same with it or without."""

from __future__ import annotations

import math
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from metaq_py.cluster import Cluster
from metaq_py.policy import Start, make_scheduler
from metaq_py.policy.backfill import EASY, decision
from metaq_py.policy.model import Job, Kind
from metaq_py.policy.snapshot import Snapshot
from metaq_py.policy.waitlist import LOAD, Waitlist, add_point, merge


def pareto(points: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """The points no other point beats in both coordinates, one per value, by size: written
    independently of the module, by comparing every pair."""
    keep = {p for p in points if not any(q[0] <= p[0] and q[1] <= p[1] and q != p
                                         for q in points)}
    return sorted(keep)


points = st.lists(st.tuples(st.integers(1, 12), st.sampled_from([1.0, 2.0, 5.0, 7.5, 9.0])),
                  max_size=30)


@given(points)
def test_a_staircase_keeps_exactly_the_unbeaten_points(pts: list[tuple[int, float]]) -> None:
    sizes: list[int] = []
    ests: list[float] = []
    for size, est in pts:
        before = list(zip(sizes, ests, strict=True))
        changed = add_point(sizes, ests, size, est)
        assert changed == (list(zip(sizes, ests, strict=True)) != before)
    assert list(zip(sizes, ests, strict=True)) == pareto(pts)


@given(points, points)
def test_merging_two_staircases_is_the_staircase_of_both(a: list[tuple[int, float]],
                                                        b: list[tuple[int, float]]) -> None:
    def stairs(pts: list[tuple[int, float]]) -> tuple[list[int], list[float]]:
        s = pareto(pts)
        return [p[0] for p in s], [p[1] for p in s]

    sizes, ests = merge(*stairs(a), *stairs(b))
    assert list(zip(sizes, ests, strict=True)) == pareto(a + b)


# --- the waitlist as a driver changes it -----------------------------------------------------


def random_job(rng: random.Random, i: int) -> Job:
    malleable = rng.random() < 0.3
    size = rng.choice([1, 2, 3, 4, 8, 16, 24, 32])
    wall = float(rng.choice([10, 30, 60, 90, 300, 600]))
    return Job(f"j{i}", Kind.MALLEABLE if malleable else Kind.RIGID, size, wall,
               float(rng.randrange(50)), runtime=wall * rng.choice([0.2, 0.5, 1.0]),
               min_size=max(1, size // 4) if malleable else 0)


def changed_at_random(rng: random.Random, steps: int, oracle: bool) -> tuple[Waitlist, list[Job]]:
    """A waitlist after ``steps`` random appends, insertions and removals, and the plain list
    the same changes make."""
    waitlist, plain = Waitlist(oracle=oracle), []
    for i in range(steps):
        r = rng.random()
        if r < 0.25 and plain:
            job = plain.pop(rng.randrange(len(plain)))
            waitlist.remove(job)
        elif r < 0.45:
            at = rng.randrange(len(plain) + 1)
            job = random_job(rng, i)
            waitlist.insert_after(plain[at - 1] if at else None, job)
            plain.insert(at, job)
        else:
            job = random_job(rng, i)
            waitlist.append(job)
            plain.append(job)
    return waitlist, plain


def check_layout(waitlist: Waitlist) -> None:
    """Every block is at most twice the load and holds its own staircase; every node of the
    tree holds the staircase of its blocks (a stale one would only cost time: the cursor
    checks each job again)."""
    for block in waitlist._blocks:
        assert len(block.jobs) <= 2 * LOAD
        stairs = pareto(list(zip(block.size, block.est, strict=True)))
        assert list(zip(block.stair_size, block.stair_est, strict=True)) == stairs
    cap = waitlist._cap
    assert cap >= len(waitlist._blocks)
    for node in range(1, 2 * cap):
        leaves = [node]
        while leaves[0] < cap:
            leaves = [c for n in leaves for c in (2 * n, 2 * n + 1)]
        pts = [(b.size[i], b.est[i]) for leaf in leaves if leaf - cap < len(waitlist._blocks)
               for b in [waitlist._blocks[leaf - cap]] for i in range(len(b.jobs))]
        held = list(zip(waitlist._tree_size[node], waitlist._tree_est[node], strict=True))
        assert held == pareto(pts), node


def passing(job: Job, free: int, extra: int, now: float, shadow: float, oracle: bool) -> bool:
    """EASY's step-3 test, as backfill.py's filter writes it."""
    return job.min_size <= free and (job.min_size <= extra or
                                     now + job.time_at(job.size, oracle) <= shadow)


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 12 * LOAD), st.booleans())
def test_the_waitlist_keeps_the_drivers_order_and_its_cursor_stops_where_a_walk_would(
        seed: int, steps: int, oracle: bool) -> None:
    rng = random.Random(seed)
    waitlist, plain = changed_at_random(rng, steps, oracle)
    assert len(waitlist) == len(plain)
    assert all(a is b for a, b in zip(waitlist.jobs(), plain, strict=True))
    check_layout(waitlist)
    for _ in range(3):
        free, extra = rng.randrange(40), rng.randrange(40)
        now, shadow = 7.0, 7.0 + rng.choice([0.0, 15.0, 60.0, 400.0, math.inf])
        cursor, at = waitlist.cursor(), 0
        while True:
            got = cursor.next(free, extra, now, shadow)
            want = next((i for i in range(at, len(plain)) if passing(
                plain[i], free, extra, now, shadow, oracle)), None)
            if want is None:
                assert got is None
                break
            assert got is plain[want]
            at = want + 1
            # the limits only shrink during a pass, as nodes are started
            free -= rng.randrange(free + 1) // 2
            extra -= rng.randrange(extra + 1) // 2


def test_a_block_filled_from_the_middle_splits() -> None:
    waitlist = Waitlist(oracle=False)
    tail = Job("tail", Kind.RIGID, 3, 60.0, 0.0)
    waitlist.append(tail)
    jobs = [Job(i, Kind.RIGID, 1 + i % 5, 10.0 * (1 + i % 3), 0.0) for i in range(5 * LOAD)]
    for job in jobs:  # each at the head, ahead of the last one: a preempted job's way back
        waitlist.insert_after(None, job)
    assert waitlist.jobs() == [*reversed(jobs), tail]
    assert len(waitlist._blocks) >= 3
    check_layout(waitlist)


def test_appends_past_many_emptied_blocks_pack_them() -> None:
    waitlist = Waitlist(oracle=False)
    jobs = [Job(i, Kind.RIGID, 1 + i % 7, 60.0, float(i)) for i in range(40 * LOAD)]
    for job in jobs[:20 * LOAD]:
        waitlist.append(job)
    for job in jobs[:20 * LOAD - 3]:  # the front of a queue drains, as under EASY
        waitlist.remove(job)
    for job in jobs[20 * LOAD:]:
        waitlist.append(job)
    assert waitlist.jobs() == jobs[20 * LOAD - 3:]
    check_layout(waitlist)
    assert len(waitlist._blocks) <= 2 * (len(waitlist) // LOAD) + 17
    first_small = next(job for job in jobs[20 * LOAD - 3:] if job.min_size == 1)
    assert waitlist.cursor().next(1, 1, 0.0, 0.0) is first_small


# --- EASY with and without the waitlist ------------------------------------------------------


def world(rng: random.Random, oracle: bool) -> tuple[Snapshot, Snapshot]:
    """A random busy machine and queue: the snapshot without a waitlist and the same one with
    the waitlist a driver would keep (built through random insertions and removals)."""
    total = rng.choice([16, 48, 96])
    cluster = Cluster(total)
    node, i = 0, 0
    while node < total:
        k = rng.randint(1, max(1, total // 4))
        if node + k > total or rng.random() < 0.15:
            break
        wall = float(rng.choice([20, 50, 100, 250, 700]))
        j = Job(f"r{i}", Kind.RIGID, k, wall, -1.0, runtime=wall * rng.choice([0.3, 1.0]))
        cluster.start(j, tuple(range(node, node + k)), now=-rng.uniform(0, wall / 2))
        node, i = node + k, i + 1
    queue = sorted((random_job(rng, n) for n in range(rng.randrange(1, 4 * LOAD))),
                   key=lambda j: j.submit)
    waitlist = Waitlist(oracle=oracle)
    gone = [random_job(rng, 1000 + n) for n in range(rng.randrange(LOAD))]
    for job in gone:  # jobs that wait a while, then start
        waitlist.append(job)
    present: set[object] = set()
    for job in rng.sample(queue, len(queue)):  # each behind its predecessor, in any order
        at = queue.index(job)
        before = next((q for q in reversed(queue[:at]) if q.id in present), None)
        waitlist.insert_after(before, job)
        present.add(job.id)
    for job in gone:
        waitlist.remove(job)
    assert waitlist.jobs() == queue
    end = rng.choice([math.inf, math.inf, 400.0, 900.0])
    plain = cluster.snapshot(now=0.0, waiting=queue, ordered=True, end=end)
    listed = cluster.snapshot(now=0.0, waiting=queue, ordered=True, end=end, waitlist=waitlist)
    return plain, listed


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1), st.booleans())
def test_easy_decides_the_same_with_the_waitlist_as_without(seed: int, oracle: bool) -> None:
    plain, listed = world(random.Random(seed), oracle)
    assert decision(listed, depth=EASY, oracle=oracle) == decision(plain, depth=EASY, oracle=oracle)
    for name in ("easy", "N&SPAA"):  # a mechanism at a plain instant decides by EASY alone
        scheduler = make_scheduler(name, oracle=oracle)
        assert scheduler.decide(listed) == scheduler.decide(plain)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_a_waitlist_for_other_estimates_or_another_queue_is_not_read(seed: int) -> None:
    rng = random.Random(seed)
    plain, listed = world(rng, oracle=False)
    assert listed.waitlist is not None
    wrong = Waitlist(oracle=True)
    for job in plain.waiting:
        wrong.append(job)
    for other in (Snapshot(plain.now, plain.total, plain.free, plain.running, plain.waiting,
                           end=plain.end, ordered=True, waitlist=wrong),
                  Snapshot(plain.now, plain.total, plain.free, plain.running,
                           list(plain.waiting), end=plain.end, ordered=True,
                           waitlist=listed.waitlist)):
        assert decision(other, depth=EASY, oracle=False) == \
            decision(plain, depth=EASY, oracle=False)


def test_easy_reads_the_waitlist_it_is_given() -> None:
    # 10 nodes, 6 busy until t=100; the head H needs 8, so 2 extra nodes. A and B each fit
    # in them; a waitlist that holds B before A (a wrong one, of the right length) makes B
    # start: the decision reads it rather than the list.
    cluster = Cluster(10)
    cluster.start(Job("run", Kind.RIGID, 6, 100.0, 0.0), tuple(range(6)), now=0.0)
    head, a, b = (Job(n, Kind.RIGID, k, 500.0, s) for n, k, s in
                  (("H", 8, 1.0), ("A", 2, 2.0), ("B", 2, 3.0)))
    reordered = Waitlist(oracle=False)
    for job in (head, b, a):
        reordered.append(job)

    def started(waitlist: Waitlist | None) -> list[object]:
        snap = cluster.snapshot(now=1.0, waiting=[head, a, b], ordered=True, waitlist=waitlist)
        return [x.job for x in decision(snap, depth=EASY, oracle=False).actions
                if isinstance(x, Start)]

    assert started(None) == ["A"]
    assert started(reordered) == ["B"]
