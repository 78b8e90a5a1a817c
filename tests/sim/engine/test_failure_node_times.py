"""Which node a failure strikes (``failure_node``: ``uniform`` or ``busy``) and the law of the
times between failures (``failure_times``: ``poisson`` or ``weibull-0.7``), on hand-made
machines whose answers are known, and the default's draws exactly as they were."""

from __future__ import annotations

import math

import numpy as np
import pytest

from metaq_py.cluster import Cluster
from metaq_py.policy.model import Job, Kind
from sim.engine.core import simulate
from sim.engine.failures import (
    WEIBULL_SHAPE,
    FailureModel,
    FailureNode,
    FailureTimes,
    NodeFailures,
)
from tests.sim_worlds import Row, tiny_hybrid

HOUR = 3600.0
BUSY = (0, 2, 4, 6, 8, 10, 12, 14)
"""The nodes running work on the 16-node machine of :func:`strikes`."""


def strikes(node: str, count: int, seed: int = 7) -> list[tuple[int, bool]]:
    """``count`` failures on a 16-node machine whose even nodes each run a one-node rigid
    job: the node struck and whether a job was killed. After each failure the node is
    repaired at once and the killed job restarted on it, so every failure meets the same
    machine."""
    cluster = Cluster(16)
    for n in BUSY:
        cluster.start(Job(id=n + 1, kind=Kind.RIGID, size=1, walltime=1e9, submit=0.0,
                          runtime=1e9), (n,), now=0.0)
    model = FailureModel(mtbf=HOUR, seed=seed, node=FailureNode.of(node))
    src = NodeFailures(model, nodes=16, start=0.0)
    out = []
    for _ in range(count):
        t = src.next_time()
        s = src.strike(cluster, t)
        out.append((s.node, s.kill is not None))
        assert s.repair is not None
        src.repaired(cluster, s.repair, t)
        if s.kill is not None:
            cluster.start(s.kill.requeued, (s.node,), now=t)
        cluster.check()
    return out


def test_busy_strikes_only_nodes_running_work_and_kills_a_job_each_time() -> None:
    hits = strikes("busy", 200)
    assert {n for n, _ in hits} <= set(BUSY)
    assert all(kill for _, kill in hits)
    assert len({n for n, _ in hits}) == len(BUSY)  # every busy node can be struck


def test_uniform_strikes_idle_nodes_too() -> None:
    hits = strikes("uniform", 200)
    idle = [n for n, kill in hits if not kill]
    assert idle and set(idle) <= set(range(16)) - set(BUSY)
    assert all(kill == (n in BUSY) for n, kill in hits)


def test_busy_passes_over_nodes_under_repair_and_falls_back_to_the_machine() -> None:
    # a repair job holds a node, but it runs no work: with nothing else running, busy draws
    # from the whole machine, with the very draw uniform makes
    for seed in range(5):
        hit = {}
        for node in ("uniform", "busy"):
            src = NodeFailures(FailureModel(mtbf=HOUR, seed=seed, node=FailureNode.of(node)),
                               nodes=8, start=0.0)
            cluster = Cluster(8)
            first = src.strike(cluster, 1.0)
            second = src.strike(cluster, 2.0)
            hit[node] = (first.node, second.node)
        assert hit["busy"] == hit["uniform"]
    # one job on node 3 and a repair on node 5: busy strikes node 3 only
    cluster = Cluster(8)
    src = NodeFailures(FailureModel(mtbf=HOUR, seed=1, node=FailureNode.BUSY), nodes=8,
                       start=0.0)
    src.strike(cluster, 1.0)  # nothing runs: some node goes under repair
    free = sorted(cluster.free)
    cluster.start(Job(id=1, kind=Kind.RIGID, size=1, walltime=HOUR, submit=0.0,
                      runtime=HOUR), (free[0],), now=1.0)
    s = src.strike(cluster, 2.0)
    assert s.node == free[0] and s.kill is not None and s.kill.running.job.id == 1


def test_in_the_engine_busy_kills_the_job_at_every_failure() -> None:
    """One long one-node job on a 4-node machine: a killed job restarts at once on a free
    node, so it runs whenever a failure strikes. Under busy every failure kills it; under
    uniform about one in four does."""
    row = Row(submit=0, size=1, walltime=400 * HOUR, runtime=200 * HOUR)
    counts = {}
    for node in ("uniform", "busy"):
        model = FailureModel(mtbf=HOUR, repair=1000.0, repair_spread=0.0, seed=3,
                             node=FailureNode.of(node))
        src = NodeFailures(model, nodes=4, start=0.0, end=50 * HOUR)
        (out,) = simulate(tiny_hybrid([row], nodes=4), policy="easy", failures=src).outcomes
        assert out.end is not None
        counts[node] = src.counts()
    busy, uniform = counts["busy"], counts["uniform"]
    assert busy["failures"] > 20 and busy["failure_kills"] == busy["failures"]
    assert 0 < uniform["failure_kills"] < 0.5 * uniform["failures"]


def test_the_default_draws_exactly_as_before() -> None:
    """The default source against the draws it made before the switches existed: the first
    gap exponential, then per failure a node, a repair and the next gap, on one stream."""
    for seed in (0, 5):
        rng = np.random.default_rng(np.random.SeedSequence([seed, 0xFA11]))
        src = NodeFailures(FailureModel.of({"failure_mtbf": 5 * HOUR}, seed=seed,
                                           loss="all", node="uniform", times="poisson"),
                           nodes=64, start=100.0)
        cluster = Cluster(64)
        expected_next = 100.0 + float(rng.exponential(5 * HOUR))
        for _ in range(50):
            t = src.next_time()
            assert t == expected_next
            node = int(rng.integers(64))
            repaired = t + float(rng.uniform(3 * HOUR, 9 * HOUR))
            expected_next = t + float(rng.exponential(5 * HOUR))
            s = src.strike(cluster, t)
            assert (s.node, s.repaired_at) == (node, repaired)
            assert s.repair is not None
            src.repaired(cluster, s.repair, t)  # every failure then meets a node in service
        assert FailureModel.of({"failure_mtbf": HOUR}, seed=seed) == FailureModel(
            mtbf=HOUR, seed=seed, node=FailureNode.UNIFORM, times=FailureTimes.POISSON)


def gaps(times: str, n: int, seed: int = 11, mtbf: float = 5 * HOUR) -> np.ndarray:
    """``n`` times between failures of a source with law ``times`` (a fixed seed)."""
    src = NodeFailures(FailureModel(mtbf=mtbf, seed=seed, times=FailureTimes.of(times)),
                       nodes=4, start=0.0)
    cluster = Cluster(4)
    out = []
    last = 0.0
    for _ in range(n):
        t = src.next_time()
        out.append(t - last)
        last = t
        s = src.strike(cluster, t)
        if s.repair is not None:
            src.repaired(cluster, s.repair, t)
    return np.array(out)


def test_weibull_gaps_have_the_mtbf_as_mean_and_bunch() -> None:
    w, p = gaps("weibull-0.7", 20_000), gaps("poisson", 20_000)
    # standard error of the mean: cv / sqrt(n), about 1% for Weibull; the seed is fixed
    assert w.mean() == pytest.approx(5 * HOUR, rel=0.04)
    assert p.mean() == pytest.approx(5 * HOUR, rel=0.04)
    cv_w, cv_p = w.std() / w.mean(), p.std() / p.mean()
    # shape 0.7: cv = sqrt(G(1 + 2/k) / G(1 + 1/k)^2 - 1), about 1.46
    k = WEIBULL_SHAPE
    cv = math.sqrt(math.gamma(1 + 2 / k) / math.gamma(1 + 1 / k) ** 2 - 1)
    assert cv_w == pytest.approx(cv, rel=0.1) and cv_w > 1.3
    assert cv_p == pytest.approx(1.0, abs=0.05)
    # bunching: more short gaps (under a tenth of the mean) than an exponential has
    assert (w < 0.1 * 5 * HOUR).mean() > 1.5 * (p < 0.1 * 5 * HOUR).mean()


def test_weibull_gaps_are_scaled_draws_of_the_failure_stream() -> None:
    mtbf = 2 * HOUR
    model = FailureModel(mtbf=mtbf, seed=4, times=FailureTimes.WEIBULL)
    a = np.random.default_rng(np.random.SeedSequence([4, 0xFA11]))
    b = np.random.default_rng(np.random.SeedSequence([4, 0xFA11]))
    scale = mtbf / math.gamma(1 + 1 / 0.7)
    for _ in range(20):
        assert model.gap(a) == pytest.approx(scale * float(b.weibull(0.7)), rel=1e-12)
    first = NodeFailures(model, nodes=4, start=10.0).next_time()
    c = np.random.default_rng(np.random.SeedSequence([4, 0xFA11]))
    assert first == pytest.approx(10.0 + scale * float(c.weibull(0.7)), rel=1e-12)


def test_unknown_words_are_refused_in_one_sentence() -> None:
    with pytest.raises(ValueError, match=r"^unknown failure_node 'hot'; choose uniform or "
                                         r"busy$"):
        FailureModel.of({"failure_mtbf": HOUR}, seed=0, node="hot")
    with pytest.raises(ValueError, match=r"^unknown failure_times 'weibull'; choose poisson "
                                         r"or weibull-0.7$"):
        FailureModel.of({"failure_mtbf": HOUR}, seed=0, times="weibull")
