"""Issues 15 and 28's chaos test: two real ``metaq run`` processes work through 200 real tasks
and a task array of 10 while an adversary plants junk in every folder of the queue, and the
queue's disk (a small tmpfs) is full for a while.

The adversary's plan is drawn by hypothesis (derandomized, one example that covers every
folder and every kind of junk): files of garbage, folders, symlinks into the queue and out of
it, FIFOs, garbage and huge JSON, links to ``/dev/zero``, other modes, names near the length
limits, links where a task's log or reason will go, garbage logbooks beside real tasks and
leases beside planted claims; and at the files every command reads (``FILE_KINDS``: event
logs, the tally, the status cache, the alloc journal, an array's ``.array``) a FIFO, a sparse
2 GiB file or a link to the private sentinel file; a job folder made before its runner
starts. Half is planted before the runners start, half while they run; once they run, the
disk is filled for :data:`FULL_FOR` seconds.

What must hold: every real task ran exactly once; both runners exit cleanly in time, without
a traceback; and a sentinel tree outside the queue (a private folder, plain files, a script)
is exactly as it was: same names, types, modes, owners, sizes, mtimes and content.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

from metaq_py.queue.submit import Submitter
from tests import runner_helpers as helpers
from tests.runner_helpers import make_queue, task

TASKS = 200
PLANTS = 240
"""Plantings, half before the runners start and half while they run."""
FULL_FOR = 2.0
"""Seconds the queue's disk stays full while the runners run."""
RUNNER_LIMIT = 45.0
"""Seconds both runners together may take; more counts as a hang."""

SETTINGS = helpers.SETTINGS.replace("stale_after: 3s", "stale_after: 10s")
"""The runner tests' settings, with leases kept long enough that no live claim of a runner
slowed down by the adversary is taken back (a runner sees a lease unrenewed for 10 s of its
own clock, ten heartbeats, before it takes the claim back)."""

FOLDERS = ("", "todo", "todo/sub", "priority", "hold", "hold/todo", "working",
           "working/chaos", "working/chaos/cA/todo", "working/chaos/cB/todo", "finished",
           "finished/todo", "failed/todo", "rejected/todo", "cancelled/todo", "notices",
           "notices/rejected", "jobs", "jobs/cA", "jobs/cA/logs/todo", "jobs/cB/runs",
           "jobs/.summary", "jobs/.summary/tally", "alloc", "todo/arr.sh")
"""Every folder the adversary plants in (relative to the queue; made when missing)."""

KINDS = ("garbage", "folder", "link-in", "link-out", "fifo", "deep-json", "big-int-json",
         "huge-json", "dev-zero", "log-link", "reason-link", "taken-name", "logbook", "lease",
         "kind-fifo", "kind-huge", "kind-link", "old-job-folder")
"""The kinds of junk. The ``kind-*`` ones go at a file every command reads (one of
``FILE_KINDS`` of ``metaq_py.queue.layout`` the runners do not hold themselves): a FIFO, a
sparse 2 GiB file, a link to the private sentinel file; ``old-job-folder`` is a job folder
made before its runner starts, a FIFO where its event log goes."""

KIND_PLACES = ("jobs/old/events.jsonl", "jobs/.summary/base.json",
               "jobs/.summary/tally/w1.000001.jsonl", "jobs/.summary/joblogs.json",
               "alloc/events.jsonl", "alloc/seen.json", "todo/arr.sh/.array",
               "notices/k.json", "failed/todo/k.sh.reason")
"""Where the ``kind-*`` junk goes (picked by the action's number)."""

ARRAY = 10
"""Real tasks that are the indices of one array, ``todo/arr.sh``, besides :data:`TASKS`."""

DISK = "64m"
"""The queue is on a tmpfs of this size; once, for a while, the adversary fills it."""
NAME_SIZES = (1, 3, 8, 200, 214, 215, 216, 240, 250, 255)
MODES = (0o644, 0o755, 0o777, 0o000, 0o700, 0o666)

Action = tuple[int, int, int, int, int]
"""(folder index, kind index, name size, mode, a number picking a real task or target)."""

action = st.tuples(st.integers(0, len(FOLDERS) - 1), st.integers(0, len(KINDS) - 1),
                   st.sampled_from(NAME_SIZES), st.sampled_from(MODES),
                   st.integers(0, TASKS - 1))


def _real_name(n: int) -> tuple[str, str]:
    """The folder and relative path of real task ``n``."""
    folder = ("todo", "priority")[n % 2]
    return folder, (f"sub/t{n:03d}.sh" if n % 5 == 0 else f"t{n:03d}.sh")


def _junk_name(i: int, size: int, suffix: str = "") -> str:
    stem = f"j{i}-"
    return (stem + "x" * max(0, size - len(stem) - len(suffix)) + suffix)[:max(size, 1)]


def _sentinel(tmp: Path) -> Path:
    s = tmp / "sentinel"
    (s / "private").mkdir(parents=True, mode=0o700)
    (s / "private/secret.txt").write_text("secret\n")
    (s / "notes.txt").write_text("notes\n")
    (s / "script.sh").write_text("#!/bin/bash\n#METAQ MIN_WC_TIME 1m\ntouch /tmp/x\n")
    (s / "deep/er").mkdir(parents=True)
    (s / "deep/er/data.bin").write_bytes(bytes(range(256)) * 4)
    return s


def _fingerprint(root: Path) -> dict[str, tuple]:
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in [".", *dirs, *files]:
            p = os.path.join(dirpath, name)
            st_ = os.lstat(p)
            digest = (hashlib.sha1(Path(p).read_bytes()).hexdigest()
                      if os.path.isfile(p) and not os.path.islink(p) else "")
            out[p] = (st_.st_mode, st_.st_uid, st_.st_gid, st_.st_size, st_.st_mtime_ns,
                      st_.st_nlink, digest)
    return out


NOTICE_KINDS = {KINDS.index(k) for k in ("fifo", "deep-json", "big-int-json", "huge-json",
                                         "dev-zero")}


def _for_notices(act: Action) -> bool:
    """Whether junk of a notice's kind goes to ``notices/`` (for an even ``pick``) rather
    than its drawn folder: there every runner reads it."""
    return act[1] in NOTICE_KINDS and act[4] % 2 == 0


def _plant(q: Path, sentinel: Path, i: int, act: Action) -> None:
    """Carry out one action of the plan; what the file system refuses is skipped."""
    where, kind, size, mode, pick = act
    k = KINDS[kind]
    folder = q / ("notices" if _for_notices(act) else FOLDERS[where])
    os.makedirs(folder, exist_ok=True)
    real_folder, real_rel = _real_name(pick)
    real = real_rel.rsplit("/", 1)[-1]
    if _for_notices(act):  # a name a notice may have, so that its content is read
        path = folder / f"j{i}.json"
    else:
        path = folder / _junk_name(i, size, ".json" if kind in NOTICE_KINDS else "")
    if k == "garbage":
        path.write_bytes(b"\x00junk" * (pick + 1))
    elif k == "folder":
        path.mkdir()
        (path / "inside").write_bytes(b"\x00")
    elif k == "link-in":
        targets = ("../" * FOLDERS[where].count("/") + "../finished", "../metaq.yaml", ".",
                   "../../working")
        path.symlink_to(targets[pick % len(targets)])
    elif k == "link-out":
        targets = (sentinel, sentinel / "private", sentinel / "notes.txt",
                   sentinel / "script.sh", sentinel / "private/secret.txt")
        path.symlink_to(targets[pick % len(targets)])
    elif k == "fifo":
        os.mkfifo(path)
    elif k == "deep-json":
        path.write_text("[" * 8000 + "]" * 8000)  # deeper than Python recurses, under 16 KiB
    elif k == "big-int-json":
        path.write_text(f'{{"name":"{path.stem}","nodes":1,"arrival":1' + "0" * 400
                        + ',"walltime":1,"issued":1}')
    elif k == "huge-json":
        path.write_text(" " * 1_000_000 + "{}")
    elif k == "dev-zero":
        path.symlink_to("/dev/zero")
    elif k == "log-link":  # where a real task's default log will go
        logs = q / "jobs" / ("cA", "cB")[pick % 2] / "logs" / real_folder / real_rel
        logs.parent.mkdir(parents=True, exist_ok=True)
        logs.with_name(real + ".log").symlink_to(sentinel / "notes.txt")
        return
    elif k == "reason-link":
        reason = q / "failed" / real_folder / (real_rel + ".reason")
        reason.parent.mkdir(parents=True, exist_ok=True)
        reason.symlink_to(sentinel / "notes.txt")
        return
    elif k.startswith("kind-"):
        path = q / KIND_PLACES[pick % len(KIND_PLACES)]
        path.parent.mkdir(parents=True, exist_ok=True)
        if os.path.lexists(path):
            os.rename(path, f"{path}.was{i}")
        if k == "kind-fifo":
            os.mkfifo(path)
        elif k == "kind-huge":
            with open(path, "wb") as f:
                f.truncate(2 << 30)
        else:
            path.symlink_to(sentinel / "private/secret.txt")
        return
    elif k == "old-job-folder":  # only before the runners start: theirs, made by no one else
        job = q / "jobs" / ("cA", "cB")[pick % 2]
        job.mkdir(parents=True, exist_ok=True)
        if not os.path.lexists(job / "events.jsonl"):
            os.mkfifo(job / "events.jsonl")
        return
    elif k == "taken-name":  # a folder where the real task will finish
        done = q / "finished" / real_folder / real_rel
        done.mkdir(parents=True)
        return
    elif k == "logbook":  # garbage where a real task keeps its logbook
        (q / real_folder / real_rel).with_name(f".{real}.record").write_bytes(
            b'{"attempts": 1e999, "inode": "x", "history": [' * 50)
        return
    else:  # a planted claim with a lease of garbage
        path.write_bytes(b"\x00")
        path.with_name(f".{path.name}.lease").write_text('{"start": "abc", "pid": -1}')
    if not path.is_symlink():
        os.chmod(path, mode)


def _adversary(q: Path, sentinel: Path, plan: list[Action], start: int,
               errors: list[BaseException], *, before: bool = False) -> None:
    for i, act in enumerate(plan, start):
        if KINDS[act[1]] == "old-job-folder" and not before:
            continue  # a job folder is made before its runner starts, or it is its own
        try:
            _plant(q, sentinel, i, act)
        except OSError:
            continue  # a name too long, a folder planted where this one was to go, ...
        except BaseException as e:  # a bug in the adversary itself
            errors.append(e)
            return
        time.sleep(0.04)


def _runner(q: Path, jobid: str, mechanism: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "metaq_py", "run", "-q", str(q), "--nodes", "4", "--batch",
         "local", "--jobid", jobid, "--machine", "chaos", "--grace", "1", "--margin", "0.5",
         "--launch-pause", "0", "--mechanism", mechanism],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@settings(max_examples=1, derandomize=True, database=None, deadline=None,
          phases=(Phase.generate,), suppress_health_check=list(HealthCheck))
@given(plan=st.lists(action, min_size=PLANTS, max_size=PLANTS))
def test_chaos(tmp_path_factory, plan: list[Action]) -> None:
    # One example, and it must reach every folder with every kind of junk at least once.
    assume({a[0] for a in plan} == set(range(len(FOLDERS))))
    assume({a[1] for a in plan} == set(range(len(KINDS))))
    assume({a[1] for a in plan if _for_notices(a)} == NOTICE_KINDS)
    assume(any(KINDS[a[1]] == "old-job-folder" for a in plan[:len(plan) // 2]))
    tmp = tmp_path_factory.mktemp("chaos")
    with _small_disk(tmp / "disk") as disk:
        _chaos(tmp, disk, plan)


@contextlib.contextmanager
def _small_disk(where: Path) -> Iterator[Path]:
    """A tmpfs of :data:`DISK` at ``where`` (root only)."""
    if os.geteuid() != 0:
        pytest.skip("the chaos test's full disk needs root to mount a tmpfs (CI runs as root)")
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK},mode=0755", "tmpfs",
                           str(where)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _fill_for(disk: Path, seconds: float, started: threading.Event) -> None:
    """Once the runners are under way, fill ``disk`` for ``seconds``, then free it."""
    started.wait()
    filler = disk / "filler"
    with open(filler, "wb") as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 65536)
            f.flush()
    time.sleep(seconds)  # the length of the outage, not a wait for anything
    filler.unlink()


def _chaos(tmp: Path, disk: Path, plan: list[Action]) -> None:
    queue = make_queue(disk / "q", SETTINGS)
    q = queue.root
    out = tmp / "out"
    out.mkdir()
    sentinel = _sentinel(tmp)
    for n in range(TASKS):
        folder, rel = _real_name(n)
        name = rel.replace("/", "_")
        task(queue, rel, f"echo $$ >> {out}/{name}; sleep 0.2", folder=folder)
    array = tmp / "arr.sh"
    array.write_text(f"#!/bin/bash\n#METAQ MIN_WC_TIME 1m\n#METAQ ARRAY 0-{ARRAY - 1}\n"
                     f"echo $$ >> {out}/arr-$METAQ_ARRAY_INDEX; sleep 0.2\n")
    array.chmod(0o755)
    Submitter(queue).submit(array)
    before = _fingerprint(sentinel)
    errors: list[BaseException] = []
    half = len(plan) // 2
    _adversary(q, sentinel, plan[:half], 0, errors, before=True)
    t0 = time.monotonic()
    runners = [_runner(q, "cA", "easy"), _runner(q, "cB", "CUA&SPAA")]
    adversary = threading.Thread(target=_adversary, args=(q, sentinel, plan[half:], half,
                                                          errors))
    started = threading.Event()
    full = threading.Thread(target=_fill_for, args=(disk, FULL_FOR, started))
    full.start()
    adversary.start()
    started.set()
    results = []
    for r in runners:
        left = max(1.0, RUNNER_LIMIT - (time.monotonic() - t0))
        try:
            results.append(r.communicate(timeout=left))
        except subprocess.TimeoutExpired:
            for other in runners:
                other.kill()
            raise AssertionError("a runner hung on the chaotic queue") from None
    adversary.join()
    full.join()
    took = time.monotonic() - t0
    assert not errors, errors
    for r, (_, err) in zip(runners, results, strict=True):
        assert r.returncode == 0 and "Traceback" not in err, err[-2000:]
        assert "stopped: " in err.splitlines()[-1], err[-2000:]
    runs = {p.name: len(p.read_text().splitlines()) for p in out.iterdir()}
    expected = {_real_name(n)[1].replace("/", "_") for n in range(TASKS)}
    expected |= {f"arr-{i}" for i in range(ARRAY)}
    assert set(runs) == expected, sorted(expected - set(runs))[:5]
    assert set(runs.values()) == {1}, {k: v for k, v in runs.items() if v != 1}
    assert _fingerprint(sentinel) == before, "something outside the queue was changed"
    assert sorted(p.name for p in tmp.iterdir()) == ["arr.sh", "disk", "out", "sentinel"]
    # The junk was met: bad notices set aside, junk in the task folders rejected.
    assert list((q / "notices/rejected").glob("*.json.reason"))
    assert len(list((q / "rejected").rglob("*.reason"))) >= 10
    said = "".join(err for _, err in results)
    print(f"chaos: {TASKS + ARRAY} tasks on 2 runners with {len(plan)} plantings of "
          f"{len(KINDS)} kinds in {len(FOLDERS)} folders, the disk full for {FULL_FOR:g} s "
          f"({said.count('No space left')} refusals said), in {took:.1f} s: every task ran "
          f"once")
