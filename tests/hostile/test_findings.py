"""Issue 15's findings, each planted in a queue that a real runner must then get through.

Every row is (name, plant, expect); the good task ``todo/good.sh`` must always finish, the
runner must neither crash nor hang, and the private ``victim/`` folder outside the queue must
be as it was. Add a case by writing a plant and an expect and adding a row.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from metaq_py.queue.lease import lease_path
from tests.hostile.harness import Expect, Plant, World, age, good_task, make_world, run_world
from tests.runner_helpers import task

# --- plants and expectations ---------------------------------------------------------------


def symlinked_folder(w: World) -> None:  # finding 1
    good_task(w.q, "evil.sh", w.tmp / "out", folder="todo")  # a real script...
    os.rename(w.q.root / "todo/evil.sh", w.victim / "evil.sh")  # ...hidden in the victim
    (w.q.root / "todo/d").symlink_to(w.victim)


def victim_untouched(w: World) -> None:
    assert sorted(p.name for p in w.victim.iterdir()) == ["evil.sh", "notes.txt"]
    assert not w.ran("evil.sh")


def notice_text(text: str, name: str = "d.json") -> Plant:  # findings 2 and 3
    def plant(w: World) -> None:
        (w.q.root / "notices" / name).write_text(text)
    return plant


def notice_set_aside(name: str) -> Expect:
    def expect(w: World) -> None:
        assert (w.q.root / "notices/rejected" / name).exists() or \
            os.path.lexists(w.q.root / "notices/rejected" / name)
    return expect


def fifo_notice(w: World) -> None:  # finding 3
    os.mkfifo(w.q.root / "notices/f.json")


def zero_notice(w: World) -> None:  # finding 3
    (w.q.root / "notices/z.json").symlink_to("/dev/zero")


def long_name(w: World) -> None:  # finding 4
    good_task(w.q, "c" * 245 + ".sh", w.tmp / "out")


def long_name_rejected(w: World) -> None:
    rejected = [p for p in (w.q.root / "rejected/todo").glob("long-name-*")
                if not p.name.endswith(".reason")]
    assert len(rejected) == 1 and not w.ran("c" * 245 + ".sh")
    assert "bytes long" in Path(f"{rejected[0]}.reason").read_text()


def deep_path(w: World) -> None:  # issue 28: a path past PATH_MAX is rejected, with why
    here = w.q.root / "todo"
    fd = os.open(here, os.O_RDONLY | os.O_DIRECTORY)
    try:
        while len(os.fsencode(str(here))) < 4096 + 200:
            os.mkdir("d" * 200, dir_fd=fd)
            inner = os.open("d" * 200, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd, here = inner, here / ("d" * 200)
        with os.fdopen(os.open("deep.sh", os.O_WRONLY | os.O_CREAT, 0o755, dir_fd=fd), "w") as f:
            f.write(f"#!/bin/bash\n#METAQ MIN_WC_TIME 1m\ntouch {w.tmp}/out/deep.sh\n")
    finally:
        os.close(fd)


def deep_path_rejected(w: World) -> None:
    """Past PATH_MAX nothing can be named, so nothing can be moved: it is not run, and it is
    never silently ignored: every listing of the waiting tasks says why."""
    from metaq_py.queue.admin import QueueAdmin

    assert not w.ran("deep.sh")
    said = [e.reason or "" for e in QueueAdmin(w.q).entries("pending") if e.spec is None]
    assert any("longer than the 4096 bytes a path may have" in r for r in said), said


def junk_by_the_thousand(w: World) -> None:  # issue 28: junk never starves real work
    from metaq_py.queue.walk import BIG_FOLDER

    for i in range(BIG_FOLDER + 100):  # past the size where junk is told by its lstat
        (w.q.root / "todo" / f"junk-{i:05d}.txt").write_bytes(b"#!/bin/sh\n")
    good_task(w.q, "late.sh", w.tmp / "out")  # a real task among them, made last


def junk_rejected_bit_by_bit(w: World) -> None:
    from metaq_py.queue.claiming import REJECT_EACH

    assert w.ran("late.sh")
    rejected = list((w.q.root / "rejected/todo").glob("junk-*.reason"))
    assert rejected and len(rejected) % REJECT_EACH == 0, len(rejected)
    assert "not executable" in rejected[0].read_text()


def untrusted_link(w: World) -> None:  # finding 5: a link made by another user
    private = w.victim / "p.sh"
    private.write_text(f"#!/bin/bash\ntouch {w.tmp}/out/p.sh\n")
    private.chmod(0o700)
    link = w.q.root / "todo/x.sh"
    link.symlink_to(private)
    os.lchown(link, 65534, 65534)


def untrusted_link_refused(w: World) -> None:
    assert not w.ran("p.sh")
    assert "nobody" in (w.q.root / "rejected/todo/x.sh.reason").read_text() or \
        "65534" in (w.q.root / "rejected/todo/x.sh.reason").read_text()


def reason_link(w: World) -> None:  # finding 6
    (w.q.root / "failed/todo").mkdir(parents=True)
    (w.victim / "victim.txt").write_text("keep\n")
    (w.q.root / "failed/todo/b.sh.reason").symlink_to(w.victim / "victim.txt")
    task(w.q, "b.sh", "exit 9")
    (w.q.root / "failed/todo/c.sh").write_text("a failed task\n")
    (w.q.root / "failed/todo/c.sh.reason").write_text("another task's reason\n")
    task(w.q, "c.sh", "exit 9")


def reason_not_followed(w: World) -> None:
    assert (w.victim / "victim.txt").read_text() == "keep\n"
    assert (w.q.root / "failed/todo/c.sh.reason").read_text() == "another task's reason\n"
    assert "code 9" in (w.q.root / "failed/todo/b.sh.1.reason").read_text()


def log_link(w: World) -> None:  # finding 6, the default log
    logs = w.q.root / "jobs" / w.jobid / "logs/todo"
    logs.mkdir(parents=True)
    (w.victim / "victim.txt").write_text("keep\n")
    (logs / "good.sh.log").symlink_to(w.victim / "victim.txt")


def log_not_followed(w: World) -> None:
    assert (w.victim / "victim.txt").read_text() == "keep\n"
    assert not (w.q.root / "jobs" / w.jobid / "logs/todo/good.sh.log").is_symlink()


def cancelled_on_dead_job(w: World) -> None:  # finding 7
    from metaq_py.queue.admin import QueueAdmin

    good_task(w.q, "t1.sh", w.tmp / "out")
    t1 = next(t for t in w.q.scan().tasks if t.id == "todo/t1.sh")
    claim = w.q.claim(t1, machine=w.run.machine, jobid="dead-job")
    assert claim is not None
    QueueAdmin(w.q).cancel("todo/t1.sh")
    old = time.time() - 3600
    os.utime(lease_path(claim.path), (old, old))


def cancel_survived(w: World) -> None:
    assert w.where("todo/t1.sh") == ["cancelled"] and not w.ran("t1.sh")


def live_claim_elsewhere(w: World) -> None:  # finding 8: judged by the holder's stale_after
    good_task(w.q, "t2.sh", w.tmp / "out")
    t2 = next(t for t in w.q.scan().tasks if t.id == "todo/t2.sh")
    claim = w.q.claim(t2, machine="other-machine", jobid="7")
    assert claim is not None
    lease = lease_path(claim.path)
    data = json.loads(lease.read_text())
    data["stale_after"] = 600.0
    lease.write_text(json.dumps(data))
    old = time.time() - 30  # 10 times this queue's stale_after (3 s), 1/20 of the holder's
    os.utime(lease, (old, old))


def live_claim_kept(w: World) -> None:
    assert w.where("todo/t2.sh") == ["working"] and not w.ran("t2.sh")


def garbage_lease(w: World) -> None:  # finding 11
    good_task(w.q, "t3.sh", w.tmp / "out")
    t3 = next(t for t in w.q.scan().tasks if t.id == "todo/t3.sh")
    claim = w.q.claim(t3, machine="other-machine", jobid="8")
    assert claim is not None
    lease_path(claim.path).write_text('{"start": "abc", "pid": "x", "attempts": 1e999, '
                                      '"folder": "../../etc", "relpath": "../x"}')
    old = time.time() - 3600
    os.utime(lease_path(claim.path), (old, old))


def garbage_lease_reclaimed_in_place(w: World) -> None:
    assert w.ran("t3.sh") and w.where("todo/t3.sh") == ["finished"]


def bounded_signal(w: World) -> None:  # finding 13
    task(w.q, "sig.sh", "trap '' USR1; sleep 100", SIGNAL="USR1@99999999999999999999")


def bounded_signal_refused(w: World) -> None:
    assert "too large" in (w.q.root / "rejected/todo/sig.sh.reason").read_text()


def late_chmod(w: World) -> None:  # finding 10: seen before its chmod +x, then made runnable
    path = w.q.root / "todo/w.sh"
    path.write_text(f"#!/bin/bash\n#METAQ MIN_WC_TIME 1m\ntouch {w.tmp}/out/w.sh\n")
    age(w.q)
    w.q.scan()  # the runner's index sees it not executable
    path.chmod(0o755)


def late_chmod_ran(w: World) -> None:
    assert w.ran("w.sh") and w.where("todo/w.sh") == ["finished"]


def planted_folders(w: World) -> None:  # a link where a done folder belongs
    import shutil

    shutil.rmtree(w.q.root / "finished")
    (w.q.root / "finished").symlink_to(w.victim)


def planted_folder_moved_aside(w: World) -> None:
    assert (w.q.root / "finished").is_dir() and not (w.q.root / "finished").is_symlink()
    assert sorted(p.name for p in w.victim.iterdir()) == ["notes.txt"]


CASES: list[tuple[str, Plant, Expect]] = [
    ("1 symlinked folder in todo", symlinked_folder, victim_untouched),
    ("2 deeply nested notice", notice_text("[" * 100000 + "]" * 100000),
     notice_set_aside("d.json")),
    ("2 notice with a huge integer", notice_text(
        '{"name":"d","nodes":1,"arrival":1' + "0" * 400 + ',"walltime":1,"issued":1}'),
     notice_set_aside("d.json")),
    ("3 FIFO notice", fifo_notice, notice_set_aside("f.json")),
    ("3 notice linked to /dev/zero", zero_notice, notice_set_aside("z.json")),
    ("3 notice of 300 kB", notice_text(" " * 300_000 + "{}"), notice_set_aside("d.json")),
    ("4 task name of 249 bytes", long_name, long_name_rejected),
    ("6 planted .reason link, task named like a reason", reason_link, reason_not_followed),
    ("6 planted default-log link", log_link, log_not_followed),
    ("7 cancel of a task whose job is dead", cancelled_on_dead_job, cancel_survived),
    ("8 a live claim judged by its holder's stale_after", live_claim_elsewhere,
     live_claim_kept),
    ("10 executable only after the first scan", late_chmod, late_chmod_ran),
    ("11 lease of garbage fields", garbage_lease, garbage_lease_reclaimed_in_place),
    ("13 SIGNAL beyond any bound", bounded_signal, bounded_signal_refused),
    ("28 a path past PATH_MAX", deep_path, deep_path_rejected),
    ("28 junk by the thousand", junk_by_the_thousand, junk_rejected_bit_by_bit),
    ("a link in place of finished/", planted_folders, planted_folder_moved_aside),
]

if os.getuid() == 0:  # only root can make a link belong to another user
    CASES.append(("5 a link made by an untrusted user", untrusted_link,
                  untrusted_link_refused))


@pytest.mark.parametrize(("name", "plant", "expect"), CASES, ids=[c[0] for c in CASES])
def test_hostile_queue(tmp_path: Path, name: str, plant: Plant, expect: Expect) -> None:
    settings = None
    if name.startswith("5 "):
        from tests.runner_helpers import SETTINGS
        settings = SETTINGS + "trusted_users: [root]\n"
    world = make_world(tmp_path, settings=settings)
    plant(world)
    age(world.q)
    run_world(world)
    assert world.ran("good.sh"), f"the good task did not run: {world.lines[-5:]}"
    expect(world)
    assert (world.victim / "notes.txt").read_text() == "secret\n"


def _notice(w: World, name: str, *, arrival: float, issued: float) -> None:
    (w.q.root / "notices" / f"{name}.json").write_text(json.dumps(
        {"name": name, "nodes": 2, "arrival": arrival, "walltime": 3600, "issued": issued}))


@pytest.mark.parametrize("mechanism", ["CUA&SPAA", "CUP&PAA"])
def test_12_a_far_notice_neither_holds_the_runner_nor_its_nodes(tmp_path: Path,
                                                                mechanism: str) -> None:
    """Finding 12: notices at 9999-12-31 (one honest about its issue time, one claiming to
    be issued the day before) are set aside, and one due in 20 days does not keep a runner
    without --linger: it stops once its tasks are done, well within the hang limit."""
    from datetime import datetime

    w = make_world(tmp_path, nodes=4, scheduler=mechanism)
    far = datetime(9999, 12, 31, 23, 59).timestamp()
    now = time.time()
    _notice(w, "far", arrival=far, issued=now)
    _notice(w, "sly", arrival=far, issued=far - 86400)
    _notice(w, "later", arrival=now + 20 * 86400, issued=now)
    age(w.q)
    t0 = time.monotonic()
    run_world(w)
    assert time.monotonic() - t0 < 10
    assert w.ran("good.sh")
    assert w.run.stop_reason.startswith("nothing left"), w.run.stop_reason
    for name in ("far", "sly"):
        assert "ahead" in (w.q.root / f"notices/rejected/{name}.json.reason").read_text()
    assert (w.q.root / "notices/later.json").is_file()
