"""``type_shares``: the type shares met exactly per seed (the default) against drawn group by
group, on a hand-made trace of ten one-job groups."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sim.run.spec import RunSpec, SpecError
from sim.trace.loader import Trace, load_trace
from sim.workload.model import WorkloadModel, hybrid_workload

SEEDS = range(50)


@pytest.fixture(scope="module")
def ten_groups(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    # ten 1-node jobs of ten users, ten hours apart: ten groups, none re-typed on 10 nodes
    lines = [f"{i} {i * 36000} -1 60 1 -1 -1 1 60 -1 1 {i} {i} -1 1 -1 -1 -1"
             for i in range(1, 11)]
    path: Path = tmp_path_factory.mktemp("shares") / "ten.swf"
    path.write_text("; MaxNodes: 10\n; MaxProcs: 10\n" + "\n".join(lines) + "\n")
    trace = load_trace(path)
    assert trace.nodes == 10 and len(trace) == 10
    return trace


def counts(trace: Trace, seed: int, rule: str) -> tuple[int, int, int]:
    w = hybrid_workload(trace, WorkloadModel(seed=seed, type_shares=rule))  # type: ignore[arg-type]
    assert len(w.group_labels) == 10 and not w.retyped.any()
    rigid, malleable, ondemand = np.bincount(w.kind, minlength=3).tolist()
    return rigid, malleable, ondemand


def test_exact_shares_give_six_three_one_groups_for_every_seed(ten_groups: Trace) -> None:
    # 60/30/10% of 10 groups: 6 rigid, 3 malleable, 1 on demand, whatever the seed
    assert {counts(ten_groups, seed, "exact") for seed in SEEDS} == {(6, 3, 1)}


def test_drawn_shares_vary_between_seeds_around_the_shares(ten_groups: Trace) -> None:
    drawn = [counts(ten_groups, seed, "drawn") for seed in SEEDS]
    assert all(sum(c) == 10 for c in drawn)
    # 6/3/1 comes out with probability 10!/(6!3!1!) .6^6 .3^3 .1 = 0.106 a seed, so most
    # seeds differ, and no on-demand group at all (probability .9^10 = 0.35) happens
    assert sum(c != (6, 3, 1) for c in drawn) > len(drawn) // 2
    assert any(c[2] == 0 for c in drawn) and any(c[2] >= 2 for c in drawn)
    # 500 groups over all seeds: each share within four standard deviations of its mean
    total = np.sum(drawn, axis=0) / (10 * len(drawn))
    for share, p in zip(total, (0.6, 0.3, 0.1), strict=True):
        assert abs(share - p) < 4 * np.sqrt(p * (1 - p) / (10 * len(drawn)))
    assert drawn == [counts(ten_groups, seed, "drawn") for seed in SEEDS], "same seed, same"


def test_the_spec_carries_type_shares_to_the_model_and_keeps_default_keys() -> None:
    plain = RunSpec(policy="easy", workload="W5", seed=1)
    exact = RunSpec(policy="easy", workload="W5", seed=1, overrides=(("type_shares", "exact"),))
    drawn = RunSpec(policy="easy", workload="W5", seed=1, overrides=(("type_shares", "drawn"),))
    assert plain.model().type_shares == exact.model().type_shares == "exact"
    assert drawn.model().type_shares == "drawn"
    assert plain.to_dict()["overrides"] == {}, "a spec without it keeps its stored key"
    assert len({plain.key, exact.key, drawn.key}) == 3


def test_a_bad_rule_is_refused_in_one_sentence() -> None:
    with pytest.raises(SpecError, match=r"^parameter type_shares is exact or drawn, "
                                        r"got 'random'$"):
        RunSpec(policy="easy", workload="W5", seed=1, overrides=(("type_shares", "random"),))
    with pytest.raises(ValueError, match=r"^type_shares is exact or drawn, got 'poisson'$"):
        WorkloadModel(type_shares="poisson")  # type: ignore[arg-type]
