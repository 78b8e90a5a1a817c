"""METAQ's on-disk contract for running tasks: a claimed task sits at
``working/<machine>/<jobid>/<name>`` under its own file name (a numbered slot ``<n>/<name>``
when the job already holds that name), its folder kept in its lease; every reader takes the
identity from the lease, and a bare file name names a task wherever it is."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metaq_py.errors import QueueError
from metaq_py.queue.admin import QueueAdmin
from metaq_py.queue.campaign.deps import Dependencies, Resolver
from metaq_py.queue.doctor import examine
from metaq_py.queue.lease import (
    claim_identity,
    claim_slot,
    find_claim,
    lease_path,
    write_lease,
)
from metaq_py.queue.store import Queue
from metaq_py.queue.submit import Submitter
from tests.queue.test_store import put


@pytest.fixture
def q(tmp_path: Path) -> Queue:
    return Queue.init(tmp_path / "q")


def claim_all(q: Queue, jobid: str = "1") -> dict[str, Path]:
    """Claim every waiting task for job ``jobid``; identity -> where its claim sits."""
    out = {}
    for task in q.pending():
        claim = q.claim(task, machine="m", jobid=jobid)
        assert claim is not None
        out[claim.id] = claim.path
    return out


def rel(q: Queue, path: Path) -> str:
    return path.relative_to(q.root).as_posix()


# --- where a claim goes ----------------------------------------------------------------------


def test_a_claim_keeps_its_file_name_and_the_lease_its_folder(q: Queue) -> None:
    put(q.root / "todo/gpu/ens7/prop_42.sh")
    [claim] = q.pending()
    claimed = q.claim(claim, machine="theta", jobid="88")
    assert claimed is not None and rel(q, claimed.path) == "working/theta/88/prop_42.sh"
    lease = json.loads(lease_path(claimed.path).read_text())
    assert (lease["folder"], lease["relpath"]) == ("todo", "gpu/ens7/prop_42.sh")
    # METAQ's generators look for running tasks with exactly these globs.
    assert [rel(q, p) for p in q.root.glob("working/*/*/prop_42.sh")] == [
        "working/theta/88/prop_42.sh"]
    assert q.identity_of(claimed.path) == ("todo", "gpu/ens7/prop_42.sh")
    moved = q.requeue(claimed, reason="preempted", count_attempt=False)
    assert moved is not None and rel(q, moved.path) == "todo/gpu/ens7/prop_42.sh"


def test_clashing_names_take_the_smallest_free_numbered_slot(q: Queue) -> None:
    for sub in ("a", "b", "c", "d"):
        put(q.root / "todo" / sub / "run.sh")
    job = q.root / "working/m/1"
    job.mkdir(parents=True)
    (job / "3").write_text("not a slot: a file of someone's\n")  # slot 3 is not free
    where = claim_all(q)
    assert {i: rel(q, p) for i, p in where.items()} == {
        "todo/a/run.sh": "working/m/1/run.sh", "todo/b/run.sh": "working/m/1/2/run.sh",
        "todo/c/run.sh": "working/m/1/4/run.sh", "todo/d/run.sh": "working/m/1/5/run.sh"}
    assert (job / "3").read_text() == "not a slot: a file of someone's\n"
    # Once the top's task has left, the next claim of that name takes the top again.
    q.finish(next(c for c in q.leases() if c.id == "todo/a/run.sh"), exit_code=0)
    put(q.root / "todo/e/run.sh")
    assert rel(q, claim_all(q)["todo/e/run.sh"]) == "working/m/1/run.sh"


def test_a_slot_is_never_a_link(q: Queue, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    job = q.root / "working/m/1"
    job.mkdir(parents=True)
    (job / "x.sh").write_text("taken\n")
    os.symlink(outside, job / "2")
    assert claim_slot(job, "x.sh") == job / "3/x.sh"
    assert claim_slot(job, "y.sh") == job / "y.sh"


def test_a_task_called_x_reason_beside_x_is_a_task_of_its_own(q: Queue) -> None:
    put(q.root / "todo/x")
    put(q.root / "todo/sub/x.reason")
    claim_all(q)
    assert sorted(c.id for c in q.leases()) == ["todo/sub/x.reason", "todo/x"]


NAMES = ("a.sh", "b.sh", "2", "run")
SUBS = ("", "x", "y/z", "2", "3")


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tasks=st.sets(st.tuples(st.sampled_from(("priority", "todo")), st.sampled_from(SUBS),
                               st.sampled_from(NAMES)), min_size=1, max_size=12),
       jobs=st.lists(st.sampled_from(("1", "2")), min_size=12, max_size=12),
       finish=st.lists(st.booleans(), min_size=12, max_size=12))
def test_tasks_of_one_name_each_run_once_and_go_back_to_their_own_folder(
        tmp_path_factory: pytest.TempPathFactory, tasks: set[tuple[str, str, str]],
        jobs: list[str], finish: list[bool]) -> None:
    q = Queue.init(tmp_path_factory.mktemp("clash") / "q")
    idents = set()
    for folder, sub, name in tasks:
        relpath = f"{sub}/{name}" if sub else name
        try:
            put(q.root / folder / relpath)
        except OSError:
            continue  # a task stands where a sub-folder would go, or the other way round
        idents.add(f"{folder}/{relpath}")
    claims = []
    for n, task in enumerate(q.pending()):
        claim = q.claim(task, machine="m", jobid=jobs[n])
        assert claim is not None
        claims.append(claim)
    assert {c.id for c in claims} == idents
    paths = [c.path for c in claims]
    assert len(set(paths)) == len(paths)  # no claim replaced another
    for c in claims:
        where = c.path.relative_to(q.root / "working/m" / c.jobid).parts
        assert where[-1] == c.relpath.rpartition("/")[2]  # its exact file name
        assert len(where) == 1 or (len(where) == 2 and int(where[0]) >= 2)
        assert q.identity_of(c.path) == (c.folder, c.relpath)
    assert sorted(c.id for c in q.leases()) == sorted(idents)
    ended = {}
    for c, done in zip(claims, finish, strict=False):
        moved = q.finish(c, exit_code=0) if done else q.requeue(c, reason="preempted")
        assert moved is not None
        ended[c.id] = rel(q, moved.path)
    for c, done in zip(claims, finish, strict=False):
        assert ended[c.id] == (f"finished/{c.id}" if done else c.id)
    assert q.leases() == []
    for job in ("1", "2"):
        q.tidy_job(machine="m", jobid=job)
    assert not any((q.root / "working/m").iterdir())  # slots and all


# --- a claim whose lease is gone ---------------------------------------------------------------


def test_a_claim_without_its_lease_goes_back_by_its_path(q: Queue) -> None:
    job = q.root / "working/m/9"
    put(job / "todo/sub/old.sh")  # an older runner's claim: <folder>/<relpath>
    put(job / "new.sh")
    put(job / "2/new.sh")
    assert sorted((c.id, rel(q, c.path)) for c in q.leases()) == [
        ("todo/new.sh", "working/m/9/2/new.sh"), ("todo/new.sh", "working/m/9/new.sh"),
        ("todo/sub/old.sh", "working/m/9/todo/sub/old.sh")]
    back = {rel(q, q.reclaim(c, reason="lost").path) for c in q.leases()}
    assert back == {"todo/sub/old.sh", "todo/new.sh", "todo/new.sh.1"}


def test_an_older_runners_claim_with_its_lease_is_read_and_taken_back(q: Queue) -> None:
    """On the Monday of the switch, claims made by the runner before (at
    ``working/<machine>/<jobid>/<folder>/<relpath>``) are still running: they are listed,
    found and taken back to where they came from."""
    old = put(q.root / "working/m/7/todo/sub/x.sh")
    write_lease(old, machine="m", jobid="7", folder="todo", relpath="sub/x.sh", host="h",
                pid=1, start=1.0, attempts=0, submit=1.0)
    [claim] = q.leases()
    assert (claim.id, claim.path) == ("todo/sub/x.sh", old)
    assert QueueAdmin(q).find("x.sh").path == old
    assert Resolver(q).where("todo/sub/x.sh") == "working"
    assert examine(q, now=2.0) == []
    moved = q.reclaim(claim, reason="job 7 is dead")
    assert moved is not None and rel(q, moved.path) == "todo/sub/x.sh"


def test_without_a_todo_folder_a_lost_lease_goes_to_the_last_task_folder(tmp_path: Path) -> None:
    Queue.init(tmp_path / "q")
    (tmp_path / "q/metaq.yaml").write_text("folders: [urgent, bulk]\n")
    q = Queue(tmp_path / "q")
    put(q.root / "working/m/1/a.sh")
    put(q.root / "working/m/1/urgent/b.sh")
    assert sorted(c.id for c in q.leases()) == ["bulk/a.sh", "urgent/b.sh"]


def test_a_lease_naming_a_bad_folder_is_not_believed(q: Queue) -> None:
    put(q.root / "todo/sub/t.sh")
    claim = q.claim(q.pending()[0], machine="m", jobid="1")
    assert claim is not None
    lease_path(claim.path).write_text(json.dumps(
        {"folder": "../..", "relpath": "../../etc/passwd", "start": 1, "submit": 1, "pid": 1,
         "attempts": 0}))
    [listed] = q.leases()
    assert listed.id == "todo/t.sh"  # from its path, never outside the queue


PART = st.text(st.sampled_from("ab.2/ \x00"), min_size=0, max_size=6)
VALUE = st.one_of(st.none(), st.integers(), st.booleans(), PART,
                  st.lists(PART, max_size=2).map("/".join), st.just("../.."))


@settings(max_examples=300, deadline=None)
@given(rel=st.lists(st.sampled_from(["todo", "priority", "2", "x.sh", "sub"]), min_size=1,
                    max_size=4).map("/".join),
       folder=VALUE, relpath=VALUE)
def test_a_lease_never_sends_a_task_outside_its_queue(rel: str, folder: object,
                                                      relpath: object) -> None:
    """Whatever a lease (a file in a folder others may write) says, the identity read from it
    is a plain task folder name and a relative path of visible parts; a lease that says
    nothing sensible gives way to the claim's path."""
    got_folder, got_rel = claim_identity(Path("/nowhere"), rel, ("priority", "todo"),
                                         {"folder": folder, "relpath": relpath})
    assert got_folder and "/" not in got_folder and not got_folder.startswith(".")
    assert "\0" not in got_folder and "\0" not in got_rel
    assert all(part and not part.startswith(".") for part in got_rel.split("/"))
    if isinstance(folder, str) and folder == got_folder:
        return  # the lease's own, as written
    parts = rel.split("/")
    assert got_folder == (parts[0] if len(parts) > 1 and parts[0] in ("priority", "todo")
                          else "todo")


# --- finding a task by its name ----------------------------------------------------------------


def test_a_bare_file_name_names_the_one_task_that_has_it(q: Queue) -> None:
    admin = QueueAdmin(q)
    put(q.root / "todo/ens/a/prop.sh")
    put(q.root / "todo/ens/b/prop.sh")
    put(q.root / "todo/ens/c/solo.sh")
    where = claim_all(q)
    running = admin.find("solo.sh")
    assert (running.state, running.id, running.path) == ("working", "todo/ens/c/solo.sh",
                                                         where["todo/ens/c/solo.sh"])
    with pytest.raises(QueueError) as e:
        admin.find("prop.sh")
    assert str(e.value) == ("2 tasks are called 'prop.sh': todo/ens/a/prop.sh (running), "
                            "todo/ens/b/prop.sh (running); name one by its <folder>/<path>.")
    # A path into working/ names the task its lease names, slot or not.
    slot = where["todo/ens/b/prop.sh"]
    assert rel(q, slot) == "working/m/1/2/prop.sh"
    assert admin.find(str(slot)).id == "todo/ens/b/prop.sh"
    assert admin.find("working/m/1/2/prop.sh").id == "todo/ens/b/prop.sh"
    # cancel by name reaches the right file: its request sits beside the claim in its slot
    claim = next(c for c in q.leases() if c.id == "todo/ens/b/prop.sh")
    assert admin.cancel("working/m/1/2/prop.sh").state == "working"
    assert q.cancel_requested(claim)
    assert not any(q.cancel_requested(c) for c in q.leases() if c.id != claim.id)
    q.finish(next(c for c in q.leases() if c.id == "todo/ens/c/solo.sh"), exit_code=0)
    done = admin.find("solo.sh")
    assert (done.state, done.path) == ("finished", q.root / "finished/todo/ens/c/solo.sh")
    with pytest.raises(QueueError, match=r"^no task called 'solo\.sh' is waiting; "
                                         r"todo/ens/c/solo\.sh is finished\.$"):
        admin.hold("solo.sh")
    with pytest.raises(QueueError, match=r"no task called 'none\.sh' is"):
        admin.find("none.sh")
    for n in range(7):
        put(q.root / f"todo/many/{n}/run.sh")
    with pytest.raises(QueueError) as many:
        admin.find("run.sh")
    assert str(many.value) == ("7 tasks are called 'run.sh': " + ", ".join(
        f"todo/many/{n}/run.sh (waiting)" for n in range(5)) + " and 2 more; name one by its "
        "<folder>/<path>.")


def test_explain_and_show_read_a_running_task_from_its_lease(q: Queue) -> None:
    from metaq_py.report.explain import explain

    put(q.root / "todo/x/run.sh")
    put(q.root / "todo/y/run.sh")
    claim_all(q)
    ex = explain(q, "todo/y/run.sh", now=q.clock.now())
    assert ex.state == "working" and "running in job 1 on m" in ex.reasons[0]
    listed = {e.id: rel(q, e.path) for e in QueueAdmin(q).entries("working")}
    assert listed == {"todo/x/run.sh": "working/m/1/run.sh",
                      "todo/y/run.sh": "working/m/1/2/run.sh"}


# --- readers of working/ ---------------------------------------------------------------------


def test_a_dependency_running_in_a_slot_is_running(q: Queue, tmp_path: Path) -> None:
    put(q.root / "todo/a/step.sh")
    put(q.root / "todo/b/step.sh")
    after = put(tmp_path / "next.sh", "#METAQ AFTER todo/b/step.sh\n")
    claim_all(q)
    Submitter(q).submit(after)
    assert Resolver(q).where("todo/b/step.sh") == "working"
    assert Resolver(q).where("todo/c/step.sh") is None
    assert Resolver(q).resolve("todo/*/step.sh") == ["todo/a/step.sh", "todo/b/step.sh"]
    deps = Dependencies(q)
    verdict = deps.check(next(t for t in q.scan().tasks if t.id == "todo/next.sh"))
    assert not verdict.ready and verdict.state == "running"
    q.finish(next(c for c in q.leases() if c.id == "todo/b/step.sh"), exit_code=0)
    deps.new_look()
    assert deps.check(next(t for t in q.scan().tasks if t.id == "todo/next.sh")).ready


def test_a_running_task_is_found_past_a_file_planted_at_a_slot(q: Queue) -> None:
    job = q.root / "working/m/1"
    job.mkdir(parents=True)
    (job / "2").write_text("someone's\n")
    put(q.root / "todo/a/step.sh")
    put(q.root / "todo/b/step.sh")
    where = claim_all(q)
    assert rel(q, where["todo/b/step.sh"]) == "working/m/1/3/step.sh"
    assert find_claim(job, "todo", "b/step.sh", q.config.folders) == where["todo/b/step.sh"]
    assert find_claim(job, "todo", "a/step.sh", q.config.folders) == where["todo/a/step.sh"]
    assert find_claim(job, "todo", "c/step.sh", q.config.folders) is None


def test_doctor_finds_nothing_wrong_with_slots(q: Queue) -> None:
    for sub in ("a", "b", "c"):
        put(q.root / "todo" / sub / "run.sh")
    claim_all(q)
    assert examine(q, now=q.clock.now()) == []


def test_metaq_show_takes_a_bare_file_name(q: Queue) -> None:
    from tests.cli.test_queue import metaq

    put(q.root / "todo/a/prop.sh")
    put(q.root / "todo/b/prop.sh")
    put(q.root / "todo/c/solo.sh")
    where = claim_all(q)
    shown = metaq("show", "solo.sh", "-q", str(q.root))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[0] == (f"todo/c/solo.sh: working "
                                            f"({where['todo/c/solo.sh']})")
    both = metaq("show", "prop.sh", "-q", str(q.root))
    assert both.returncode == 1 and both.stdout == ""
    assert both.stderr.splitlines() == [
        "metaq: 2 tasks are called 'prop.sh': todo/a/prop.sh (running), todo/b/prop.sh "
        "(running); name one by its <folder>/<path>."]
