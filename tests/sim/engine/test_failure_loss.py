"""What a malleable or on-demand job a node failure kills loses: everything since its start
(``all``, the default) or only its setup (``since-checkpoint``: it keeps its progress), on
hand-made one-node workloads whose answers are known."""

from __future__ import annotations

import pytest

from metaq_py.cluster import Cluster
from metaq_py.policy.model import Job, Kind
from sim.engine.core import simulate
from sim.engine.failures import FailureLoss, FailureModel, NodeFailures, killed
from sim.run.result import JobOutcome
from tests.sim_worlds import Row, tiny_hybrid

HOUR = 3600.0
REPAIR = 1000.0


def first_failure(seed: int) -> float:
    """When the first failure of ``seed`` strikes a source started at 0 (mean 1 h)."""
    return NodeFailures(FailureModel(mtbf=HOUR, seed=seed), nodes=1, start=0.0).next_time()


def one_failure(row: Row, loss: str, seed: int = 4) -> JobOutcome:
    """``row`` alone on a one-node machine, submitted at 0, hit by the single failure of
    ``seed`` (at :func:`first_failure`), whose repair takes exactly ``REPAIR`` seconds."""
    t = first_failure(seed)
    model = FailureModel(mtbf=HOUR, repair=REPAIR, repair_spread=0.0, seed=seed,
                         loss=FailureLoss.of(loss))
    failures = NodeFailures(model, nodes=1, start=0.0, end=t + 1.0)  # one failure only
    (out,) = simulate(tiny_hybrid([row], nodes=1), policy="N&PAA", failures=failures).outcomes
    assert failures.counts()["failure_kills"] == 1.0
    return out


def test_a_malleable_job_keeps_its_progress_under_since_checkpoint() -> None:
    t = first_failure(4)
    run = t + 2000.0  # it is still running when the failure strikes at t
    row = Row(submit=0, size=1, walltime=run + 500, runtime=run, kind=Kind.MALLEABLE,
              min_size=1, setup=100.0)
    # all: it restarts from scratch when the node returns at t + REPAIR
    assert one_failure(row, "all").end == pytest.approx(t + REPAIR + run)
    # since-checkpoint: the 2000 s it had left plus its setup, from t + REPAIR
    assert one_failure(row, "since-checkpoint").end == pytest.approx(t + REPAIR + 2000 + 100)


def test_an_ondemand_job_keeps_its_progress_under_since_checkpoint() -> None:
    t = first_failure(4)
    row = Row(submit=0, size=1, walltime=t + 900, runtime=t + 600, kind=Kind.ONDEMAND)
    assert one_failure(row, "all").end == pytest.approx(t + REPAIR + t + 600)
    assert one_failure(row, "since-checkpoint").end == pytest.approx(t + REPAIR + 600)


def test_a_rigid_job_loses_the_same_either_way() -> None:
    t = first_failure(4)
    row = Row(submit=0, size=1, walltime=t + 900, runtime=t + 600)  # no checkpoint
    assert one_failure(row, "all") == one_failure(row, "since-checkpoint")
    assert one_failure(row, "all").end == pytest.approx(t + REPAIR + t + 600)


def test_killed_under_since_checkpoint_loses_only_the_setup() -> None:
    cluster = Cluster(4)
    job = Job(id=2, kind=Kind.MALLEABLE, size=4, min_size=1, walltime=4 * HOUR, submit=0.0,
              runtime=2 * HOUR, setup=100.0)
    r = cluster.start(job, (0, 1), now=0.0)  # at half size it needs 4 h, walltime 8 h
    k = killed(r, HOUR, FailureLoss.SINCE_CHECKPOINT)
    assert k.lost_node_seconds == pytest.approx(200.0)  # its setup on two nodes
    # 3 h left at two nodes is 1.5 h at its full four, plus the setup again
    assert k.requeued.runtime == pytest.approx(1.5 * HOUR + 100)
    assert k.requeued.walltime == pytest.approx(3.5 * HOUR + 100)


def test_an_unknown_failure_loss_is_refused_in_one_sentence() -> None:
    with pytest.raises(ValueError, match=r"^unknown failure_loss 'some'; choose all or "
                                         r"since-checkpoint$"):
        FailureModel.of({"failure_mtbf": HOUR}, seed=0, loss="some")
    assert FailureModel.of({"failure_mtbf": HOUR}, seed=0).loss is FailureLoss.ALL


def test_what_an_amdahl_job_loses_is_counted_in_full_size_work() -> None:
    # 4 nodes, 100 s at 4, serial fraction 5%, on 2 nodes: it needs 100 g s there (g about
    # 1.83); killed halfway, it loses half its 400 node-seconds of work at full size
    g = (0.05 + 0.95 / 2) / (0.05 + 0.95 / 4)
    job = Job(id=5, kind=Kind.MALLEABLE, size=4, min_size=1, walltime=100.0, submit=0.0,
              runtime=100.0, serial=0.05)
    r = Cluster(4).start(job, (0, 1), now=0.0)
    assert r.true_end == pytest.approx(100 * g)
    assert killed(r, 50 * g).lost_node_seconds == pytest.approx(200.0)
    kept = killed(r, 50 * g, FailureLoss.SINCE_CHECKPOINT).requeued
    assert kept.runtime == pytest.approx(50.0)  # half its time at full size is left
