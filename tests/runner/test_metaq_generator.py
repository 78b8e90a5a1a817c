"""A METAQ campaign generator, unchanged, on metaq-py (issue 19, part 3): real ``metaq run``
processes, real task scripts, real files.

The generator is written the way lattice collaborations write theirs for METAQ: it writes
each task file in place and then ``chmod``s it, and before making a task it looks for it by
file name among the waiting, running and finished ones, running ones by METAQ's globs
``working/*/<name>`` (METAQ's older ``working/<jobid>/``) and ``working/*/*/<name>``
(``working/<machine>/<jobid>/``). Each task's cleanup runs the generator
again, so the campaign grows from inside running tasks, and the test runs it from outside
too while two runners (two job ids) work the queue. Every task runs exactly once."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from metaq_py.queue.logbook import find_logbook
from tests.runner_helpers import make_queue, runner

GENERATOR = '''\
"""A campaign generator in METAQ's style: ensembles of propagator steps, each step made
once the one before it has written its output, never made twice."""
import fcntl, glob, os, sys

queue, camp, ensembles, steps, sleep = sys.argv[1:6]
ensembles, steps = int(ensembles), int(steps)

TASK = """#!/bin/bash

#METAQ NODES 1
#METAQ MIN_WC_TIME 10:00
#METAQ PROJECT lattice
#SBATCH --comment ignored by METAQ and by metaq-py alike

{python} - <<'PY'
import glob, os
running = glob.glob("{queue}/working/*/{name}") + glob.glob("{queue}/working/*/*/{name}")
fd = os.open("{camp}/ledger", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
os.write(fd, ("{name} %d\\\\n" % len(running)).encode())
os.close(fd)
PY
sleep {sleep}
touch {camp}/out/{name}.done
# cleanup: the next step of the campaign
{python} {camp}/gen.py {queue} {camp} {ensembles} {steps} {sleep}
"""


def known(name):
    """Whether the task is waiting, running or finished: looked for in the order a task
    moves through the folders, so that a move in between is never missed."""
    for pattern in ("priority/**/" + name, "todo/**/" + name, "working/*/" + name,
                    "working/*/*/" + name, "finished/**/" + name):
        if glob.glob(os.path.join(queue, pattern), recursive=True):
            return True
    return False


def make(sub, name):
    path = os.path.join(queue, "todo", sub, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:  # in place, then made executable, as METAQ allows
        f.write(TASK.format(python=sys.executable, queue=queue, camp=camp, name=name,
                            ensembles=ensembles, steps=steps, sleep=sleep))
    os.chmod(path, 0o755)


# Two copies of a generator must not race each other (that race is the generator's own);
# the queue's side, tasks moving while the generator looks, is what is under test.
with open(os.path.join(camp, "gen.lock"), "a") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    for e in range(ensembles):
        for s in range(steps):
            name = "prop_e%d_s%d.sh" % (e, s)
            if os.path.exists(os.path.join(camp, "out", name + ".done")):
                continue
            if not known(name):
                make("gpu/ens%d" % e, name)
            break
'''

ENSEMBLES, STEPS = 5, 4


def _runner(q: Path, jobid: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "metaq_py", "run", "--queue", str(q), "--batch", "local",
         "--nodes", "2", "--jobid", jobid, "--machine", "here", "--walltime", "1h",
         "--launch-pause", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_metaq_campaign_generator_runs_every_task_exactly_once(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q").root
    camp = tmp_path / "camp"
    (camp / "out").mkdir(parents=True)
    (camp / "gen.py").write_text(GENERATOR)
    generate = [sys.executable, str(camp / "gen.py"), str(q), str(camp), str(ENSEMBLES),
                str(STEPS), "0.6"]
    subprocess.run(generate, check=True, timeout=60)
    assert len(list((q / "todo").rglob("*.sh"))) == ENSEMBLES  # the first step of each
    runners = [_runner(q, "A"), _runner(q, "B")]
    outside = 0
    seen_running = 0

    def generate_while_running() -> None:
        nonlocal outside, seen_running
        while any(r.poll() is None for r in runners):
            seen_running += len(list(q.glob("working/*/*/*.sh")))
            subprocess.run(generate, check=True, timeout=60)
            outside += 1
            time.sleep(0.05)

    thread = threading.Thread(target=generate_while_running)
    thread.start()
    try:
        for r in runners:
            _, err = r.communicate(timeout=300)
            assert r.returncode == 0, err
    finally:
        for r in runners:
            if r.poll() is None:
                r.kill()
        thread.join(60)
    assert outside >= 5 and seen_running > 0  # the outside generator ran while tasks ran
    lines = [line.split() for line in (camp / "ledger").read_text().splitlines()]
    ran = Counter(name for name, _ in lines)
    wanted = {f"prop_e{e}_s{s}.sh" for e in range(ENSEMBLES) for s in range(STEPS)}
    assert set(ran) == wanted and set(ran.values()) == {1}, ran  # each exactly once
    # Each task, while it ran, was found by METAQ's globs for running tasks: once.
    assert {found for _, found in lines} == {"1"}, lines
    finished = sorted(p.relative_to(q).as_posix() for p in (q / "finished").rglob("*.sh"))
    assert finished == sorted(f"finished/todo/gpu/ens{n[6]}/{n}" for n in wanted)
    assert not list((q / "todo").rglob("*.sh")) and not list((q / "working").rglob("*.sh"))
    assert not [p for s in ("failed", "rejected") for p in (q / s).rglob("*") if p.is_file()]
    starts = {job: (q / "jobs" / job / "events.jsonl").read_text().count('"event":"start"')
              for job in ("A", "B")}
    assert sum(starts.values()) == len(wanted) and min(starts.values()) > 0, starts


CLASH = """\
ledger={ledger}
printf '%s %s\\n' "$METAQ_TASK" "$METAQ_SCRIPT" >> "$ledger"
while [ "$(grep -c . "$ledger")" -lt 4 ] && [ $SECONDS -lt 20 ]; do sleep 0.05; done
{tail}
"""


def test_tasks_of_one_name_in_different_folders_run_once_each(tmp_path: Path) -> None:
    """Six ``run.sh`` in six sub-folders, four at a time in one job: the job's clashing names
    take numbered slots, each task runs once (one that fails is retried once), and each
    finish, failure and requeue goes back to its own folder."""
    from tests.runner_helpers import task

    q = make_queue(tmp_path / "q")
    ledger = tmp_path / "ledger"
    flaky = tmp_path / "flaky-ran-once"
    tails = {"a": "true", "b": "true", "c": f"[ -e {flaky} ] || {{ touch {flaky}; exit 1; }}",
             "d": "exit 2", "e": "true", "f": "true"}
    for sub, tail in tails.items():
        task(q, f"{sub}/run.sh", CLASH.format(ledger=ledger, tail=tail),
             RETRIES=1 if sub == "c" else 0)
    r = runner(q, nodes=4)
    r.run()
    lines = [line.split() for line in ledger.read_text().splitlines()]
    ran = Counter(ident for ident, _ in lines)
    assert ran == {f"todo/{s}/run.sh": 2 if s == "c" else 1 for s in tails}
    working = q.root / "working" / r.machine / r.jobid
    places = {os.path.relpath(path, working) for _, path in lines}
    assert all(os.path.basename(p) == "run.sh" for p in places)
    assert {"run.sh", "2/run.sh", "3/run.sh", "4/run.sh"} <= places  # four at once
    states = ("todo", "hold", "working", "finished", "failed", "rejected", "cancelled")
    assert sorted(p.relative_to(q.root).as_posix() for s in states
                  for p in (q.root / s).rglob("run.sh")) == [
        "failed/todo/d/run.sh", *(f"finished/todo/{s}/run.sh" for s in "abcef")]
    c = q.root / "finished/todo/c/run.sh"
    assert not (q.root / "finished/todo/c/.run.sh.record").exists()  # packed: one inode
    record = find_logbook(c, c.stat().st_ino, q.packed)
    assert record is not None
    assert [h["event"] for h in record.history] == ["failed", "finished"]
    assert record.attempts == 1  # the retry went back to todo/c/ and ran from there
