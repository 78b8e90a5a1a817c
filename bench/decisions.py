"""How long one scheduling decision takes at Theta scale.

Prints, for every scheduler name, the p50 and p99 time of

- an *arrival* decision: an on-demand job of 64-512 nodes arrives on a full machine and must be
  given nodes by preemption or shrinking (the baselines just queue it and backfill);
- a *backfill* pass: no on-demand work, about 60 free nodes, a queue of about 100 jobs;

on a state like Theta's: 4,360 nodes, about 300 running jobs (60% rigid, 30% malleable, 10%
on-demand), about 100 waiting, and three notices (two holding reserved nodes, one lending them
to a borrower). The target is a p99 of at most 1 ms.

With shares of nodes: a machine of 4,000 nodes of 64 cores and 4 GPUs, where 3,000 nodes run
about 300 whole-node jobs and the other nodes but a few free ones are shared, each filled by
shares (1 GPU + 8 cores, or 16 cores without GPUs) until the next one does not fit, with a
queue of 300 jobs (80% shares); the p50 and p99 of a decision, with 4 nodes free (one event:
a small job ended) and with 60 free (a burst that starts hundreds of shares at once).

With a long queue: the same Theta state with 100,000 more jobs waiting, as on an overloaded
machine; the p50 and p99 of an EASY decision that walks the queue, and of one that reads the
waitlist a simulator keeps (``metaq_py.policy.waitlist``).

When the Theta 2022 trace is present, it also replays the whole trace (23,911 jobs, all rigid)
with EASY, and prints the total and mean decision time over every event batch.

Run: ``python bench/decisions.py [path/to/theta_2022.swf.gz]``; it says first which build of the
policy core it times (``metaq_py.build()``).
"""

from __future__ import annotations

import gzip
import heapq
import random
import statistics
import sys
import time
from bisect import insort
from pathlib import Path

from metaq_py import build
from metaq_py.cluster import Cluster
from metaq_py.policy import MECHANISMS, Job, Kind, Notice, Start, make_scheduler, queue_key
from metaq_py.policy.shares import NodeShape
from metaq_py.policy.waitlist import Waitlist

THETA = 4360
TRACE = Path(__file__).resolve().parents[2] / "shared" / "traces" / "theta_2022.swf.gz"


def theta_state(seed: int) -> tuple[Cluster, list[Job]]:
    """A busy Theta-sized cluster and its queue (sorted by queue order)."""
    rng = random.Random(seed)
    c = Cluster(THETA)
    now = 0.0
    for nid, nodes, arrival, held in (("n1", 128, 1200.0, 96), ("n2", 64, 1500.0, 64),
                                      ("n3", 256, 1800.0, 0)):
        c.add_notice(Notice(nid, nodes, arrival, 3600.0, -600.0 + len(c.notices)))
        if held:
            c.reserve(nid, tuple(sorted(c.free)[:held]))
    pool = sorted(c.free)
    c.start(Job("borrower", Kind.RIGID, 32, 900.0, -10.0), tuple(sorted(c.reserved["n1"])[:32]),
            now=now, borrowed="n1")
    i = 0
    while len(c.running) < 300 and len(pool) > 120:
        kind = rng.choices([Kind.RIGID, Kind.MALLEABLE, Kind.ONDEMAND], [6, 3, 1])[0]
        size = min(rng.choice([1, 2, 4, 8, 8, 16, 16, 32]), len(pool) - 60)
        wall = rng.uniform(600, 6 * 3600)
        start = -rng.uniform(0, wall * 0.9)
        j = Job(f"r{i}", kind, size, wall, start - 100, runtime=wall * rng.uniform(0.3, 1),
                min_size=max(1, size // 5) if kind is Kind.MALLEABLE else 0,
                setup=wall * rng.uniform(0.0, 0.1),
                checkpoint_interval=rng.choice([None, 1800.0, 3600.0])
                if kind is Kind.RIGID else None, checkpoint_cost=600.0)
        nodes, pool = pool[:size], pool[size:]
        c.start(j, tuple(nodes), now=start)
        i += 1
    # leave ~60 nodes free, hold the rest with one long rigid job
    rest = len(pool) - 60
    if rest > 0:
        c.start(Job("filler", Kind.RIGID, rest, 7200.0, -50.0), tuple(pool[:rest]), now=0.0)
    queue = sorted(
        (Job(f"q{k}", rng.choices([Kind.RIGID, Kind.MALLEABLE], [2, 1])[0],
             (s := rng.choice([1, 4, 16, 64, 128, 256, 512])), rng.uniform(300, 12 * 3600),
             -rng.uniform(0, 7200), min_size=max(1, s // 5) if k % 3 == 0 else 0)
         for k in range(100)),
        key=queue_key,
    )
    queue = [j if j.kind is Kind.MALLEABLE or j.min_size == j.size else
             Job(j.id, Kind.RIGID, j.size, j.walltime, j.submit) for j in queue]
    return c, queue


def percentiles(samples: list[float]) -> tuple[float, float]:
    q = statistics.quantiles(samples, n=100, method="inclusive")
    return q[49] * 1e6, q[98] * 1e6


def time_decisions(repeats: int = 400) -> None:
    states = [theta_state(seed) for seed in range(8)]
    print(f"state: {THETA} nodes, {len(states[0][0].running)} running, "
          f"{len(states[0][1])} waiting, {len(states[0][0].notices)} notices, "
          f"{len(states[0][0].free)} free")
    print(f"{'scheduler':<13} {'arrival p50':>12} {'p99':>8} {'backfill p50':>13} {'p99':>8}"
          "   (microseconds)")
    for name in MECHANISMS:
        sched = make_scheduler(name)
        arrival: list[float] = []
        backfill: list[float] = []
        for r in range(repeats):
            c, queue = states[r % len(states)]
            size = (64, 128, 256, 512)[r % 4]
            od = Job(f"od{r}", Kind.ONDEMAND, size, 1800.0, 0.0)
            snap_a = c.snapshot(now=0.0, waiting=[od, *queue], ordered=True)
            snap_b = c.snapshot(now=0.0, waiting=queue, ordered=True)
            t0 = time.perf_counter()
            sched.decide(snap_a)
            t1 = time.perf_counter()
            sched.decide(snap_b)
            t2 = time.perf_counter()
            arrival.append(t1 - t0)
            backfill.append(t2 - t1)
        a50, a99 = percentiles(arrival)
        b50, b99 = percentiles(backfill)
        print(f"{name:<13} {a50:12.0f} {a99:8.0f} {b50:13.0f} {b99:8.0f}")


def time_long_queue(length: int = 100_000, repeats: int = 200) -> None:
    """EASY on a Theta state whose queue is ``length`` jobs long, as on an overloaded machine,
    with and without the waitlist a simulator keeps (:mod:`metaq_py.policy.waitlist`)."""
    states = []
    for seed in range(4):
        c, queue = theta_state(seed)
        rng = random.Random(seed)
        queue = queue + [Job(f"l{k}", Kind.RIGID, rng.choice([1, 4, 16, 64, 128, 256, 512]),
                             rng.uniform(300, 12 * 3600), float(k)) for k in range(length)]
        waitlist = Waitlist(oracle=False)
        for job in queue:
            waitlist.append(job)
        states.append((c, queue, waitlist))
    print(f"long queue: the state above with {length:,} more jobs waiting")
    print(f"{'scheduler':<21} {'backfill p50':>12} {'p99':>8} {'starts':>7}   (microseconds)")
    sched = make_scheduler("easy")
    for listed in (False, True):
        spent: list[float] = []
        starts = 0
        for r in range(repeats if listed else repeats // 10):
            c, queue, waitlist = states[r % len(states)]
            snap = c.snapshot(now=0.0, waiting=queue, ordered=True,
                              waitlist=waitlist if listed else None)
            t0 = time.perf_counter()
            d = sched.decide(snap)
            spent.append(time.perf_counter() - t0)
            starts += len(d.actions)
        p50, p99 = percentiles(spent)
        label = "easy + waitlist" if listed else "easy"
        print(f"{label:<21} {p50:12.0f} {p99:8.0f} {starts / len(spent):7.1f}")


SHARED_NODES = 4000
SHAPE = NodeShape(cores=64, gpus=4)


def _share_job(rng: random.Random, jid: str, submit: float) -> Job:
    gpu = rng.random() < 0.6
    return Job(jid, Kind.RIGID, 1, rng.uniform(600, 4 * 3600), submit,
               cores=8 if gpu else 16, gpus=1 if gpu else 0)


def shared_state(seed: int, free: int) -> tuple[Cluster, list[Job]]:
    """A busy 4,000-node cluster of 64-core, 4-GPU nodes, with shares filling 940 nodes to
    the last core or GPU they can, ``free`` nodes free, and its queue."""
    rng = random.Random(seed)
    c = Cluster(SHARED_NODES, shape=SHAPE)
    pool = list(range(SHARED_NODES))
    i = 0
    while len(pool) > 1000:
        size = min(rng.choice([1, 2, 4, 8, 16, 32]), len(pool) - 1000)
        wall = rng.uniform(600, 6 * 3600)
        nodes, pool = pool[:size], pool[size:]
        c.start(Job(f"w{i}", Kind.RIGID, size, wall, -wall), tuple(nodes),
                now=-rng.uniform(0, wall * 0.9))
        i += 1
    for node in pool[:-free]:
        for k in range(16):
            j = _share_job(rng, f"s{node}_{k}", -100.0)
            load = c.shares.loads.get(node) if c.shares is not None else None
            if load is not None and not load.fits(j.cores, j.gpus):
                gpu = 0 if j.gpus else 1  # the other kind of share
                j = Job(j.id, Kind.RIGID, 1, j.walltime, j.submit, cores=16 - 8 * gpu, gpus=gpu)
                if not load.fits(j.cores, j.gpus):
                    break
            c.start(j, (node,), now=-rng.uniform(0, j.walltime * 0.9))
    queue = sorted(
        (_share_job(rng, f"q{k}", -rng.uniform(0, 7200)) if rng.random() < 0.8 else
         Job(f"q{k}", Kind.RIGID, rng.choice([1, 4, 16, 64]), rng.uniform(300, 12 * 3600),
             -rng.uniform(0, 7200))
         for k in range(300)),
        key=queue_key,
    )
    return c, queue


def time_shares(free: int, repeats: int = 400) -> None:
    states = [shared_state(seed, free) for seed in range(4)]
    c0 = states[0][0]
    shares = sum(1 for r in c0.running.values() if r.job.cores)
    print(f"shares: {SHARED_NODES} nodes of {SHAPE.cores} cores and {SHAPE.gpus} GPUs, "
          f"{len(c0.running) - shares} whole-node jobs, {shares} shares on "
          f"{len(c0.shares or ())} nodes, {len(c0.free)} free, {len(states[0][1])} waiting")
    print(f"{'scheduler':<13} {'decision p50':>12} {'p99':>8} {'starts':>7}   (microseconds)")
    for name in ("easy", "conservative", "CUA&SPAA"):
        sched = make_scheduler(name)
        spent: list[float] = []
        starts = 0
        for r in range(repeats):
            c, queue = states[r % len(states)]
            snap = c.snapshot(now=0.0, waiting=queue, ordered=True)
            t0 = time.perf_counter()
            d = sched.decide(snap)
            spent.append(time.perf_counter() - t0)
            starts += len(d.actions)
        p50, p99 = percentiles(spent)
        print(f"{name:<13} {p50:12.0f} {p99:8.0f} {starts / repeats:7.0f}")


def replay_trace(path: Path, name: str = "easy") -> None:
    """Replay the SWF trace, all jobs rigid, and time every decision."""
    jobs = []
    with gzip.open(path, "rt") as f:
        for line in f:
            if line.startswith(";"):
                continue
            p = line.split()
            size = int(p[4])
            if 1 <= size <= THETA:
                wall = float(p[8])
                jobs.append(Job(int(p[0]), Kind.RIGID, size, wall, float(p[1]),
                                runtime=min(float(p[3]), wall)))
    sched = make_scheduler(name)
    c = Cluster(THETA)
    events = [(j.submit, 0, j.id, j) for j in jobs]
    heapq.heapify(events)
    waiting: list[tuple[tuple, object, Job]] = []
    spent, decisions, seq = 0.0, 0, 0
    while events:
        now = events[0][0]
        while events and events[0][0] == now:
            _, what, _, p = heapq.heappop(events)
            if what == 0:
                insort(waiting, (queue_key(p), p.id, p))
            else:
                c.finish(p, now=now)
        queue = [w[2] for w in waiting]
        t0 = time.perf_counter()
        d = sched.decide(c.snapshot(now=now, waiting=queue, ordered=True))
        spent += time.perf_counter() - t0
        decisions += 1
        if d.actions:
            byid = {w[1]: w[2] for w in waiting}
            for a in d.actions:
                assert isinstance(a, Start)
                r = c.apply(a, now=now, job=byid[a.job])
                seq += 1
                heapq.heappush(events, (r.true_end, 1, seq, a.job))
            gone = {a.job for a in d.actions}
            waiting = [w for w in waiting if w[1] not in gone]
    print(f"Theta 2022 trace, {name}: {len(jobs)} jobs, {decisions} decisions, "
          f"{spent:.2f} s deciding in total, {spent / decisions * 1e6:.1f} us per decision")


if __name__ == "__main__":
    print(f"policy core: {build()}")  # the 1 ms target is for the compiled one (pip install .)
    time_decisions()
    time_long_queue()
    time_shares(free=4)  # one decision per event: a 4-node job just ended
    time_shares(free=60)  # a burst: 60 free nodes take hundreds of shares at once
    trace = Path(sys.argv[1]) if len(sys.argv) > 1 else TRACE
    if trace.exists():
        replay_trace(trace, "easy")
    else:
        print(f"(no trace at {trace}: whole-trace replay skipped)")
