"""Issue 15's chaos test: two real ``metaq run`` processes work through 200 real tasks while
an adversary plants junk in every folder of the queue.

The adversary's plan is drawn by hypothesis (derandomized, one example that covers every
folder and every kind of junk): files of garbage, folders, symlinks into the queue and out of
it, FIFOs, garbage and huge JSON, links to ``/dev/zero``, other modes, names near the length
limits, links where a task's log or reason will go, garbage logbooks beside real tasks and
leases beside planted claims. Half is planted before the runners start, half while they run.

What must hold: every real task ran exactly once; both runners exit cleanly in time, without
a traceback; and a sentinel tree outside the queue (a private folder, plain files, a script)
is exactly as it was: same names, types, modes, owners, sizes, mtimes and content.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

from tests import runner_helpers as helpers
from tests.runner_helpers import make_queue, task

TASKS = 200
RUNNER_LIMIT = 45.0
"""Seconds both runners together may take; more counts as a hang."""

SETTINGS = helpers.SETTINGS.replace("stale_after: 3s", "stale_after: 30s")
"""The runner tests' settings, with leases kept long enough that no live claim of a runner
slowed down by the adversary is taken back."""

FOLDERS = ("", "todo", "todo/sub", "priority", "hold", "hold/todo", "working",
           "working/chaos", "working/chaos/cA/todo", "working/chaos/cB/todo", "finished",
           "finished/todo", "failed/todo", "rejected/todo", "cancelled/todo", "notices",
           "notices/rejected", "jobs", "jobs/cA", "jobs/cA/logs/todo", "jobs/cB/runs")
"""Every folder the adversary plants in (relative to the queue; made when missing)."""

KINDS = ("garbage", "folder", "link-in", "link-out", "fifo", "deep-json", "big-int-json",
         "huge-json", "dev-zero", "log-link", "reason-link", "taken-name", "logbook", "lease")
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
               errors: list[BaseException]) -> None:
    for i, act in enumerate(plan, start):
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
@given(plan=st.lists(action, min_size=160, max_size=160))
def test_chaos(tmp_path_factory, plan: list[Action]) -> None:
    # One example, and it must reach every folder with every kind of junk at least once.
    assume({a[0] for a in plan} == set(range(len(FOLDERS))))
    assume({a[1] for a in plan} == set(range(len(KINDS))))
    assume({a[1] for a in plan if _for_notices(a)} == NOTICE_KINDS)
    tmp = tmp_path_factory.mktemp("chaos")
    queue = make_queue(tmp / "q", SETTINGS)
    q = queue.root
    out = tmp / "out"
    out.mkdir()
    sentinel = _sentinel(tmp)
    for n in range(TASKS):
        folder, rel = _real_name(n)
        name = rel.replace("/", "_")
        task(queue, rel, f"echo $$ >> {out}/{name}; sleep 0.2", folder=folder)
    before = _fingerprint(sentinel)
    errors: list[BaseException] = []
    half = len(plan) // 2
    _adversary(q, sentinel, plan[:half], 0, errors)
    t0 = time.monotonic()
    runners = [_runner(q, "cA", "easy"), _runner(q, "cB", "CUA&SPAA")]
    adversary = threading.Thread(target=_adversary, args=(q, sentinel, plan[half:], half,
                                                          errors))
    adversary.start()
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
    took = time.monotonic() - t0
    assert not errors, errors
    for r, (_, err) in zip(runners, results, strict=True):
        assert r.returncode == 0 and "Traceback" not in err, err[-2000:]
        assert "stopped: " in err.splitlines()[-1], err[-2000:]
    runs = {p.name: len(p.read_text().splitlines()) for p in out.iterdir()}
    expected = {_real_name(n)[1].replace("/", "_") for n in range(TASKS)}
    assert set(runs) == expected, sorted(expected - set(runs))[:5]
    assert set(runs.values()) == {1}, {k: v for k, v in runs.items() if v != 1}
    assert _fingerprint(sentinel) == before, "something outside the queue was changed"
    assert sorted(p.name for p in tmp.iterdir()) == ["out", "q", "sentinel"]
    # The junk was met: bad notices set aside, junk in the task folders rejected.
    assert list((q / "notices/rejected").glob("*.json.reason"))
    assert len(list((q / "rejected").rglob("*.reason"))) >= 10
    print(f"chaos: {TASKS} tasks on 2 runners with {len(plan)} plantings in {took:.1f} s")
