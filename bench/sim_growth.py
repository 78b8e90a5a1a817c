"""Does the simulator's cost per job stay flat as traces grow?

Simulates synthetic Theta-like traces of 10k, 100k and 1M jobs at the same offered load (0.76
of 4,360 nodes) with EASY, each in a fresh process so that its peak memory (max RSS) is its
own. Prints wall and CPU seconds, microseconds per job, agenda items per second and peak memory.
Targets for 1M jobs: at most 30 s and at most 1 GB.

Run: ``python bench/sim_growth.py [--sizes 10000,100000,1000000] [--policy easy]``
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

TARGET_SECONDS = 30.0
TARGET_BYTES = 1 << 30


def one(jobs: int, policy: str) -> dict[str, float]:
    """Generate and simulate one trace in this process; returns the figures."""
    from sim.engine.core import simulate
    from sim.trace.synthetic import synthetic_trace

    t0 = time.perf_counter()
    trace = synthetic_trace(jobs=jobs, seed=0)
    generate = time.perf_counter() - t0
    w0, c0 = time.perf_counter(), time.process_time()
    result = simulate(trace, policy=policy)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    s0 = time.perf_counter()
    summary = result.summary()
    summarise = time.perf_counter() - s0
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"jobs": jobs, "generate": generate, "wall": wall, "cpu": cpu,
            "agenda_items": result.agenda_items, "summarise": summarise,
            "peak_bytes": peak_kib * 1024,
            "finished": summary.finished,
            "mean_wait_h": (summary.wait.all.mean or 0.0) / 3600,
            "mean_queue": float(result.series.queued.mean())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--policy", default="easy")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.policy)))
        return
    from metaq_py import build

    print(f"policy core: {build()}")
    print(f"{'jobs':>10}{'wall s':>9}{'cpu s':>9}{'us/job':>9}{'items/s':>11}{'peak MB':>9}"
          f"{'mean wait h':>13}{'mean queue':>12}{'summary s':>11}")
    for jobs in (int(x) for x in args.sizes.split(",")):
        out = subprocess.run([sys.executable, __file__, "--one", str(jobs), "--policy",
                              args.policy], capture_output=True, text=True, check=True)
        r = json.loads(out.stdout)
        print(f"{jobs:>10,}{r['wall']:9.2f}{r['cpu']:9.2f}{r['wall'] / jobs * 1e6:9.1f}"
              f"{r['agenda_items'] / r['wall']:11,.0f}{r['peak_bytes'] / 1e6:9.0f}"
              f"{r['mean_wait_h']:13.2f}{r['mean_queue']:12.1f}{r['summarise']:11.2f}")
        if jobs >= 1_000_000:
            ok_t = "meets" if r["wall"] <= TARGET_SECONDS else "misses"
            ok_m = "meets" if r["peak_bytes"] <= TARGET_BYTES else "misses"
            print(f"  1M jobs {ok_t} the {TARGET_SECONDS:.0f} s target and {ok_m} the 1 GB "
                  f"target")


if __name__ == "__main__":
    main()
