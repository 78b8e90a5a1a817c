"""The shared node bookkeeping: every invariant refused with a clear sentence, and the
lending cycle (shrink for an on-demand job, owed back, expanded) end to end."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metaq_py.cluster import Cluster, ClusterError
from metaq_py.policy import Expand, Notice, Preempt, Release, Shrink, Start
from metaq_py.policy.model import Job, Kind
from tests.policy_world import job


def test_new_cluster_is_all_free_and_consistent() -> None:
    c = Cluster(8)
    assert set(c.free) == set(range(8))
    c.check()


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_bad_size_is_refused(bad: object) -> None:
    with pytest.raises(ClusterError, match="positive whole number"):
        Cluster(bad)  # type: ignore[arg-type]


def test_start_records_end_and_nodes() -> None:
    c = Cluster(8)
    r = c.start(job("a", 4, 100.0, runtime=60.0), (3, 1, 2, 0), now=10.0)
    assert r.nodes == (0, 1, 2, 3)
    assert (r.end, r.true_end) == (110.0, 70.0)
    assert set(c.free) == {4, 5, 6, 7}
    assert [e[2] for e in c.ending] == ["a"]


def test_malleable_start_below_max_scales_time_linearly() -> None:
    c = Cluster(8)
    r = c.start(job("m", 8, 100.0, kind=Kind.MALLEABLE, min_size=2, runtime=80.0),
                (0, 1, 2, 3), now=0.0)
    assert (r.end, r.true_end) == (200.0, 160.0)


@pytest.mark.parametrize(
    ("nodes", "message"),
    [
        ((0, 0, 1), "names a node twice"),
        ((0, 1, 2), "needs 2..2 nodes"),
        ((5, 9), "not free"),
    ],
)
def test_start_refusals(nodes: tuple[int, ...], message: str) -> None:
    c = Cluster(10)
    c.start(job("x", 1), (9,), now=0.0)
    with pytest.raises(ClusterError, match=message):
        c.start(job("a", 2), nodes, now=0.0)
    c.check()
    assert "a" not in c.running


def test_start_twice_is_refused() -> None:
    c = Cluster(4)
    c.start(job("a", 1), (0,), now=0.0)
    with pytest.raises(ClusterError, match="already running"):
        c.start(job("a", 1), (1,), now=0.0)


def test_unknown_job_operations_name_the_job() -> None:
    c = Cluster(4)
    for call in (lambda: c.finish("z", now=0), lambda: c.preempt("z", now=0),
                 lambda: c.shrink("z", (0,), now=0), lambda: c.expand("z", (0,), now=0)):
        with pytest.raises(ClusterError, match=r"'z'.*not running"):
            call()


def test_shrink_rules() -> None:
    c = Cluster(8)
    c.start(job("m", 6, 60.0, kind=Kind.MALLEABLE, min_size=4), range(6), now=0.0)
    c.start(job("r", 2), (6, 7), now=0.0)
    with pytest.raises(ClusterError, match="below its minimum of 4"):
        c.shrink("m", (3, 4, 5), now=0.0)
    with pytest.raises(ClusterError, match="only malleable jobs shrink"):
        c.shrink("r", (7,), now=0.0)
    with pytest.raises(ClusterError, match="nodes it holds"):
        c.shrink("m", (7,), now=0.0)
    r = c.shrink("m", (4, 5), now=30.0)
    # 30 s left at 6 nodes is 45 s at 4 nodes
    assert r.nodes == (0, 1, 2, 3) and r.end == pytest.approx(75.0)
    assert {4, 5} <= set(c.free)
    c.check()


def test_expand_rules() -> None:
    c = Cluster(8)
    c.start(job("m", 4, 60.0, kind=Kind.MALLEABLE, min_size=1), (0, 1), now=0.0)
    with pytest.raises(ClusterError, match="exceeds its maximum of 4"):
        c.expand("m", (2, 3, 4), now=0.0)
    c.start(job("r", 1), (5,), now=0.0)
    with pytest.raises(ClusterError, match="free or owed"):
        c.expand("m", (5,), now=0.0)
    r = c.expand("m", (2, 3), now=0.0)
    assert r.nodes == (0, 1, 2, 3) and r.end == pytest.approx(60.0)
    c.check()


def test_ondemand_is_never_preempted() -> None:
    c = Cluster(4)
    c.start(job("o", 2, kind=Kind.ONDEMAND), (0, 1), now=0.0)
    with pytest.raises(ClusterError, match="never preempted"):
        c.preempt("o", now=1.0)


def test_notice_reserve_release() -> None:
    c = Cluster(6)
    with pytest.raises(ClusterError, match="unknown notice 'n'"):
        c.reserve("n", (0,))
    with pytest.raises(ClusterError, match="unknown notice 'n'"):
        c.release("n")
    c.add_notice(Notice("n", 4, 100.0, 50.0, 0.0))
    with pytest.raises(ClusterError, match="exists already"):
        c.add_notice(Notice("n", 4, 100.0, 50.0, 0.0))
    with pytest.raises(ClusterError, match="machine has 6"):
        c.add_notice(Notice("big", 7, 100.0, 50.0, 0.0))
    c.reserve("n", (0, 1))
    with pytest.raises(ClusterError, match="distinct free nodes"):
        c.reserve("n", (1, 2))
    assert set(c.reserved["n"]) == {0, 1}
    c.apply(Release("n"), now=5.0)
    assert set(c.free) == set(range(6)) and "n" not in c.notices
    c.check()


def test_borrower_only_on_its_reservation_and_returns_nodes_there() -> None:
    c = Cluster(6)
    c.add_notice(Notice("n", 3, 100.0, 50.0, 0.0))
    c.reserve("n", (0, 1, 2))
    with pytest.raises(ClusterError, match="only borrow nodes reserved"):
        c.start(job("b", 2), (2, 3), now=0.0, borrowed="n")
    c.start(job("b", 2), (1, 2), now=0.0, borrowed="n")
    assert set(c.reserved["n"]) == {0}
    c.finish("b", now=10.0)
    assert set(c.reserved["n"]) == {0, 1, 2}
    c.check()


def test_release_turns_borrowers_into_ordinary_jobs() -> None:
    c = Cluster(6)
    c.add_notice(Notice("n", 3, 100.0, 50.0, 0.0))
    c.reserve("n", (0, 1, 2))
    c.start(job("b", 2), (1, 2), now=0.0, borrowed="n")
    c.release("n")
    assert c.running["b"].borrowed is None
    c.finish("b", now=1.0)
    assert set(c.free) == set(range(6))
    c.check()


def test_ondemand_start_redeems_its_notice_and_frees_leftovers() -> None:
    c = Cluster(8)
    c.add_notice(Notice("n", 4, 100.0, 50.0, 0.0))
    c.reserve("n", (0, 1, 2, 3))
    c.apply(Start("o", (0, 1, 2)), now=90.0, job=job("o", 3, kind=Kind.ONDEMAND, notice="n"))
    assert "n" not in c.notices and "n" not in c.reserved
    assert 3 in c.free
    c.check()


def test_lenders_get_their_nodes_back() -> None:
    """Shrink for an on-demand job, which ends: the nodes are owed, then expanded back."""
    c = Cluster(8)
    m = job("m", 6, 600.0, kind=Kind.MALLEABLE, min_size=2)
    c.start(m, range(6), now=0.0)
    c.start(job("r", 2), (6, 7), now=0.0)
    c.apply(Shrink("m", (3, 4, 5), for_job="o"), now=100.0)
    assert not set(c.free) & {3, 4, 5}, "lent nodes are kept for the on-demand job"
    with pytest.raises(ClusterError, match="must use all nodes shrunk for it"):
        c.start(job("o", 2, kind=Kind.ONDEMAND), (3, 4), now=100.0)
    c.apply(Start("o", (3, 4, 5)), now=100.0, job=job("o", 3, 50.0, kind=Kind.ONDEMAND))
    assert c.loans["o"] == {"m": (3, 4, 5)}
    c.finish("o", now=150.0)
    assert c.owed["m"] == (3, 4, 5) and not set(c.free) & {3, 4, 5}
    c.apply(Expand("m", (3, 4, 5)), now=150.0)
    assert c.running["m"].nodes == tuple(range(6)) and not c.owed
    c.check()


def test_a_lender_that_regrew_meanwhile_is_owed_only_up_to_its_maximum() -> None:
    """Lent nodes come back as a debt only while the lender has room: the rest is free."""
    c = Cluster(8)
    c.start(job("m", 6, 600.0, kind=Kind.MALLEABLE, min_size=2), range(6), now=0.0)
    c.shrink("m", (3, 4, 5), now=0.0, for_job="o")
    c.start(job("o", 3, kind=Kind.ONDEMAND), (3, 4, 5), now=0.0)
    c.expand("m", (6, 7), now=10.0)  # 5 of its 6 nodes: room for one more
    c.finish("o", now=20.0)
    assert c.owed == {"m": (3,)} and set(c.free) == {4, 5} and not c.loans
    c.check()


def test_debt_dies_with_a_preempted_lender() -> None:
    c = Cluster(4)
    c.start(job("m", 4, 600.0, kind=Kind.MALLEABLE, min_size=1), range(4), now=0.0)
    c.shrink("m", (2, 3), now=0.0, for_job="o")
    c.start(job("o", 2, kind=Kind.ONDEMAND), (2, 3), now=0.0)
    c.apply(Preempt("m"), now=10.0)
    c.finish("o", now=20.0)
    assert set(c.free) == set(range(4)) and not c.owed
    c.check()


@pytest.mark.parametrize("how", ["finish", "preempt"])
def test_nodes_owed_to_a_lender_that_stops_become_free(how: str) -> None:
    """The on-demand job ended first: its nodes are owed to the lender. The lender then stops
    before it expands onto them: they become free, not lost."""
    c = Cluster(4)
    c.start(job("m", 4, 600.0, kind=Kind.MALLEABLE, min_size=1), range(4), now=0.0)
    c.shrink("m", (2, 3), now=0.0, for_job="o")
    c.start(job("o", 2, kind=Kind.ONDEMAND), (2, 3), now=0.0)
    c.finish("o", now=10.0)
    assert c.owed == {"m": (2, 3)} and not set(c.free)
    if how == "finish":
        c.finish("m", now=20.0)
    else:
        c.apply(Preempt("m"), now=20.0)
    assert set(c.free) == set(range(4)) and not c.owed
    c.check()


def test_a_notice_keeps_its_other_borrowers_when_one_ends() -> None:
    c = Cluster(6)
    c.add_notice(Notice("n", 4, 100.0, 50.0, 0.0))
    c.reserve("n", (0, 1, 2, 3))
    c.start(job("b1", 2), (0, 1), now=0.0, borrowed="n")
    c.start(job("b2", 2), (2, 3), now=0.0, borrowed="n")
    c.finish("b1", now=10.0)
    assert c.snapshot(now=10.0, waiting=[]).borrowers == {"n": {"b2"}}
    c.finish("b2", now=20.0)
    assert c.snapshot(now=20.0, waiting=[]).borrowers == {}
    c.check()


def test_apply_start_needs_the_job_record() -> None:
    c = Cluster(2)
    with pytest.raises(ClusterError, match="needs its waiting Job record"):
        c.apply(Start("a", (0,)), now=0.0)
    with pytest.raises(ClusterError, match="not a scheduler action"):
        c.apply("start a", now=0.0)  # type: ignore[arg-type]


def test_checkpoint_recorded() -> None:
    c = Cluster(2)
    c.start(job("a", 1), (0,), now=5.0)
    assert c.checkpoint("a", at=50.0).last_checkpoint == 50.0
    with pytest.raises(ClusterError, match="before its start"):
        c.checkpoint("a", at=1.0)


def test_snapshot_is_a_view_not_a_copy() -> None:
    c = Cluster(4)
    snap = c.snapshot(now=0.0, waiting=[])
    assert snap.free is c.free and snap.ending is c.ending


def test_reserved_nodes_for_other_notice_usable_by_ondemand_only() -> None:
    c = Cluster(4)
    c.add_notice(Notice("n", 2, 100.0, 50.0, 0.0))
    c.reserve("n", (0, 1))
    with pytest.raises(ClusterError, match="not free"):
        c.start(job("b", 2), (0, 1), now=0.0)
    c.start(job("o", 2, kind=Kind.ONDEMAND), (0, 1), now=0.0)
    assert "n" in c.notices and not c.reserved["n"]
    c.check()


_ops = st.lists(
    st.tuples(st.sampled_from(["start", "finish", "preempt", "shrink", "reserve", "release",
                               "notice", "borrow"]),
              st.integers(0, 40), st.integers(1, 12)),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(_ops)
def test_random_operations_never_break_invariants(ops: list[tuple[str, int, int]]) -> None:
    """Whatever sequence of operations is tried, each either applies cleanly or is refused
    with a ClusterError and changes nothing; a node is never held twice, never lost."""
    c = Cluster(16)
    t = 0.0

    def state() -> tuple[object, ...]:
        return (sorted(c.free), {j: r.nodes for j, r in c.running.items()},
                {n: sorted(p) for n, p in c.reserved.items()}, sorted(c.notices),
                dict(c.owed), list(c.ending))

    for i, (op, a, k) in enumerate(ops):
        t += 1.0
        before = state()
        free = sorted(c.free)
        running = sorted(c.running, key=str)
        try:
            if op == "start":
                kind = Kind.MALLEABLE if a % 2 else Kind.RIGID
                c.start(job(f"j{i}", k, kind=kind, min_size=max(1, k // 2) if a % 2 else 0),
                        free[a % 3:a % 3 + k], now=t)
            elif op == "finish" and running:
                c.finish(running[a % len(running)], now=t)
            elif op == "preempt" and running:
                c.preempt(running[a % len(running)], now=t)
            elif op == "shrink" and running:
                r = c.running[running[a % len(running)]]
                c.shrink(r.job.id, r.nodes[-(k % 3 + 1):], now=t)
            elif op == "notice":
                c.add_notice(Notice(f"n{a % 3}", k, t + 50, 10.0, t))
            elif op == "reserve":
                c.reserve(f"n{a % 3}", free[:k])
            elif op == "release":
                c.release(f"n{a % 3}")
            elif op == "borrow":
                pool = sorted(c.reserved.get(f"n{a % 3}", ()))
                c.start(job(f"b{i}", k), pool[:k], now=t, borrowed=f"n{a % 3}")
        except ClusterError as e:
            assert str(e).strip(), "every refusal says what is wrong"
            assert state() == before, f"a refused {op} changed the cluster"
        c.check()
        held = sum(len(r.nodes) for r in c.running.values())
        reserved = sum(len(p) for p in c.reserved.values())
        assert len(c.free) + held + reserved + sum(map(len, c.owed.values())) == 16


@pytest.mark.parametrize("ends", ["end", "true_end"])
def test_keeping_one_end_index_gives_the_same_order_as_both(ends: str) -> None:
    both, one = Cluster(8), Cluster(8, ends=ends)
    for c in (both, one):
        c.start(job("a", 2, 300.0, runtime=50.0), (0, 1), now=0.0)
        c.start(job("b", 2, 100.0, runtime=90.0), (2, 3), now=0.0)
        c.start(job("c", 2, 200.0, runtime=10.0), (4, 5), now=0.0)
        c.check()
    assert [e[2] for e in one.ending] == [e[2] for e in both.ending] == ["b", "c", "a"]
    snap = one.snapshot(now=0.0, waiting=[])
    kept = snap.ending if ends == "end" else snap.ending_true
    dropped = snap.ending_true if ends == "end" else snap.ending
    assert kept is not None and dropped is None
    one.finish("b", now=90.0)
    one.check()
    assert [e[2] for e in one.ending] == ["c", "a"]


def test_an_unknown_ends_option_is_refused() -> None:
    with pytest.raises(ClusterError, match="ends must be one of"):
        Cluster(4, ends="sometimes")


def test_snapshot_fields_are_the_live_containers() -> None:
    c = Cluster(6, ends="both")
    c.add_notice(Notice("n1", 2, arrival=50.0, walltime=10.0, issued=0.0))
    c.reserve("n1", (4, 5))
    c.start(Job("a", Kind.RIGID, 2, 100.0, 0.0, runtime=40.0), (0, 1), now=0.0)
    queue = [Job("b", Kind.RIGID, 3, 10.0, 1.0)]
    snap = c.snapshot(now=5.0, waiting=queue, end=900.0, ordered=True)
    assert (snap.now, snap.total, snap.end, snap.ordered) == (5.0, 6, 900.0, True)
    assert snap.waiting is queue
    assert set(snap.free) == {2, 3} and set(snap.running) == {"a"}
    assert set(snap.reserved["n1"]) == {4, 5} and set(snap.notices) == {"n1"}
    assert snap.owed == {} and snap.borrowers == {}
    assert [e[2] for e in snap.ending] == ["a"] and snap.ending[0][0] == 100.0
    assert snap.ending_true is not None and snap.ending_true[0][0] == 40.0


def test_a_start_on_unknown_nodes_names_at_most_five_of_them_in_order() -> None:
    c = Cluster(4)
    with pytest.raises(ClusterError) as refused:
        c.start(job("a", 8), (0, 1, 99, 98, 97, 96, 95, 94), now=0.0)
    assert str(refused.value).endswith("not node ids here: [94, 95, 96, 97, 98]")
    c.check()


def test_a_withdrawn_notice_frees_its_reservation() -> None:
    c = Cluster(4)
    c.add_notice(Notice("n1", 2, 100.0, 50.0, 0.0))
    c.reserve("n1", (0, 1))
    assert set(c.reserved["n1"]) == {0, 1}
    c.remove_notice("n1")
    assert set(c.free) == set(range(4)) and "n1" not in c.notices and "n1" not in c.reserved
    c.check()
