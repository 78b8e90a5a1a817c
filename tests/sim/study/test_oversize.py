"""``oversize``: a job larger than the machine dropped by cleaning (the default) against
clamped to the machine, on a hand-made trace, through the study's own loading."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.engine.core import simulate
from sim.run.spec import RunSpec, SpecError, TraceSource
from sim.study.execution import load_source, run_one

# a 4-node machine; job 2 asks for 6 nodes
HAND = """; MaxNodes: 4
; MaxProcs: 4
1  0 -1 100 2 -1 -1 2 100 -1 1 1 1 -1 1 -1 -1 -1
2 10 -1  50 6 -1 -1 6  50 -1 1 2 2 -1 1 -1 -1 -1
3 20 -1  30 4 -1 -1 4  30 -1 1 3 3 -1 1 -1 -1 -1
"""


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> TraceSource:
    path: Path = tmp_path_factory.mktemp("oversize") / "hand.swf"
    path.write_text(HAND)
    return TraceSource(path=str(path))


def schedule(source: TraceSource, oversize: str) -> dict[int, tuple[float, float, int]]:
    result = simulate(load_source(source, oversize), policy="easy")
    return {int(o.id): (o.start, o.end, o.size) for o in result.outcomes}


def test_the_hand_worked_schedules_of_drop_and_clamp(source: TraceSource) -> None:
    # drop: job 2 is gone; job 1 runs 0-100 on 2 nodes, job 3 needs all 4 and starts at 100.
    assert schedule(source, "drop") == {1: (0, 100, 2), 3: (100, 130, 4)}
    # clamp: job 2 runs on all 4 nodes; it is first in the queue, so it starts when job 1
    # ends (100-150) and job 3 after it (150-180).
    assert schedule(source, "clamp") == {1: (0, 100, 2), 2: (100, 150, 4), 3: (150, 180, 4)}
    assert load_source(source, "clamp").report.oversize_clamped == 1
    assert load_source(source).report.oversize_dropped == 1


def test_a_run_cleans_its_trace_as_its_spec_says(source: TraceSource) -> None:
    plain = RunSpec(policy="easy", workload="W5", seed=0, trace=source)
    clamp = RunSpec(policy="easy", workload="W5", seed=0, trace=source,
                    overrides=(("oversize", "clamp"),))
    assert plain.choice("oversize") == "drop" and clamp.choice("oversize") == "clamp"
    assert plain.model() == clamp.model(), "oversize is no workload-model field"
    assert run_one(plain).trace.endswith(": 2 jobs on 4 nodes")
    assert run_one(clamp).trace.endswith(": 3 jobs on 4 nodes")
    assert plain.to_dict()["overrides"] == {}, "a spec without it keeps its stored key"
    assert clamp.key != plain.key


def test_a_bad_word_is_refused_in_one_sentence(source: TraceSource) -> None:
    with pytest.raises(SpecError, match=r"^parameter oversize is drop or clamp, got 'shrink'$"):
        RunSpec(policy="easy", workload="W5", seed=0, trace=source,
                overrides=(("oversize", "shrink"),))
