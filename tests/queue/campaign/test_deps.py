"""Dependencies: names resolved at submit, readiness read from the folders, failures carried."""

from __future__ import annotations

from pathlib import Path

import pytest

from metaq_py.errors import QueueError
from metaq_py.queue.campaign.deps import Dependencies, find_cycle
from metaq_py.queue.store import Queue
from metaq_py.queue.submit import Submitter
from metaq_py.report.explain import explain


@pytest.fixture
def q(tmp_path: Path) -> Queue:
    return Queue.init(tmp_path / "q")


def script(path: Path, directives: str = "") -> Path:
    path.write_text(f"#!/bin/sh\n{directives}true\n")
    path.chmod(0o755)
    return path


def run_and_end(q: Queue, ident: str, code: int) -> None:
    """Claim the waiting task ``ident`` as a runner would and end it with ``code``."""
    task = next(t for t in q.scan().tasks if t.id == ident)
    claim = q.claim(task, machine="m", jobid="1")
    assert claim is not None
    q.finish(claim, exit_code=code)


def readiness(q: Queue, deps: Dependencies, ident: str):
    deps.new_look()
    return deps.check(next(t for t in q.scan().tasks if t.id == ident))


def test_a_task_waits_until_its_dependency_has_finished(q: Queue, tmp_path: Path) -> None:
    submitter = Submitter(q)
    submitter.submit(script(tmp_path / "a.sh"))
    submitter.submit(script(tmp_path / "b.sh", "#METAQ AFTER a.sh\n"))
    assert "#METAQ AFTER todo/a.sh" in (q.root / "todo/b.sh").read_text()  # resolved
    deps = Dependencies(q)
    r = readiness(q, deps, "todo/b.sh")
    assert not r.ready and r.waits_for == "todo/a.sh" and r.state == "waiting"
    words = explain(q, "todo/b.sh", now=0).reasons
    assert "todo/a.sh" in words[0] and "waiting" in words[0]
    run_and_end(q, "todo/a.sh", 0)
    assert readiness(q, deps, "todo/b.sh").ready


def test_a_failed_dependency_fails_its_dependent_for_good(q: Queue, tmp_path: Path) -> None:
    submitter = Submitter(q)
    submitter.submit(script(tmp_path / "a.sh", "#METAQ RETRIES 0\n"))
    submitter.submit(script(tmp_path / "b.sh"), after=("a.sh",))
    submitter.submit(script(tmp_path / "c.sh", "#METAQ AFTER_ANY a.sh\n"))
    run_and_end(q, "todo/a.sh", 3)
    deps = Dependencies(q)
    r = readiness(q, deps, "todo/b.sh")
    assert r.failed == "dependency todo/a.sh failed"
    assert deps.fail(next(t for t in q.scan().tasks if t.id == "todo/b.sh"), r) is not None
    assert (q.root / "failed/todo/b.sh.reason").read_text().strip() == \
        "dependency todo/a.sh failed"
    assert readiness(q, deps, "todo/c.sh").ready  # AFTER_ANY: ended, whatever the outcome


def test_an_array_dependency_waits_for_every_index(q: Queue, tmp_path: Path) -> None:
    submitter = Submitter(q)
    submitter.submit(script(tmp_path / "p.sh"), array="0-2")
    submitter.submit(script(tmp_path / "c.sh", "#METAQ AFTER p.sh[{index}]\n"), array="0-2")
    submitter.submit(script(tmp_path / "z.sh", "#METAQ AFTER c.sh\n"))
    deps = Dependencies(q)
    run_and_end(q, "todo/p.sh/1", 0)
    assert readiness(q, deps, "todo/c.sh/1").ready
    assert not readiness(q, deps, "todo/c.sh/0").ready
    for i in range(3):
        if i != 1:
            run_and_end(q, f"todo/p.sh/{i}", 0)
        run_and_end(q, f"todo/c.sh/{i}", 0)
        r = readiness(q, deps, "todo/z.sh")
        assert r.ready == (i == 2), r
        if i < 2:
            assert r.state == f"an array with {i + 1} of 3 indices finished"


def test_unknown_names_and_cycles_are_refused_at_submit(q: Queue, tmp_path: Path) -> None:
    submitter = Submitter(q)
    with pytest.raises(QueueError, match="names no task"):
        submitter.submit(script(tmp_path / "b.sh", "#METAQ AFTER nothing.sh\n"))
    x = script(tmp_path / "x.sh", "#METAQ AFTER y.sh\n")
    y = script(tmp_path / "y.sh", "#METAQ AFTER x.sh\n")
    with pytest.raises(QueueError, match="wait for each other"):
        submitter.submit_all([x, y])
    with pytest.raises(QueueError, match="wait for each other"):
        submitter.submit(script(tmp_path / "s.sh", "#METAQ AFTER todo/s*\n"))
    assert q.scan().tasks == ()
    # Together, in any order, when there is no cycle.
    a = script(tmp_path / "a.sh", "#METAQ AFTER b.sh\n")
    submitter.submit_all([a, script(tmp_path / "b.sh")])
    assert [t.id for t in q.scan().tasks] == ["todo/a.sh", "todo/b.sh"]


def test_globs_are_resolved_to_the_tasks_they_match(q: Queue, tmp_path: Path) -> None:
    submitter = Submitter(q)
    for name in ("m1.sh", "m2.sh", "other.sh"):
        submitter.submit(script(tmp_path / name))
    submitter.submit(script(tmp_path / "all.sh", "#METAQ AFTER todo/m*.sh\n"))
    assert "#METAQ AFTER todo/m1.sh todo/m2.sh\n" in (q.root / "todo/all.sh").read_text()


def test_find_cycle() -> None:
    assert find_cycle({"a": ["b"], "b": ["c"], "c": []}) is None
    cycle = find_cycle({"a": ["b"], "b": ["c"], "c": ["a"]})
    assert cycle is not None and cycle[0] == cycle[-1] and set(cycle) == {"a", "b", "c"}
    assert find_cycle({"a": ["a"]}) == ["a", "a"]
