"""Follow-on starts in the launch agent (metaq_py.launch.agent), a real process: a follow-on
starts the moment the task before it has been reaped, and is told after that task's exit; one
withdrawn, held too long, or behind a start that never runs is never started; chains start in
order; and a runner that goes takes its held follow-ons along, unstarted."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metaq_py.launch import TaskProcess
from metaq_py.launch.agent_link import AgentLink, AgentTask, Done
from metaq_py.launch.prepare import Prepared
from tests.launch.test_agent import ready
from tests.launch.test_launch import all_dead


class Told:
    """Everything the link told, in order: ("exit", task) and ("done", name, task, error)."""

    def __init__(self) -> None:
        self.seen: list[tuple[object, ...]] = []
        self.changed = threading.Condition()

    def done(self, name: str) -> Done:
        """The callback for the start ``name``."""
        def told(task: AgentTask | None, error: str | None) -> None:
            with self.changed:
                self.seen.append(("done", name, task, error))
                self.changed.notify_all()
        return told

    def on_exit(self, process: TaskProcess) -> None:
        with self.changed:
            self.seen.append(("exit", process.spec.task))
            self.changed.notify_all()

    def wait(self, n: int, timeout: float = 10.0) -> list[tuple[object, ...]]:
        """What was told once ``n`` things were, leaving out the first start."""
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.seen) >= n + 1, timeout), self.seen
            return list(self.seen[1:])


def started(link: AgentLink, prepared: Prepared, told: Told) -> AgentTask:
    """Hand ``prepared`` over as a plain start and wait for it (told first of all)."""
    assert not told.seen
    assert link.start(prepared, done=told.done("first"), on_exit=told.on_exit)
    link.sync()
    task = told.seen[0][2]
    assert isinstance(task, AgentTask), told.seen
    return task


@pytest.fixture
def link() -> Iterator[AgentLink]:
    opened = AgentLink.open()
    assert opened is not None
    yield opened
    opened.close()


def _marker_script(tmp_path: Path, name: str) -> str:
    """A script body that leaves ``<name>.ran`` with its start time, and ends at once."""
    return f"#!/bin/sh\ndate +%s.%N > {tmp_path / name}.ran\n"


def test_a_follow_on_starts_when_its_task_ends_and_is_told_after_that_exit(
        tmp_path: Path, link: AgentLink) -> None:
    told = Told()
    before = started(link, ready(tmp_path, "#!/bin/sh\nsleep 0.5\ndate +%s.%N > "
                                 f"{tmp_path}/before.end\n", name="before.sh"), told)
    nxt = ready(tmp_path, _marker_script(tmp_path, "next"), name="next.sh")
    token = link.follow(nxt, after=before.token, hold=10.0, done=told.done("next"),
                        on_exit=told.on_exit)
    assert token is not None
    time.sleep(0.2)
    assert not (tmp_path / "next.ran").exists()  # held while the task before runs
    seen = told.wait(3)
    assert [s[:2] for s in seen] == [("exit", "todo/before.sh"), ("done", "next"),
                                     ("exit", "todo/next.sh")]
    task, error = seen[1][2], seen[1][3]
    assert error is None and isinstance(task, AgentTask) and task.token == token
    assert float((tmp_path / "next.ran").read_text()) >= \
        float((tmp_path / "before.end").read_text())


def test_a_withdrawn_follow_on_never_starts(tmp_path: Path, link: AgentLink) -> None:
    told = Told()
    before = started(link, ready(tmp_path, "#!/bin/sh\nsleep 30\n", name="before.sh"),
                     told)
    token = link.follow(ready(tmp_path, _marker_script(tmp_path, "next"), name="next.sh"),
                        after=before.token, hold=10.0, done=told.done("next"),
                        on_exit=told.on_exit)
    assert token is not None
    link.withdraw(token)
    assert told.wait(1) == [("done", "next", None, None)]
    assert before.kill()
    assert before.wait(10) is not None
    link.sync()
    time.sleep(0.3)
    assert not (tmp_path / "next.ran").exists()
    assert [s[:2] for s in told.seen[1:]] == [("done", "next"), ("exit", "todo/before.sh")]


def test_a_follow_on_held_past_its_hold_goes_back_before_its_task_ends(
        tmp_path: Path, link: AgentLink) -> None:
    told = Told()
    before = started(link, ready(tmp_path, "#!/bin/sh\nsleep 2\n", name="before.sh"), told)
    t0 = time.monotonic()
    assert link.follow(ready(tmp_path, _marker_script(tmp_path, "next"), name="next.sh"),
                       after=before.token, hold=0.3, done=told.done("next"),
                       on_exit=told.on_exit) is not None
    assert told.wait(1) == [("done", "next", None, None)]
    assert 0.25 <= time.monotonic() - t0 < 1.5
    assert before.status is None  # still running
    assert before.wait(10) is not None
    link.sync()
    assert not (tmp_path / "next.ran").exists()


def test_a_chain_starts_in_order_and_withdrawing_its_head_takes_the_rest(
        tmp_path: Path, link: AgentLink) -> None:
    told = Told()
    first = started(link, ready(tmp_path, "#!/bin/sh\nsleep 0.3\n", name="first.sh"), told)
    second = link.follow(ready(tmp_path, "#!/bin/sh\nsleep 0.2\n", name="second.sh"),
                         after=first.token, hold=10.0, done=told.done("second"),
                         on_exit=told.on_exit)
    assert second is not None
    third = link.follow(ready(tmp_path, _marker_script(tmp_path, "third"), name="third.sh"),
                        after=second, hold=10.0, done=told.done("third"),
                        on_exit=told.on_exit)
    assert third is not None
    seen = told.wait(5)
    assert [s[:2] for s in seen] == [("exit", "todo/first.sh"), ("done", "second"),
                                     ("exit", "todo/second.sh"), ("done", "third"),
                                     ("exit", "todo/third.sh")]

    told = Told()
    head = started(link, ready(tmp_path, "#!/bin/sh\nsleep 30\n", name="head.sh"), told)
    w = link.follow(ready(tmp_path, _marker_script(tmp_path, "w"), name="w.sh"),
                    after=head.token, hold=10.0, done=told.done("w"), on_exit=told.on_exit)
    x = link.follow(ready(tmp_path, _marker_script(tmp_path, "x"), name="x.sh"),
                    after=w or 0, hold=10.0, done=told.done("x"), on_exit=told.on_exit)
    assert w is not None and x is not None
    link.withdraw(w)
    assert told.wait(2) == [("done", "w", None, None), ("done", "x", None, None)]
    assert head.kill()
    assert head.wait(10) is not None
    link.sync()
    assert not (tmp_path / "w.ran").exists() and not (tmp_path / "x.ran").exists()


def test_a_follow_on_of_a_task_just_ended_starts_and_of_no_task_goes_back(
        tmp_path: Path, link: AgentLink) -> None:
    told = Told()
    before = started(link, ready(tmp_path, "#!/bin/sh\nexit 0\n", name="before.sh"), told)
    assert before.wait(10) is not None
    assert link.follow(ready(tmp_path, _marker_script(tmp_path, "late"), name="late.sh"),
                       after=before.token, hold=10.0, done=told.done("late"),
                       on_exit=told.on_exit) is not None
    seen = told.wait(3)
    assert [s[:2] for s in seen] == [("exit", "todo/before.sh"), ("done", "late"),
                                     ("exit", "todo/late.sh")]
    assert isinstance(seen[1][2], AgentTask) and (tmp_path / "late.ran").exists()
    # A start the agent never made (refused, or a token never handed over) has no end.
    assert link.follow(ready(tmp_path, _marker_script(tmp_path, "orphan"), name="orphan.sh"),
                       after=10_000, hold=10.0, done=told.done("orphan"),
                       on_exit=told.on_exit) is not None
    assert told.wait(4)[3] == ("done", "orphan", None, None)
    link.sync()
    assert not (tmp_path / "orphan.ran").exists()


def test_a_runner_that_goes_takes_its_held_follow_ons_along_unstarted(tmp_path: Path) -> None:
    link = AgentLink.open()
    assert link is not None
    told = Told()
    before = started(link, ready(tmp_path, "#!/bin/sh\nsleep 30\n", name="before.sh"),
                     told)
    assert link.follow(ready(tmp_path, _marker_script(tmp_path, "next"), name="next.sh"),
                       after=before.token, hold=30.0, done=told.done("next"),
                       on_exit=told.on_exit) is not None
    link.close()  # as at the runner's end: the agent kills its tasks and exits
    assert all_dead([before.pid], 10)
    time.sleep(0.3)
    assert not (tmp_path / "next.ran").exists()
    assert ("done", "next", None, None) in told.seen  # nothing started: for the runner to requeue


_CHAIN = st.lists(st.tuples(st.booleans(), st.sampled_from([0.1, 10.0])), min_size=1,
                  max_size=3)
"""Follow-ons one behind the other: whether each is withdrawn at once, and its hold."""


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chain=_CHAIN)
def test_every_follow_on_is_answered_once_and_runs_only_where_it_may(
        tmp_path_factory: pytest.TempPathFactory, link: AgentLink,
        chain: list[tuple[bool, float]]) -> None:
    tmp_path = tmp_path_factory.mktemp("chain")
    told = Told()
    head = started(link, ready(tmp_path, "#!/bin/sh\nsleep 0.8\n", name="head.sh"), told)
    after, tokens = head.token, []
    for i, (withdraw, hold) in enumerate(chain):
        token = link.follow(ready(tmp_path, _marker_script(tmp_path, f"f{i}") + "sleep 0.1\n",
                                  name=f"f{i}.sh"),
                            after=after, hold=hold, done=told.done(f"f{i}"),
                            on_exit=told.on_exit)
        assert token is not None
        if withdraw:
            link.withdraw(token)
        tokens.append(token)
        after = token
    assert head.wait(10) is not None
    # Each follow-on runs if, and only if, nothing before it in the chain (itself included)
    # was withdrawn or held past its hold: the head runs 0.8 s, far longer than a short hold.
    may_run = list(itertools.accumulate((not w and h > 1 for w, h in chain),
                                        lambda a, b: a and b))
    told.wait(len(chain) + 1 + sum(may_run), timeout=15)  # every answer, and those exits
    time.sleep(0.2)
    link.sync()
    for i, runs in enumerate(may_run):
        answers = [s for s in told.seen if s[:2] == ("done", f"f{i}")]
        assert len(answers) == 1, told.seen  # answered exactly once
        assert isinstance(answers[0][2], AgentTask) is runs
        assert (tmp_path / f"f{i}.ran").exists() is runs
    # Those that ran, ran one after the other.
    ends = [float((tmp_path / f"f{i}.ran").read_text()) for i, r in enumerate(may_run) if r]
    assert ends == sorted(ends)
