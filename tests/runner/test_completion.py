"""The paper's completion rule (R12) in the live driver, on a fake clock: when an on-demand
task ends, the task it preempted, still waiting, resumes at once on the nodes it gave, even
where EASY's backfilling alone would keep it waiting (``tests/policy/test_completion.py``
works the policy's side by hand). Nothing sleeps; every time asserted is exact."""

from __future__ import annotations

import os
from pathlib import Path

from metaq_py.policy import make_scheduler
from tests.runner.fakes import START, Behaviour, World
from tests.runner_helpers import events, make_queue, of, task


def _at(event: dict) -> float:
    return round(event["time"] - START, 6)


def _starts(completion: str, tmp_path: Path) -> dict[str, list[float]]:
    """4 nodes. ``long`` (2 nodes, 100 s) and ``short`` (2 nodes, 2 s) start at 0; ``wide``
    (4 nodes, 10 s) heads the queue, its shadow time 100 (when ``long`` ends); ``victim`` (2
    nodes, walltime 95 s, runs 30 s), behind it, is backfilled at 2 when ``short`` ends (it
    ends by 97). At 5 on-demand ``urgent`` (2 nodes, 2 s) arrives: N&PAA preempts the
    cheapest, ``victim`` (3 s lost on 2 nodes, against ``long``'s 5 s), gone at 5.5; urgent
    runs 5.5-7.5. Restarted at 7.5 the victim would end by its walltime at 102.5, past the
    shadow time 100: EASY keeps it waiting until ``wide`` has run (100-110). Under R12 it
    resumes at 7.5 on the 2 nodes urgent gave back."""
    q = make_queue(tmp_path / completion)
    paths = [task(q, "long.sh", "", NODES=2, MIN_WC_TIME="100s"),
             task(q, "short.sh", "", NODES=2, MIN_WC_TIME="2s"),
             task(q, "wide.sh", "", NODES=4, MIN_WC_TIME="10s"),
             task(q, "victim.sh", "", NODES=2, MIN_WC_TIME="95s")]
    for i, path in enumerate(paths):
        os.utime(path, (1000 + i, 1000 + i))
    world = World({"todo/long.sh": Behaviour(100), "todo/short.sh": Behaviour(2),
                   "todo/wide.sh": Behaviour(10), "todo/victim.sh": Behaviour(30, on_stop=0.5),
                   "todo/urgent.sh": Behaviour(2)})
    world.at(START + 5, lambda: task(q, "urgent.sh", "", TYPE="ondemand", NODES=2,
                                     MIN_WC_TIME="10s"))
    runner = world.runner(q, nodes=4, scheduler="N&PAA")
    # the runner takes no completion word: the scheduler it decides with is swapped for one
    runner.scheduler = runner.decider.scheduler = make_scheduler("N&PAA", completion=completion)
    runner.run()
    evs = events(q)
    pre = of(evs, "preempt")
    assert [(e["task"], _at(e), e["for_task"]) for e in pre] == \
        [("todo/victim.sh", 5, "todo/urgent.sh")]
    starts: dict[str, list[float]] = {}
    for e in of(evs, "start"):
        starts.setdefault(e["task"].removeprefix("todo/").removesuffix(".sh"), []).append(
            _at(e))
    return starts


def test_the_victim_resumes_on_the_nodes_the_on_demand_task_gave_back(tmp_path: Path) -> None:
    starts = _starts("return", tmp_path)
    assert starts == {"long": [0], "short": [0], "victim": [2, 7.5], "urgent": [5.5],
                      "wide": [100]}, starts


def test_without_the_rule_the_victim_waits_behind_the_head(tmp_path: Path) -> None:
    starts = _starts("pool", tmp_path)
    assert starts == {"long": [0], "short": [0], "victim": [2, 110], "urgent": [5.5],
                      "wide": [100]}, starts
