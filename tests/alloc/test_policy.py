"""The sizing policy of ``metaq alloc``: worked examples, and invariants under hypothesis."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from metaq_py.alloc.policy import Known, Refuse, Submit, Waiting, decide, fits
from metaq_py.queue.settings.config import AllocSettings

NOW = 1_700_000_000.0
S = AllocSettings(min_nodes=1, max_nodes=8, min_walltime=600.0, max_walltime=7200.0,
                  margin=300.0, max_allocations=2, max_queued=1, backoff=600.0)


def task(nodes: int = 1, walltime: float = 600.0, least: int | None = None,
         name: str = "todo/t.sh") -> Waiting:
    return Waiting(name, nodes if least is None else least, nodes, walltime)


def test_nothing_waits_nothing_is_submitted() -> None:
    d = decide([], [], S, now=NOW)
    assert d == Refuse("empty", "no task waits")


def test_tasks_waiting_only_for_dependencies_bring_nothing() -> None:
    d = decide([], [], S, now=NOW, blocked=3)
    assert d == Refuse("blocked", "3 tasks wait, each for a dependency not yet finished, "
                                  "and none other")
    # One task ready among blocked ones: sized for that task alone.
    d = decide([task(nodes=2, walltime=600.0)], [], S, now=NOW, blocked=3)
    assert isinstance(d, Submit) and (d.nodes, d.fits) == (2, 1)


def test_one_task_gets_its_nodes_and_its_time_plus_the_margin() -> None:
    d = decide([task(nodes=3, walltime=1800.0)], [], S, now=NOW)
    assert isinstance(d, Submit)
    assert (d.nodes, d.walltime, d.fits) == (3, 2100.0, 1)
    assert "the largest (3)" in d.reason and "00:35:00" in d.reason


def test_the_backlog_asks_for_more_nodes_up_to_the_cap() -> None:
    # 10 one-node tasks of 50 min: 10 node-hours... spread over 55 min is 10 nodes, capped at 8.
    d = decide([task(walltime=3000.0, name=f"todo/{i}") for i in range(10)], [], S, now=NOW)
    assert isinstance(d, Submit)
    assert d.nodes == 8
    assert d.walltime == 3300.0
    # Four of them fit in 4 nodes.
    d = decide([task(walltime=3000.0, name=f"todo/{i}") for i in range(4)], [], S, now=NOW)
    assert isinstance(d, Submit) and d.nodes == 4


def test_short_tasks_get_the_least_walltime_in_whole_minutes() -> None:
    d = decide([task(walltime=10.0)], [], S, now=NOW)
    assert isinstance(d, Submit) and d.walltime == 600.0
    d = decide([task(walltime=400.5)], [], S, now=NOW)
    assert isinstance(d, Submit) and d.walltime == 720.0


def test_a_task_too_big_for_any_allocation_brings_none() -> None:
    d = decide([task(nodes=16, name="todo/big.sh")], [], S, now=NOW)
    assert d == Refuse("no-fit", "no waiting task fits: the smallest (todo/big.sh) needs 16 "
                                 "nodes and alloc.max_nodes is 8")
    d = decide([task(walltime=7000.0, name="todo/long.sh")], [], S, now=NOW)
    assert isinstance(d, Refuse) and d.code == "no-fit"
    assert "todo/long.sh" in d.reason and "alloc.max_walltime 02:00:00" in d.reason


def test_a_malleable_task_fits_on_its_minimum_and_is_cut_to_the_cap() -> None:
    d = decide([task(nodes=32, least=4)], [], S, now=NOW)
    assert isinstance(d, Submit) and d.nodes == 8


def test_only_the_tasks_that_fit_size_the_allocation() -> None:
    d = decide([task(nodes=16), task(walltime=9000.0), task(nodes=2, walltime=600.0)], [], S,
               now=NOW)
    assert isinstance(d, Submit)
    assert (d.nodes, d.walltime, d.fits) == (2, 900.0, 1)


def test_allocations_already_there_count() -> None:
    w = [task()]
    assert decide(w, [Known("1", queued=False), Known("2", queued=False)], S,
                  now=NOW).code == "limit"  # type: ignore[union-attr]
    assert decide(w, [Known("1", queued=True)], S, now=NOW).code == "queued"  # type: ignore[union-attr]
    assert isinstance(decide(w, [Known("1", queued=False)], S, now=NOW), Submit)


def test_a_failed_submission_holds_the_next_off_for_the_backoff() -> None:
    d = decide([task()], [], S, now=NOW, last_failure=NOW - 60)
    assert d == Refuse("backoff", "a submission failed less than alloc.backoff ago; the next "
                                  "try is in 00:09:00")
    assert isinstance(decide([task()], [], S, now=NOW, last_failure=NOW - 600), Submit)


# --------------------------------------------------------------------------- invariants

waiting_tasks = st.lists(
    st.builds(lambda least, extra, wall: Waiting("todo/t", least, least + extra, wall),
              st.integers(1, 40), st.integers(0, 40),
              st.floats(1.0, 200_000.0, allow_nan=False)),
    max_size=30)
allocation_settings = st.builds(
    lambda lo, span, wlo, wspan, margin, most, queued, backoff: AllocSettings(
        min_nodes=lo, max_nodes=lo + span, min_walltime=wlo, max_walltime=wlo + wspan,
        margin=margin, max_allocations=most, max_queued=min(queued, most), backoff=backoff),
    st.integers(1, 16), st.integers(0, 32), st.floats(60.0, 7200.0), st.floats(0.0, 172800.0),
    st.floats(0.0, 3600.0), st.integers(1, 4), st.integers(1, 4), st.floats(1.0, 3600.0))
known_jobs = st.lists(st.builds(Known, st.just("1"), st.booleans()), max_size=5)


@settings(max_examples=300, deadline=None)
@given(waiting_tasks, known_jobs, allocation_settings, st.none() | st.floats(0.0, 7200.0))
def test_a_submission_is_within_the_settings_and_runs_a_waiting_task(
    waiting: list[Waiting], known: list[Known], s: AllocSettings, failed_ago: float | None
) -> None:
    last = None if failed_ago is None else NOW - failed_ago
    d = decide(waiting, known, s, now=NOW, last_failure=last)
    if not isinstance(d, Submit):
        assert isinstance(d, Refuse) and d.reason and "\n" not in d.reason
        return
    assert s.min_nodes <= d.nodes <= s.max_nodes
    assert d.walltime <= s.max_walltime
    assert d.walltime >= min(s.min_walltime, s.max_walltime)
    # Never useless: some waiting task can start on these nodes and end within the walltime.
    assert any(t.least <= d.nodes and t.walltime + s.margin <= d.walltime for t in waiting)
    assert d.fits == sum(1 for t in waiting if fits(t, s)) >= 1
    assert len(known) < s.max_allocations
    assert sum(k.queued for k in known) < s.max_queued
    assert last is None or last + s.backoff <= NOW


@settings(max_examples=200, deadline=None)
@given(waiting_tasks, allocation_settings)
def test_refusing_for_no_fit_means_no_task_could_run(waiting: list[Waiting],
                                                     s: AllocSettings) -> None:
    d = decide(waiting, [], s, now=NOW)
    if isinstance(d, Refuse) and d.code == "no-fit":
        assert waiting and not any(fits(t, s) for t in waiting)
    if waiting and any(fits(t, s) for t in waiting):
        assert isinstance(d, Submit)


@settings(max_examples=200, deadline=None)
@given(waiting_tasks, allocation_settings)
def test_more_waiting_work_never_asks_for_fewer_nodes(waiting: list[Waiting],
                                                      s: AllocSettings) -> None:
    first = decide(waiting, [], s, now=NOW)
    more = decide([*waiting, *waiting], [], s, now=NOW)
    if isinstance(first, Submit):
        assert isinstance(more, Submit)
        assert more.nodes >= first.nodes
        assert math.isclose(more.walltime, first.walltime)
