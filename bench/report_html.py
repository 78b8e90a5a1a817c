"""How big ``metaq report --html`` makes the page of a campaign of 10^5 tasks, and how long
Debian's headless Chromium takes to render it.

Builds a queue whose batch jobs' event logs hold N task runs (default 100,000) in the runner's
vocabulary (``tests/job_logs.py``): J allocations (default 25) of 64 hosts, each host running
its tasks back to back, tasks of 8 projects and 20 arrays, 2% of runs failed, 1% retried,
some preempted. Then runs the real command as a subprocess and opens its page in Chromium
through the DevTools protocol (``tests/browser.py``), from navigation to the first frame
painted after the load event.

Targets (issue 33): the page under 5 MB; rendered in under 3 s.

    python bench/report_html.py [--tasks N] [--jobs J] [--dir SCRATCH]
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.browser import chromium, open_page
from tests.job_logs import end, metaq, new_queue, runner_start, start, write_log

HOSTS = 64


def build(root: Path, tasks: int, jobs: int, seed: int = 1) -> None:
    """A queue at ``root`` whose event logs hold ``tasks`` runs over ``jobs`` allocations."""
    rng = random.Random(seed)
    new_queue(root)
    per_job = -(-tasks // jobs)
    t0 = 1_700_000_000.0
    made = 0
    for j in range(jobs):
        hosts = [f"nid{j:02d}{h:03d}" for h in range(HOSTS)]
        begin = t0 + j * 3 * 3600
        events = [runner_start(begin, hosts, end=begin + 12 * 3600, jobid=str(1000 + j),
                               mechanism="easy")]
        clock = dict.fromkeys(hosts, begin + rng.uniform(1, 30))
        runs = []
        for _ in range(min(per_job, tasks - made)):
            host = min(clock, key=clock.__getitem__)
            array = rng.randrange(20)
            task = f"todo/sweep{array:02d}.sh/{made}"
            project = f"proj{array % 8}"
            seconds = rng.uniform(20, 600)
            s = clock[host]
            roll = rng.random()
            outcome = ("failed" if roll < 0.02 else "retry" if roll < 0.03
                       else "preempted" if roll < 0.035 else "finished")
            runs.append((s, start(s, task, [host], project=project)))
            e = end(s + seconds, task, [host], outcome=outcome, seconds=seconds,
                    project=project)
            if outcome != "finished":
                e["exit_code"] = None if outcome == "preempted" else rng.choice([1, 2, 139])
            runs.append((s + seconds, e))
            clock[host] = s + seconds + rng.uniform(0.5, 5)
            made += 1
        runs.sort(key=lambda r: r[0])
        events += [e for _, e in runs]
        events.append({"time": max(clock.values()) + 1, "event": "runner-stop",
                       "reason": "nothing left to run"})
        write_log(root, str(1000 + j), events)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--jobs", type=int, default=25)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    scratch = Path(args.dir or tempfile.mkdtemp(prefix="metaq-report-html-"))
    queue = scratch / "queue"
    if queue.exists():
        shutil.rmtree(queue)
    t = time.perf_counter()
    build(queue, args.tasks, args.jobs)
    print(f"queue: {args.tasks:,} task runs in {args.jobs} batch jobs of {HOSTS} hosts "
          f"({time.perf_counter() - t:.1f} s to build) in {queue}")
    page = scratch / "report.html"
    t = time.perf_counter()
    done = metaq("report", "--html", str(page), "-q", str(queue))
    if done.returncode != 0:
        sys.exit(f"metaq report --html failed: {done.stderr.strip()}")
    written = time.perf_counter() - t
    size = page.stat().st_size
    print(f"metaq report --html: {written:.2f} s; {done.stdout.strip()}")
    print(f"HTML size: {size / 1e6:.2f} MB (target < 5 MB) {'OK' if size < 5e6 else 'OVER'}")
    if chromium() is None:
        sys.exit("chromium is not installed (apt-get install chromium): no render figure")
    renders = []
    for _ in range(3):
        opened = open_page(page)
        renders.append(opened.render_seconds)
        problems = opened.errors + opened.outside_requests
        opened.close()
        if problems:
            sys.exit(f"the page logged errors or made requests: {problems}")
    best = min(renders)
    print(f"render in headless chromium (navigate to first frame after load), best of 3: "
          f"{best:.2f} s (runs: {', '.join(f'{r:.2f}' for r in renders)}; target < 3 s) "
          f"{'OK' if best < 3 else 'OVER'}")


if __name__ == "__main__":
    main()
