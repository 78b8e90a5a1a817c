"""Blocks of neighbouring nodes: a multi-node task is moved inside one block when one has
room, and its start event says how many blocks it spans."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from metaq_py.batch.topology import blocks_of
from metaq_py.policy import Preempt, Reserve, Shrink, Start
from metaq_py.runner.tasks.placing import NodeBlocks, in_one_block, named_nodes, usable_for
from tests.cli.test_queue import metaq
from tests.runner_helpers import events, make_queue, of, runner, task

TWO = ((0, 1, 2, 3), (4, 5, 6, 7))


def test_a_task_spanning_two_blocks_moves_into_the_one_with_room() -> None:
    free = {3, 4, 5, 6}
    assert in_one_block((3, 4), TWO, free.__contains__) == (4, 5)


def test_a_task_inside_one_block_or_fitting_nowhere_stays() -> None:
    assert in_one_block((4, 5), TWO, lambda n: True) is None
    assert in_one_block((2, 3, 4), TWO, {2, 3, 4, 5}.__contains__) is None
    assert in_one_block((0,), TWO, lambda n: True) is None


def test_the_tightest_block_with_room_is_taken() -> None:
    blocks = ((0, 1, 2, 3), (4, 5), (6, 7, 8, 9))
    free = {3, 4, 5, 6, 7, 8, 9}
    assert in_one_block((3, 6), blocks, free.__contains__) == (4, 5)


def test_nodes_named_by_other_actions_or_draining_are_never_taken() -> None:
    actions = [Start("a", (3, 4)), Start("b", (5,)), Reserve("n", (6,)), Preempt("c"),
               Shrink("d", (4, 7))]
    named = named_nodes(actions)
    assert named == Counter({3: 1, 4: 2, 5: 1, 6: 1, 7: 1})
    usable = usable_for((3, 4), named, free={0, 1, 2, 3, 4, 5, 6, 7}, draining={0})
    # 4 is also named by the shrink, 5 and 6 by others; 0 is still held by a stopping task
    assert [n for n in range(8) if usable(n)] == [1, 2, 3]
    assert in_one_block((3, 4), TWO, usable) == (1, 2)
    usable = usable_for((3, 7), Counter({3: 1, 7: 1}), free=set(range(8)), draining={0})
    assert in_one_block((3, 7), TWO, usable) == (1, 2), "the tighter block: 3 free against 4"
    usable = usable_for((3, 7), Counter({3: 1, 7: 1}), free=set(range(8)), draining={0, 1, 2})
    assert in_one_block((3, 7), TWO, usable) == (4, 5)


@given(st.lists(st.integers(1, 6), min_size=1, max_size=6),
       st.sets(st.integers(0, 35)), st.sets(st.integers(0, 35)), st.integers(2, 8))
def test_a_move_keeps_the_count_and_takes_only_usable_nodes_of_one_block(
        sizes: list[int], free: set[int], asked_from: set[int], k: int) -> None:
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    blocks = tuple(tuple(range(s, s + n)) for s, n in zip(starts, sizes, strict=True))
    total = sum(sizes)
    free = {n for n in free if n < total}
    asked = tuple(sorted(n for n in asked_from if n in free))[:k]
    moved = in_one_block(asked, blocks, free.__contains__)
    spans = {i for i, b in enumerate(blocks) if set(asked) & set(b)}
    roomy = [b for b in blocks if len(free & set(b)) >= len(asked)]
    if len(asked) <= 1 or len(spans) == 1 or not roomy:
        assert moved is None
    else:
        assert moved is not None and len(moved) == len(asked) == len(set(moved))
        assert set(moved) <= free
        assert any(set(moved) <= set(b) for b in blocks)
        assert list(moved) == sorted(moved)


def test_blocks_spanned_ask_the_batch_system_only_for_several_nodes() -> None:
    asked: list[int] = []

    def ask() -> tuple[tuple[int, ...], ...]:
        asked.append(1)
        return TWO

    blocks = NodeBlocks(ask)
    assert blocks.spanned((5,)) == 1 and not asked
    assert blocks.spanned((1, 2)) == 1 and blocks.spanned((3, 4, 5)) == 2
    assert asked == [1], "asked once, then kept"


def _twenty_hosts_in_two_blocks() -> None:
    hosts = tuple(f"local{i}" for i in range(20))
    assert blocks_of(hosts, (), 16) == (tuple(range(16)), tuple(range(16, 20)))


def test_in_the_runner_a_two_node_task_lands_inside_one_block(tmp_path: Path) -> None:
    _twenty_hosts_in_two_blocks()
    q = make_queue(tmp_path / "q")
    task(q, "a.sh", "sleep 0.5", NODES=15)
    task(q, "b.sh", "true", NODES=2)
    task(q, "c.sh", "sleep 0.5", NODES=15, folder="priority")
    assert runner(q, nodes=20).run() == 0
    evs = events(q)
    first, = of(evs, "start", task="priority/c.sh")
    assert first["hosts"] == [f"local{i}" for i in range(15)] and first["blocks"] == 1
    # the scheduler named local15 and local16, which straddle the two blocks
    b, = of(evs, "start", task="todo/b.sh")
    assert b["hosts"] == ["local16", "local17"] and b["blocks"] == 1


def test_a_task_too_big_for_any_block_keeps_its_nodes_and_says_it_spans_two(
        tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    task(q, "a.sh", "sleep 0.5", NODES=15, folder="priority")
    task(q, "b.sh", "true", NODES=5)
    assert runner(q, nodes=20).run() == 0
    b, = of(events(q), "start", task="todo/b.sh")
    assert b["hosts"] == [f"local{i}" for i in range(15, 20)] and b["blocks"] == 2


def test_metaq_run_places_a_two_node_task_inside_one_block(tmp_path: Path) -> None:
    q = tmp_path / "q"
    assert metaq("init", str(q)).returncode == 0
    for name, nodes in (("big", 15), ("pair", 2)):
        script = tmp_path / f"{name}.sh"
        script.write_text(f"#!/bin/sh\n#METAQ NODES {nodes}\n#METAQ MIN_WC_TIME 1:00\n"
                          f'echo "$METAQ_NODELIST" > {tmp_path}/{name}.hosts\nsleep 0.5\n')
        script.chmod(0o755)
        done = metaq("submit", str(script), "--queue", str(q))
        assert done.returncode == 0, done.stderr
    ran = metaq("run", "--queue", str(q), "--batch", "local", "--nodes", "20",
                "--launch-pause", "0")
    assert ran.returncode == 0, ran.stderr
    starts = {Path(e["task"]).stem: e for log in (q / "jobs").rglob("events.jsonl")
              for e in map(json.loads, log.read_text().splitlines()) if e["event"] == "start"}
    assert starts["big"]["hosts"] == [f"local{i}" for i in range(15)]
    assert starts["pair"]["hosts"] == ["local16", "local17"] and starts["pair"]["blocks"] == 1
    seen = (tmp_path / "pair.hosts").read_text().split()
    assert seen and set(seen[0].replace(",", " ").split()) <= {"local16", "local17"}
