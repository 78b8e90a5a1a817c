"""How fast the simulator replays the full Theta 2022 trace.

Prints, for EASY on the plain trace (23,911 jobs, 4,360 nodes), the wall and CPU time, jobs per
second and the ratio against CQSim's 12.3 s on a 2-core machine (target, with oracle runtimes
as CQSim runs it: at most 0.5 s); then the same for every scheduler on a hybrid W5 workload of
the full trace (target for each on-demand mechanism: at most 2 s; the baselines have none),
and whether the targets are met. Then the reading and whole-command figures (issue 14): the
first read of the gzipped trace in lines per second (cache off; target at least 300,000), a
repeat read through the cache of parsed traces (target at least 5 million lines/s), and the
whole ``metaq simulate --trace ... --no-plots`` process against the in-process simulation
(target: at most 2 times it, and at most 0.7 s). It says which build of the policy core ran
(``metaq_py.build()``): the figures are for the compiled one that ``pip install .`` builds.
Each figure is the best of ``--repeat`` runs (default 3), since the machine is shared.
With ``--profile``, it also prints where the EASY run spends its time, grouped by layer
(engine, cluster bookkeeping, policy), from cProfile.

Run: ``python bench/sim_theta.py [--trace path] [--repeat N] [--profile]``
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import metaq_py
from metaq_py import build
from metaq_py.policy import MECHANISMS
from sim.engine.core import simulate
from sim.trace.cache import RawTrace, cached_read
from sim.trace.formats.swf import read_swf
from sim.trace.loader import load_trace
from sim.workload.model import WorkloadModel, hybrid_workload

TRACE = Path(__file__).resolve().parents[2] / "shared" / "traces" / "theta_2022.swf.gz"
CQSIM_SECONDS = 12.3
EASY_TARGET = 0.5
MECHANISM_TARGET = 2.0
FIRST_READ_TARGET = 300_000
REPEAT_READ_TARGET = 5_000_000
WHOLE_RATIO_TARGET = 2.0
WHOLE_SECONDS_TARGET = 0.7
PACKAGE_ROOT = Path(metaq_py.__file__).resolve().parents[1]
"""Where the ``metaq_py`` this bench runs was imported from (the source tree, or a compiled
install's site-packages); the whole command runs the same one."""


def best_of(repeat: int, run) -> tuple[float, float, object]:
    """(best wall seconds, CPU seconds of that run, its result)."""
    best = None
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        result = run()
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        if best is None or wall < best[0]:
            best = (wall, cpu, result)
    assert best is not None
    return best


def layer_profile(trace) -> None:
    """cProfile's own time, summed by the file it was spent in."""
    if build() != "pure Python":
        print("\nnote: cProfile does not see inside compiled modules; for the layers, profile "
              "an editable install (pure Python)")
    prof = cProfile.Profile()
    prof.runcall(simulate, trace, policy="easy", oracle=True)
    stats = pstats.Stats(prof)
    by_file: dict[str, float] = {}
    total = 0.0
    for (filename, _, _), (_, _, tottime, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        key = filename.split("/work/main/")[-1] if "/work/main/" in filename else "builtins etc."
        by_file[key] = by_file.get(key, 0.0) + tottime
        total += tottime
    print(f"\nprofile of easy (oracle) by file, {total:.2f} s under cProfile:")
    for key, t in sorted(by_file.items(), key=lambda kv: -kv[1])[:12]:
        print(f"  {t / total:6.1%}  {t:6.2f} s  {key}")
    print("\nhottest functions (own time):")
    stats.sort_stats("tottime").print_stats(12)


def reading_and_whole(path: Path, repeat: int) -> list[str]:
    """Print the read rates and the whole command against the in-process simulation; return
    the verdicts."""
    with path.open("rb") as raw:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: raw.read(1 << 20), b""))
    if path.suffix == ".gz":
        import gzip
        with gzip.open(path, "rb") as unzipped:
            lines = sum(chunk.count(b"\n") for chunk in iter(lambda: unzipped.read(1 << 20),
                                                               b""))
    first, _, _ = best_of(repeat, lambda: read_swf(path))
    verdicts = []
    with tempfile.TemporaryDirectory() as cache:
        os.environ["METAQ_CACHE_DIR"] = cache
        cached_read(path, "swf", lambda: RawTrace(*read_swf(path)))
        again, _, _ = best_of(max(repeat, 5), lambda: cached_read(
            path, "swf", lambda: RawTrace(*read_swf(path))))
        trace = load_trace(path)
        inside, _, _ = best_of(repeat, lambda: simulate(trace, policy="easy"))
        command = [sys.executable, "-c", "from metaq_py.cli import main; main()", "simulate",
                   "--trace", str(path.resolve()), "--no-plots", "--out", "run"]
        # the command runs the package this bench imported (compiled or not), from a folder
        # that does not hold another copy of it
        env = {**os.environ, "PYTHONPATH": str(PACKAGE_ROOT)}
        subprocess.run(command, cwd=cache, env=env, check=True, capture_output=True)  # fills
        whole, _, _ = best_of(repeat, lambda: subprocess.run(
            command, cwd=cache, env=env, check=True, capture_output=True))
        del os.environ["METAQ_CACHE_DIR"]
    print(f"\nreading {path.name} ({lines:,} lines; package {PACKAGE_ROOT}, {build()}):")
    print(f"  first read (gzip + parse):      {first:7.3f} s  {lines / first:12,.0f} lines/s")
    print(f"  repeat read (cache):            {again:7.4f} s  {lines / again:12,.0f} lines/s")
    print(f"  simulation in process (easy):   {inside:7.3f} s")
    print(f"  whole metaq simulate --no-plots: {whole:6.3f} s  ({whole / inside:.2f}x the "
          "simulation)")
    verdicts.append(f"first read {lines / first:,.0f} lines/s against {FIRST_READ_TARGET:,}: "
                    f"{'met' if lines / first >= FIRST_READ_TARGET else 'NOT met'}")
    verdicts.append(f"repeat read {lines / again:,.0f} lines/s against "
                    f"{REPEAT_READ_TARGET:,}: "
                    f"{'met' if lines / again >= REPEAT_READ_TARGET else 'NOT met'}")
    verdicts.append(f"whole command {whole:.2f} s, {whole / inside:.2f}x the simulation, "
                    f"against {WHOLE_RATIO_TARGET:g}x and {WHOLE_SECONDS_TARGET} s: "
                    f"{'met' if whole <= WHOLE_RATIO_TARGET * inside else 'NOT met'} / "
                    f"{'met' if whole <= WHOLE_SECONDS_TARGET else 'NOT met'}")
    return verdicts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=TRACE)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--only-reading", action="store_true",
                        help="print only the reading and whole-command figures")
    args = parser.parse_args()
    if not args.trace.is_file():
        raise SystemExit(f"no trace at {args.trace}; pass --trace")

    if args.only_reading:
        for verdict in reading_and_whole(args.trace, args.repeat):
            print(verdict)
        return
    t0 = time.perf_counter()
    trace = load_trace(args.trace)
    print(f"loaded {len(trace):,} jobs in {time.perf_counter() - t0:.2f} s; "
          f"policy core: {build()}")

    print(f"\n{'run':<28}{'wall s':>8}{'cpu s':>8}{'jobs/s':>10}{'items/s':>10}"
          f"{'decide s':>10}{'target':>8}{'vs CQSim':>10}")
    def row(label: str, wall: float, cpu: float, result, target: float | None) -> None:
        print(f"{label:<28}{wall:8.2f}{cpu:8.2f}{len(trace) / wall:10,.0f}"
              f"{result.agenda_items / wall:10,.0f}{result.decision_seconds.sum():10.2f}"
              f"{'-' if target is None else f'{target:.1f}':>8}{CQSIM_SECONDS / wall:9.1f}x")

    verdicts = []
    for label, oracle in (("easy (oracle)", True), ("easy (walltimes)", False)):
        wall, cpu, result = best_of(args.repeat, lambda o=oracle: simulate(
            trace, policy="easy", oracle=o))
        # the target is CQSim's setting: EASY with oracle runtimes
        row(label, wall, cpu, result, EASY_TARGET if oracle else None)
        if oracle:
            verdicts.append(f"easy (oracle) {wall:.2f} s against {EASY_TARGET} s: "
                            f"{'met' if wall <= EASY_TARGET else 'NOT met'}")

    work = hybrid_workload(trace, WorkloadModel.for_workload("W5", seed=0))
    slowest = 0.0
    for name in MECHANISMS:
        wall, cpu, result = best_of(args.repeat, lambda n=name: simulate(work, policy=n))
        ondemand = "&" in name  # the target is for the on-demand mechanisms, not the baselines
        row(name + " on W5", wall, cpu, result, MECHANISM_TARGET if ondemand else None)
        if ondemand:
            slowest = max(slowest, wall)
    verdicts.append(f"slowest on-demand mechanism {slowest:.2f} s against {MECHANISM_TARGET} "
                    f"s: {'met' if slowest <= MECHANISM_TARGET else 'NOT met'}")
    verdicts += reading_and_whole(args.trace, args.repeat)
    print()
    for verdict in verdicts:
        print(verdict)
    if args.profile:
        layer_profile(trace)


if __name__ == "__main__":
    main()
