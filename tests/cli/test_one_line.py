"""Issue 15, finding 14: every bad request to the real ``metaq`` command is one line on
standard error and exit status 1, never a traceback, and nothing is written.

A row is (name, prepare, argv, words): ``prepare(tmp)`` sets the scene (a queue at
``tmp/q``, a script at ``tmp/a.sh``), ``argv`` is the command (``{q}`` and ``{tmp}`` filled
in), and ``words`` must be in the one line. Add a case in one row.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from metaq_py.queue.lease import lease_path
from metaq_py.queue.store import Queue
from tests.cli.test_queue import metaq, script, tree


def _queue(tmp: Path) -> None:
    Queue.init(tmp / "q")
    script(tmp / "a.sh", "#METAQ MIN_WC_TIME 1m\n")


def _long_script(tmp: Path) -> None:
    _queue(tmp)
    script(tmp / ("c" * 240 + ".sh"), "#METAQ MIN_WC_TIME 1m\n")


def _a_file(tmp: Path) -> None:
    (tmp / "file").write_text("not a folder\n")


def _plain_folder(tmp: Path) -> None:
    (tmp / "q").mkdir()
    (tmp / "q/notes.txt").write_text("someone's folder, not a queue\n")


def _past_end(tmp: Path) -> None:
    """A fake ``squeue`` that says this job ended in 2020."""
    _queue(tmp)
    bin_ = tmp / "bin"
    bin_.mkdir()
    fake = bin_ / "squeue"
    fake.write_text("#!/bin/bash\ncase \"$*\" in *%e*) echo 2020-01-01T00:00:00;; "
                    "*%L*) echo 0:00;; *) echo RUNNING;; esac\n")
    fake.chmod(0o755)


def _lease_is_a_folder(tmp: Path) -> None:
    """A lost claim whose lease is a folder someone made (judged stale after 2 s)."""
    _queue(tmp)
    q = Queue(tmp / "q")
    text = (q.root / "metaq.yaml").read_text()
    lines = [ln for ln in text.splitlines() if not ln.startswith(("heartbeat:", "stale_after:"))]
    (q.root / "metaq.yaml").write_text("\n".join([*lines, "heartbeat: 1s", "stale_after: 2s",
                                                  ""]))
    metaq("submit", str(tmp / "a.sh"), "-q", str(q.root))
    q = Queue(tmp / "q")
    claim = q.claim(q.scan().tasks[0], machine="gone", jobid="9")
    assert claim is not None
    lease = lease_path(claim.path)
    lease.unlink()
    lease.mkdir()
    (lease / "inside.txt").write_text("kept\n")
    old = time.time() - 3600
    os.utime(claim.path, (old, old))
    time.sleep(2.2)  # the claim's ctime (its heartbeat without a lease) is then stale


Prepare = Callable[[Path], None]

CASES: list[tuple[str, Prepare, list[str], str]] = [
    ("submit --folder of 300 characters", _queue,
     ["submit", "{tmp}/a.sh", "--folder", "f" * 300, "-q", "{q}"], "bytes long"),
    ("submit --folder with a trailing newline", _queue,
     ["submit", "{tmp}/a.sh", "--folder", "run7\n", "-q", "{q}"], "control character"),
    ("submit of a 243-character name", _long_script,
     ["submit", "{tmp}/" + "c" * 240 + ".sh", "-q", "{q}"], "243 bytes long"),
    ("notice --at +99999999999d", _queue,
     ["notice", "--nodes", "1", "--at", "+99999999999d", "--walltime", "1h", "-q", "{q}"],
     "too large"),
    ("notice --at 9999-12-31T23:59", _queue,
     ["notice", "--nodes", "1", "--at", "9999-12-31T23:59", "--walltime", "1h", "-q", "{q}"],
     "away"),
    ("report --since 99999999d", _queue, ["report", "--since", "99999999d", "-q", "{q}"],
     "--since"),
    ("init on an existing file", _a_file, ["init", "{tmp}/file"], "not a folder"),
    ("init under /proc", _a_file, ["init", "/proc/metaq-queue"], "/proc/metaq-queue"),
    ("run whose end has passed", _past_end, ["run", "-q", "{q}", "--batch", "slurm"],
     "ended at 2020-01-01"),
    ("run on a folder that is not a queue", _plain_folder,
     ["run", "-q", "{q}", "--nodes", "1", "--batch", "local"], "is not a queue"),
    ("submit into a folder that is not a queue", _plain_folder,
     ["submit", "{tmp}/q/notes.txt", "-q", "{q}"], "is not a queue"),
    ("run --end-signal KILL", _queue, ["run", "-q", "{q}", "--nodes", "1", "--end-signal",
                                       "KILL"], "--end-signal"),
]


@pytest.mark.parametrize(("name", "prepare", "argv", "words"), CASES,
                         ids=[c[0] for c in CASES])
def test_one_line_and_nothing_written(tmp_path: Path, name: str, prepare: Prepare,
                                      argv: list[str], words: str) -> None:
    prepare(tmp_path)
    before = tree(tmp_path)
    env = {"PATH": f"{tmp_path}/bin:{os.environ['PATH']}", "SLURM_JOB_ID": "5",
           "SLURM_JOB_NODELIST": "localhost"}
    done = metaq(*(a.format(q=tmp_path / "q", tmp=tmp_path) for a in argv), env=env)
    assert done.returncode == 1, done
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("metaq: "), done.stderr
    assert words in lines[0], lines[0]
    assert tree(tmp_path) == before


def test_reset_dead_sets_a_folder_lease_aside(tmp_path: Path) -> None:
    """A lease that is a folder neither crashes ``reset --dead`` nor loses what is in it:
    the task goes back, and the folder is set aside (for ``metaq doctor``), kept whole."""
    _lease_is_a_folder(tmp_path)
    q = tmp_path / "q"
    done = metaq("reset", "--dead", "-q", str(q), "--batch", "local")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done
    assert "todo/a.sh" in done.stdout and "back in todo/" in done.stdout
    assert (q / "todo/a.sh").is_file()
    aside = list((q / "working").rglob(".a.sh.lease.planted-*"))
    assert len(aside) == 1 and (aside[0] / "inside.txt").read_text() == "kept\n"


def test_a_claim_over_a_planted_lease_folder(tmp_path: Path) -> None:
    """A folder planted where a runner will write a lease is set aside; the task runs."""
    _queue(tmp_path)
    q = tmp_path / "q"
    metaq("submit", str(tmp_path / "a.sh"), "-q", str(q))
    planted = q / "working/here/77/.a.sh.lease"  # where the claim of a.sh puts its lease
    planted.mkdir(parents=True)
    (planted / "inside.txt").write_text("kept\n")
    old = time.time() - 60
    os.utime(q / "todo/a.sh", (old, old))
    done = metaq("run", "-q", str(q), "--nodes", "1", "--jobid", "77", "--machine", "here",
                 "--batch", "local")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert (q / "finished/todo/a.sh").is_file()
    aside = list((q / "working/here/77").glob(".a.sh.lease.planted-*"))
    assert len(aside) == 1 and (aside[0] / "inside.txt").read_text() == "kept\n"


def test_end_signal_is_taken_from_the_command_line(tmp_path: Path) -> None:
    """``metaq run --end-signal hup`` is read (any case, with or without ``SIG``), and the HUP
    then stops the runner, which requeues its task and logs why it stopped."""
    _queue(tmp_path)
    q = tmp_path / "q"
    started = tmp_path / "started"
    task = tmp_path / "t.sh"
    task.write_text(f"#!/bin/bash\n#METAQ MIN_WC_TIME 1m\ntouch {started}\nsleep 30\n")
    task.chmod(0o755)
    metaq("submit", str(task), "-q", str(q))
    old = time.time() - 60
    os.utime(q / "todo/t.sh", (old, old))
    proc = subprocess.Popen([sys.executable, "-m", "metaq_py", "run", "-q", str(q), "--nodes",
                             "1", "--grace", "1", "--end-signal", "sighup", "--jobid", "e1",
                             "--machine", "here", "--batch", "local"],
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "received SIGHUP" in err
    assert (q / "todo/t.sh").is_file()
    events = [json.loads(line) for line in
              (q / "jobs/e1/events.jsonl").read_text().splitlines()]
    stop = next(e for e in events if e.get("event") == "runner-stop")
    assert "SIGHUP" in stop["reason"]
