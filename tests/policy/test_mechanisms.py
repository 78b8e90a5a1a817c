"""Schedulers by name, determinism, instant starts, and random event sequences end to end."""

from __future__ import annotations

import heapq
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metaq_py.policy import (
    MECHANISMS,
    Notice,
    Preempt,
    Shrink,
    Start,
    make_scheduler,
)
from metaq_py.policy.checkpoint import checkpoint_plan
from metaq_py.policy.choices import ArrivalStrategy, NoticeStrategy
from metaq_py.policy.mechanisms import Backfill, Scheduler
from metaq_py.policy.model import Kind
from tests.policy_world import World, job

HYBRID = [m for m in MECHANISMS if "&" in m]


def test_every_name_builds_and_round_trips() -> None:
    for name in MECHANISMS:
        assert make_scheduler(name).name == name
    assert make_scheduler("cup&spaa+").name == "CUP&SPAA+"
    assert make_scheduler("CUA&PAA", backfill="conservative").backfill == "conservative"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: make_scheduler("fifo"), "unknown scheduler 'fifo'; choose one of easy"),
        (lambda: make_scheduler("easy", backfill="conservative"), "itself a backfilling"),
        (lambda: make_scheduler("N&PAA", backfill="lifo"), "unknown backfill 'lifo'"),
        (lambda: make_scheduler("N&PAA", release_after=-1), "must be >= 0"),
    ],
)
def test_bad_options_get_one_sentence(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]


def test_options_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        make_scheduler("easy", True)  # type: ignore[misc]


@pytest.mark.parametrize(("notice", "arrival"), [(NoticeStrategy.CUA, None),
                                                  (None, ArrivalStrategy.PAA)])
def test_a_scheduler_takes_both_on_demand_strategies_or_neither(notice, arrival) -> None:
    with pytest.raises(ValueError, match="both a notice and an arrival strategy"):
        Scheduler("half", Backfill.EASY, notice, arrival)
    assert Scheduler("both", Backfill.EASY, NoticeStrategy.CUA, ArrivalStrategy.PAA).notice
    assert Scheduler("neither", Backfill.EASY).arrival is None


def test_owed_nodes_go_back_before_anything_else() -> None:
    w = World(8, "N&SPAA")
    w.run(job("M", 6, 1000.0, kind=Kind.MALLEABLE, min_size=2), range(6))
    w.run(job("R", 2, 1000.0), (6, 7))
    w.submit(job("O", 3, 50.0, kind=Kind.ONDEMAND, submit=10.0))
    w.decide(10.0)
    assert len(w.holder("M").nodes) == 3
    w.submit(job("B", 3, 10.0, submit=20.0))
    w.now = 60.0
    w.finish("O")
    d = w.decide()
    assert type(d.actions[0]).__name__ == "Expand" and d.actions[0].job == "M"
    assert len(w.holder("M").nodes) == 6 and "B" in w.waiting


# --- random states ----------------------------------------------------------------------------

_running = st.lists(
    st.tuples(st.sampled_from([Kind.RIGID, Kind.MALLEABLE, Kind.ONDEMAND]),
              st.integers(1, 6), st.integers(10, 500), st.integers(0, 300)),
    max_size=8,
)


def build(name: str, running: list, reserve: int, borrow: bool) -> tuple[World, int]:
    """A 24-node world with the given running jobs, and a notice holding ``reserve`` nodes."""
    w = World(24, name)
    node = 0
    for i, (kind, k, wall, age) in enumerate(running):
        if node + k > 24:
            break
        w.run(job(f"r{i}", k, float(wall), kind=kind, setup=5.0,
                  min_size=max(1, k // 3) if kind is Kind.MALLEABLE else 0),
              range(node, node + k), start=-float(age))
        node += k
    reserve = min(reserve, 24 - node)
    w.cluster.add_notice(Notice("n", max(1, reserve), 400.0, 100.0, -10.0))
    w.cluster.reserve("n", tuple(range(node, node + reserve)))
    if borrow and reserve >= 2:
        w.cluster.start(job("b", 2, 50.0), (node, node + 1), now=0.0, borrowed="n")
    return w, node


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(HYBRID), _running, st.integers(0, 6), st.booleans(),
       st.integers(1, 20), st.booleans())
def test_ondemand_starts_at_once_whenever_it_can(name: str, running: list, reserve: int,
                                                 borrow: bool, size: int, own: bool) -> None:
    w, _ = build(name, running, reserve, borrow)
    c = w.cluster
    idle = len(c.free) + sum(len(p) for p in c.reserved.values())
    preemptable = sum(len(r.nodes) for r in c.running.values()
                      if r.job.kind is not Kind.ONDEMAND and (r.borrowed is None or own))
    w.submit(job("O", size, kind=Kind.ONDEMAND, notice="n" if own else None, submit=0.0))
    d = w.decide(0.0)
    if idle + preemptable >= size:
        assert w.holder("O") is not None, "idle + reserved + preemptable nodes cover it"
        starts = [a for a in d.actions if isinstance(a, Start)]
        assert starts[0].job == "O", "the on-demand job starts before any batch work"
    else:
        assert w.holder("O") is None
        assert not [a for a in d.actions if isinstance(a, Preempt | Shrink)], \
            "nothing is preempted or shrunk in vain"


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(MECHANISMS), _running, st.integers(0, 6), st.booleans(),
       st.lists(st.tuples(st.integers(1, 10), st.integers(10, 400), st.booleans()),
                max_size=10))
def test_same_input_same_actions(name: str, running: list, reserve: int, borrow: bool,
                                 queue: list) -> None:
    decisions = []
    for _ in range(2):
        w, _ = build(name, running, reserve, borrow)
        w.submit(*[job(f"q{i}", k, float(t), submit=float(i),
                       kind=Kind.ONDEMAND if od else Kind.RIGID)
                   for i, (k, t, od) in enumerate(queue)])
        snap = w.snapshot()
        d = w.scheduler.decide(snap)
        assert w.scheduler.decide(snap) == d, "no hidden state between calls"
        decisions.append(d)
    assert decisions[0] == decisions[1]


# --- random event sequences, end to end --------------------------------------------------------


def simulate(name: str, seed: int, *, jobs: int = 40, total: int = 16) -> World:
    """Replay a random hybrid workload on ``total`` nodes to the end, checking the cluster's
    invariants after every action (World.decide does that)."""
    rng = random.Random(seed)
    w = World(total, name)
    events: list[tuple[float, int, str, object]] = []
    seq = 0
    t = 0.0
    for i in range(jobs):
        t += rng.expovariate(1 / 40)
        kind = rng.choice([Kind.RIGID] * 6 + [Kind.MALLEABLE] * 3 + [Kind.ONDEMAND])
        size = rng.randint(1, total // 2 if kind is Kind.ONDEMAND else total)
        wall = rng.uniform(50, 600)
        run = wall * rng.uniform(0.3, 1.0)
        interval, cost = checkpoint_plan(size, run, mtbf=300.0)
        nid = None
        if kind is Kind.ONDEMAND and rng.random() < 0.7:
            nid = f"n{i}"
            issued = max(0.0, t - rng.uniform(100, 300))
            est = t + rng.choice([0.0, -rng.uniform(0, 50), rng.uniform(0, 300)])
            heapq.heappush(events, (issued, seq, "notice", Notice(nid, size, est, wall, issued)))
            seq += 1
        j = job(i, size, wall, kind=kind, submit=t, runtime=run, setup=run * 0.05,
                min_size=max(1, size // 5) if kind is Kind.MALLEABLE else 0,
                checkpoint_interval=interval if kind is Kind.RIGID else None,
                checkpoint_cost=cost, notice=nid)
        heapq.heappush(events, (t, seq, "arrive", j))
        seq += 1
    while events:
        now = events[0][0]
        w.now = now
        while events and events[0][0] == now:
            _, _, what, p = heapq.heappop(events)
            if what == "arrive":
                w.submit(p)  # type: ignore[arg-type]
            elif what == "notice":
                w.cluster.add_notice(p)  # type: ignore[arg-type]
            elif what == "end":
                jid, end = p  # type: ignore[misc]
                r = w.holder(jid)
                if r is not None and r.true_end == end:
                    w.finish(jid)
        d = w.decide()
        for a in d.actions:
            r = w.holder(getattr(a, "job", None))
            if r is not None and not isinstance(a, Preempt):
                heapq.heappush(events, (r.true_end, seq, "end", (r.job.id, r.true_end)))
                seq += 1
        if d.wake is not None:
            assert d.wake > now
            heapq.heappush(events, (d.wake, seq, "wake", None))
            seq += 1
    return w


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(MECHANISMS), st.integers(0, 10_000))
def test_random_workloads_run_to_completion(name: str, seed: int) -> None:
    w = simulate(name, seed)
    assert not w.waiting, "every job ends up running and finishing"
    assert not w.cluster.running and len(w.cluster.free) == 16
    if "&" not in name:
        assert not w.lost, "the baselines never preempt"


def test_simulation_is_deterministic() -> None:
    a = simulate("CUP&SPAA+", 7)
    b = simulate("CUP&SPAA+", 7)
    assert a.decisions == b.decisions and a.lost == b.lost


def test_a_warning_and_a_release_of_zero_are_allowed_and_negative_ones_refused() -> None:
    assert make_scheduler("N&PAA", warning=0.0, release_after=0.0) is not None
    with pytest.raises(ValueError, match="must be >= 0"):
        make_scheduler("N&PAA", warning=-1.0)
    with pytest.raises(ValueError, match="must be >= 0"):
        make_scheduler("N&PAA", release_after=-1.0)
