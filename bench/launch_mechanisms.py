"""What each launch-latency mechanism of ``metaq run`` saves, on no-op, 1-second and 10-second
tasks, and the no-op launch rate beside GNU parallel's and HyperQueue's, from the same run.

Issue 36, part 3: a mechanism that saves under 10% on 1-second tasks does not earn its code.
The mechanisms, each turned off by a local patch in the measured process (never in the
source), where the measured tree still has it:

- ``follow-ons``: the next short task handed to the launch agent before its hosts are free
  (``runner/tasks/follow_ons.py``, the agent's ``follow``/``withdraw``);
- ``made-ahead files``: run folders, logs and logbook files made ahead of need by a helper
  thread (``queue/premade.py``, the first kind of "spares");
- ``lease spares``: a job's retired lease files rewritten for its next claims
  (``queue/lease.py``'s ``LeaseFiles``, the second kind);
- ``launch agent``: starts handed to a process of the runner's own instead of made on the
  loop's thread (it replaced the starter threads; with it off, follow-ons are off too).

Each configuration is one ``metaq run --batch local --nodes J --launch-pause 0`` of N tasks (a
fresh interpreter, the measured tree first on its path), timed from its ``runner-start`` event
to its ``runner-stop`` event (the interpreter's start-up is left out, for every configuration
alike). The configurations take turns, R rounds, and medians are printed. A mechanism's saving
is ``(without - with) / without`` of the run's time. ``--before REV`` also runs a commit of this
repository as it was (unpacked with ``git archive``), for before/after figures in one run.

GNU parallel runs ``parallel -j J true ::: 1..N`` (Debian's ``parallel``). HyperQueue runs N
``true`` programs, no output files, in one job on a ``LocalCluster`` with one worker of J cores
(``pip install hyperqueue``: its Python package carries the server and the worker), timed from
the submit to the end of the job, the cluster already up. Each is skipped, and said so, where
it is not installed.

    python bench/launch_mechanisms.py [--noop N] [--one N] [--ten N] [--jobs J] [--repeat R]
                                      [--before REV] [--tree PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent

THRESHOLD = 0.10
"""The least a mechanism must save on 1-second tasks to earn its code (issue 36)."""

# The measured process: the tree first on the path, the patches applied, then `metaq run`.
_DRIVER = r"""
import sys
tree, off, argv = sys.argv[1], [p for p in sys.argv[2].split(",") if p], sys.argv[3:]
sys.path.insert(0, tree)

def no_follow_ons():
    from metaq_py.runner.tasks.follow_ons import FollowOns
    FollowOns.make = lambda self, *a, **k: None

def no_made_ahead():
    from metaq_py.queue.premade import Spares
    init = Spares.__init__
    def without(self, home, *, depth=8, **kw):
        init(self, home, depth=0, **kw)
    Spares.__init__ = without

def no_lease_spares():
    from metaq_py.queue.lease import LeaseFiles
    LeaseFiles.LIMIT = 0

def no_agent():
    from metaq_py.launch.agent_link import AgentLink
    AgentLink.open = classmethod(lambda cls, **kw: None)

patches = {"follow-ons": no_follow_ons, "made-ahead files": no_made_ahead,
           "lease spares": no_lease_spares, "launch agent": no_agent}
for name in off:
    patches[name]()
sys.argv = ["metaq", *argv]
from metaq_py.cli import main
main()
"""

_PROBE = r"""
import importlib, sys
sys.path.insert(0, sys.argv[1])
found = []
for name, module, attr in [("follow-ons", "metaq_py.runner.tasks.follow_ons", "FollowOns"),
                           ("made-ahead files", "metaq_py.queue.premade", "Spares"),
                           ("lease spares", "metaq_py.queue.lease", "LeaseFiles"),
                           ("launch agent", "metaq_py.launch.agent_link", "AgentLink")]:
    try:
        if hasattr(importlib.import_module(module), attr):
            found.append(name)
    except ImportError:
        pass
print(",".join(found))
"""

MECHANISMS = ("follow-ons", "made-ahead files", "lease spares", "launch agent")

_HQ = r"""
import sys, tempfile, time
from hyperqueue import Job
from hyperqueue.cluster import LocalCluster, WorkerConfig
n, cores = int(sys.argv[1]), int(sys.argv[2])
with LocalCluster(server_dir=tempfile.mkdtemp(prefix="metaq-bench-hq-"),
                  worker_config=WorkerConfig(cores=cores)) as cluster:
    client = cluster.client()
    job = Job()
    for _ in range(n):
        job.program(["true"], stdout=None, stderr=None)
    t0 = time.perf_counter()
    client.wait_for_jobs([client.submit(job)])
    print("SECONDS", time.perf_counter() - t0)
"""


@dataclass(frozen=True, slots=True)
class Kind:
    """A kind of task: its label, its script's body and how many are run."""

    label: str
    body: str
    tasks: int
    seconds: float


@dataclass(frozen=True, slots=True)
class Config:
    """One way to run: a tree, and the mechanisms turned off in it."""

    label: str
    tree: Path
    off: tuple[str, ...]


def unpack(rev: str, into: Path) -> Path:
    """The source of commit ``rev`` of this repository, unpacked into ``into``."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(HERE), "archive", rev], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def present(tree: Path) -> tuple[str, ...]:
    """The mechanisms ``tree`` still has."""
    out = subprocess.run([sys.executable, "-c", _PROBE, str(tree)], check=True,
                         capture_output=True, text=True, env=_env(tree)).stdout.strip()
    return tuple(n for n in out.split(",") if n)


def _env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree)}


def run_once(config: Config, kind: Kind, jobs: int, scratch: Path) -> float:
    """Seconds from the ``runner-start`` to the ``runner-stop`` event of one run."""
    q = Path(tempfile.mkdtemp(prefix="q-", dir=scratch))
    shutil.rmtree(q)
    subprocess.run([sys.executable, "-m", "metaq_py", "init", str(q)], check=True,
                   capture_output=True, env=_env(config.tree), cwd=scratch)
    (q / "metaq.yaml").write_text("defaults:\n  min_wc_time: 1m\n")
    for i in range(kind.tasks):
        path = q / "todo" / f"t{i:05d}.sh"
        path.write_text(f"#!/bin/sh\n{kind.body}\n")
        path.chmod(0o755)
    argv = ["run", "-q", str(q), "--batch", "local", "--nodes", str(jobs), "--jobid", "B",
            "--launch-pause", "0", "--walltime", "2h"]
    ran = subprocess.run([sys.executable, "-c", _DRIVER, str(config.tree), ",".join(config.off),
                          *argv], capture_output=True, text=True, env=_env(config.tree),
                         cwd=scratch)
    done = sum(1 for p in (q / "finished" / "todo").iterdir() if p.name[0] != ".") \
        if (q / "finished" / "todo").is_dir() else 0
    if ran.returncode != 0 or done != kind.tasks:
        raise SystemExit(f"{config.label}, {kind.label}: {done} of {kind.tasks} finished\n"
                         f"{ran.stderr[-1500:]}")
    times = {}
    with open(q / "jobs" / "B" / "events.jsonl") as f:
        for line in f:
            event = json.loads(line)
            times.setdefault(event["event"], event["time"])
            if event["event"] == "runner-stop":
                times["runner-stop"] = event["time"]
    shutil.rmtree(q, ignore_errors=True)
    return times["runner-stop"] - times["runner-start"]


def parallel_seconds(tasks: int, jobs: int) -> float | None:
    if shutil.which("parallel") is None:
        return None
    t0 = time.perf_counter()
    subprocess.run(["parallel", "-j", str(jobs), "true", ":::", *map(str, range(tasks))],
                   check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def hyperqueue_seconds(tasks: int, jobs: int) -> float | None:
    try:
        import hyperqueue  # noqa: F401
    except ImportError:
        return None
    ran = subprocess.run([sys.executable, "-c", _HQ, str(tasks), str(jobs)], capture_output=True,
                         text=True, check=True)
    line = next(x for x in ran.stdout.splitlines() if x.startswith("SECONDS"))
    return float(line.split()[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--noop", type=int, default=2000, help="no-op tasks per run")
    ap.add_argument("--one", type=int, default=24, help="1-second tasks per run")
    ap.add_argument("--ten", type=int, default=8, help="10-second tasks per run")
    ap.add_argument("--jobs", type=int, default=4, help="tasks at a time (pretend nodes)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--before", help="a commit to run as it was, beside this tree")
    ap.add_argument("--tree", type=Path, default=HERE, help="the tree to measure")
    args = ap.parse_args()
    kinds = [k for k in (Kind("no-op", "exit 0", args.noop, 0.0),
                         Kind("1 s", "sleep 1", args.one, 1.0),
                         Kind("10 s", "sleep 10", args.ten, 10.0)) if k.tasks > 0]
    scratch = Path(tempfile.mkdtemp(prefix="metaq-bench-mech-"))
    try:
        tree = args.tree.resolve()
        has = present(tree)
        configs = [Config("as it is", tree, ())]
        configs += [Config(f"without {m}", tree, (m,)) for m in has]
        if len(has) > 1:
            configs.append(Config("without any of them", tree, has))
        if args.before:
            old = unpack(args.before, scratch / "before")
            configs.insert(0, Config(f"{args.before} as it was", old, ()))
        times: dict[tuple[str, str], list[float]] = {}
        theirs: dict[str, list[float]] = {"GNU parallel": [], "HyperQueue": []}
        for _ in range(args.repeat):
            for kind in kinds:
                for config in configs:
                    took = run_once(config, kind, args.jobs, scratch)
                    times.setdefault((config.label, kind.label), []).append(took)
                if kind.label == "no-op":
                    for name, f in (("GNU parallel", parallel_seconds),
                                    ("HyperQueue", hyperqueue_seconds)):
                        took = f(kind.tasks, args.jobs)
                        if took is not None:
                            theirs[name].append(took)
        report(configs, kinds, times, theirs, args, has)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def report(configs: list[Config], kinds: list[Kind], times: dict[tuple[str, str], list[float]],
           theirs: dict[str, list[float]], args: argparse.Namespace,
           has: tuple[str, ...]) -> None:
    med = {key: statistics.median(v) for key, v in times.items()}
    print(f"metaq run, {args.jobs} tasks at a time, --launch-pause 0 (medians of "
          f"{args.repeat} interleaved runs, runner-start to runner-stop)")
    print(f"  mechanisms in this tree: {', '.join(has) or 'none'}")
    head = "".join(f"{f'{k.label} ({k.tasks})':>24}" for k in kinds)
    print(f"  {'':34}{head}")
    base = "as it is"
    for config in configs:
        cells = []
        for k in kinds:
            t = med[(config.label, k.label)]
            cell = f"{k.tasks / t:7.1f}/s {t:6.2f} s" if k.label == "no-op" else f"{t:7.2f} s"
            cells.append(f"{cell:>24}")
        print(f"  {config.label:34}{''.join(cells)}")
    if any(c.label.startswith("without") for c in configs):
        print("  saving of each mechanism, (without - with) / without:")
    for config in configs:
        if not config.label.startswith("without"):
            continue
        cells = []
        for k in kinds:
            without, with_ = med[(config.label, k.label)], med[(base, k.label)]
            cells.append(f"{(without - with_) / without:+23.1%} ")
        verdict = ""
        one = next((k for k in kinds if k.label == "1 s"), None)
        if one is not None:
            without, with_ = med[(config.label, one.label)], med[(base, one.label)]
            earns = (without - with_) / without >= THRESHOLD
            verdict = f"  {'earns its code' if earns else 'under 10% on 1 s tasks'}"
        print(f"  {config.label.removeprefix('without '):34}{''.join(cells)}{verdict}")
    for k in kinds:
        if k.seconds:
            ideal = k.tasks / args.jobs * k.seconds
            print(f"  {k.label} tasks: ideal {ideal:.2f} s; the runs' overhead over it "
                  + ", ".join(f"{c.label} {(med[(c.label, k.label)] - ideal) / k.tasks * 1e3:.1f}"
                              for c in configs) + " ms a task")
    noop = next((k for k in kinds if k.label == "no-op"), None)
    if noop is None:
        return
    print(f"no-op launch rate, {noop.tasks} tasks, {args.jobs} at a time (medians):")
    for config in configs:
        t = med[(config.label, noop.label)]
        print(f"  metaq run, {config.label:32} {noop.tasks / t:8.1f} tasks/s")
    for name, runs in theirs.items():
        if not runs:
            print(f"  {name}: not installed, skipped")
            continue
        t = statistics.median(runs)
        print(f"  {name:43} {noop.tasks / t:8.1f} tasks/s  "
              f"(runs {', '.join(f'{x:.2f}' for x in runs)} s)")


if __name__ == "__main__":
    main()
