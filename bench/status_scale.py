"""How long ``metaq status`` and ``metaq ls finished`` take on a queue with a long history.

Builds a queue where N tasks have finished (default 100,000, in campaign folders of 1,000)
and J past batch jobs (default 1,000) left their event logs, then times the real commands
as subprocesses:

- ``metaq status`` (the first call, and the best of the next three);
- ``metaq status --json``;
- the first screen (50 lines) of ``metaq ls finished``, and the whole listing;
- one refresh of ``metaq status --watch`` (the same screen, built in this process).

The queue is made as a runner leaves it: one real ``metaq run`` (local batch system) on a
template of 100 tasks, whose finished task files, logbooks (lines of the jobs' packs) and
event log are then replicated on disk with their names changed, each logbook naming its own
file's path and inode as the queue's packs do. The tasks' summary
(``metaq_py/queue/tally.py``) is noted for each one through the same function the queue's
moves call.

Targets: at most 0.5 s for ``status`` and each refresh, and for the first screen of ``ls``.

    python bench/status_scale.py [--tasks N] [--jobs J] [--dir SCRATCH]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TARGET = 0.5
SCREEN = 50
PER_JOB = 100
METAQ = [sys.executable, "-m", "metaq_py"]


def template(scratch: Path) -> Path:
    """A queue after one real ``metaq run`` of PER_JOB short tasks."""
    root = scratch / "template"
    subprocess.run([*METAQ, "init", str(root)], check=True, stdout=subprocess.DEVNULL)
    for i in range(PER_JOB):
        path = root / "todo" / f"t{i:03d}.sh"
        path.write_text(f"#!/bin/sh\n#METAQ NODES 1\n#METAQ MIN_WC_TIME 10:00\n"
                        f"#METAQ PROJECT p{i % 4}\nexit 0\n")
        path.chmod(0o755)
    subprocess.run([*METAQ, "run", "-q", str(root), "--batch", "local", "--nodes", "8",
                    "--launch-pause", "0", "--jobid", "tmpl", "--machine", "bench"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    done = sorted((root / "finished" / "todo").glob("t*.sh"))
    if len(done) != PER_JOB:
        sys.exit(f"the template run finished {len(done)} of {PER_JOB} tasks")
    return root


def build(root: Path, tasks: int, jobs: int, scratch: Path) -> None:
    """The big queue, replicated from the template run (see the module's docstring)."""
    from metaq_py.queue import tally

    tmpl = template(scratch)
    shutil.copytree(tmpl, root, ignore=shutil.ignore_patterns("finished", "jobs", "summary"))
    (root / "jobs").mkdir(exist_ok=True)
    events = (tmpl / "jobs" / "tmpl" / "events.jsonl").read_text()
    # A done task's logbook is a line of its job's pack (metaq_py/queue/logbook.py).
    pack = (tmpl / "jobs" / "tmpl" / "logbooks.jsonl").read_text().splitlines()
    books = {Path(line["task"]).name: line for line in map(json.loads, pack)}
    packs: list[list[str]] = [[] for _ in range(max(1, jobs))]
    body = {name: (tmpl / "finished" / "todo" / name).read_bytes() for name in books}
    names = sorted(books)
    per_campaign = 1000
    for n in range(tasks):
        name = names[n % PER_JOB]
        campaign = f"c{n // per_campaign:03d}"
        folder = root / "finished" / "todo" / campaign
        if n % per_campaign == 0:
            folder.mkdir(parents=True)
        path = folder / f"{n:06d}-{name}"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o755)
        os.write(fd, body[name])
        ino = os.fstat(fd).st_ino
        os.close(fd)
        book = dict(books[name], inode=ino, task=str(path.relative_to(root)))
        j = n * len(packs) // tasks
        packs[j].append(json.dumps(book))
        tally.note(root, None, path, project=f"p{names.index(name) % 4}")
        if (n + 1) * len(packs) // tasks != j or n + 1 == tasks:
            # Its job's pack is written as its last task finishes, as a runner's is.
            (root / "jobs" / f"{1000000 + j}").mkdir()
            (root / "jobs" / f"{1000000 + j}" / "logbooks.jsonl").write_text(
                "".join(f"{line}\n" for line in packs[j]))
            packs[j] = []
    for j in range(jobs):
        jobid = f"{1000000 + j}"
        folder = root / "jobs" / jobid
        folder.mkdir(exist_ok=True)
        (folder / "events.jsonl").write_text(events.replace("tmpl", jobid))
    tally.close_writers()


def timed_run(args: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def first_screen(root: Path) -> tuple[float, float]:
    """Seconds to the first SCREEN lines of ``metaq ls finished``, and to its end."""
    env = {**os.environ, "COLUMNS": "120"}
    t0 = time.perf_counter()
    proc = subprocess.Popen([*METAQ, "ls", "finished", "-q", str(root)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    screen = None
    for lines, _ in enumerate(proc.stdout, start=1):
        if lines == SCREEN:
            screen = time.perf_counter() - t0
    proc.wait()
    whole = time.perf_counter() - t0
    return (screen if screen is not None else whole), whole


def refresh_seconds(root: Path) -> float | None:
    """The best of three refreshes of ``metaq status --watch``, built in this process."""
    try:
        from metaq_py.cli.status_commands import watch_screen
    except ImportError:
        return None
    from metaq_py.queue.store import Queue

    q = Queue(root)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        watch_screen(q, now=time.time())
        best = min(best, time.perf_counter() - t0)
    return best


def verdict(seconds: float) -> str:
    return "met" if seconds <= TARGET else "NOT met"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=100_000)
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--dir", type=Path, help="build (or reuse) the queue here")
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="metaq-bench-status-"))
    root = args.dir or scratch / "queue"
    try:
        if not (root / "finished").is_dir():
            t0 = time.perf_counter()
            build(root, args.tasks, args.jobs, scratch)
            print(f"built {args.tasks} finished tasks and {args.jobs} job event logs in "
                  f"{time.perf_counter() - t0:.1f} s")
        status = [*METAQ, "status", "-q", str(root)]
        first = timed_run(status)
        warm = min(timed_run(status) for _ in range(3))
        as_json = min(timed_run([*status, "--json"]) for _ in range(2))
        empty = scratch / "empty"
        subprocess.run([*METAQ, "init", str(empty)], check=True, stdout=subprocess.DEVNULL)
        baseline = min(timed_run([*METAQ, "status", "-q", str(empty)]) for _ in range(3))
        screen, whole = first_screen(root)
        refresh = refresh_seconds(root)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"queue: {args.tasks} finished tasks, {args.jobs} past jobs ({root})")
    print(f"  metaq status on an empty queue (start-up):  {baseline:6.2f} s")
    print(f"  metaq status, first call:                   {first:6.2f} s")
    print(f"  metaq status, best of 3:                    {warm:6.2f} s  "
          f"(target <= {TARGET} s) {verdict(warm)}")
    print(f"  metaq status --json, best of 2:             {as_json:6.2f} s")
    print(f"  metaq ls finished, first {SCREEN} lines:          {screen:6.2f} s  "
          f"(target <= {TARGET} s) {verdict(screen)}")
    print(f"  metaq ls finished, whole listing:           {whole:6.2f} s")
    if refresh is None:
        print("  metaq status --watch: not available")
    else:
        print(f"  one --watch refresh, best of 3:             {refresh:6.2f} s  "
              f"(target <= {TARGET} s) {verdict(refresh)}")


if __name__ == "__main__":
    main()
