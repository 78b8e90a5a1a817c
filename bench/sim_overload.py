"""Does the simulator stay fast when the machine is overloaded?

Simulates the same synthetic Theta-like workload (``sim.trace.synthetic``, 4,360 nodes) at 80%
and at 200% offered load and prints wall seconds, microseconds per job, decision seconds and
the longest queue for each, then the ratio of the time per job. Target (issue 14): with
200,000 jobs, the time per job at 200% is at most 5 times that at 80%. Each load runs in a
fresh process, so one run's memory does not slow the other.

Run: ``python bench/sim_overload.py [--jobs 200000] [--policy easy] [--loads 0.8,2.0]``
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

TARGET_RATIO = 5.0


def one(jobs: int, load: float, policy: str) -> dict[str, float]:
    """Generate and simulate one trace in this process; returns the figures."""
    from sim.engine.core import simulate
    from sim.trace.synthetic import synthetic_trace

    trace = synthetic_trace(jobs=jobs, load=load, seed=0)
    t0 = time.perf_counter()
    result = simulate(trace, policy=policy)
    wall = time.perf_counter() - t0
    return {"jobs": jobs, "load": load, "wall": wall, "per_job_us": wall / jobs * 1e6,
            "decide": float(result.decision_seconds.sum()),
            "longest_queue": int(result.series.queued.max())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200_000)
    parser.add_argument("--policy", default="easy")
    parser.add_argument("--loads", default="0.8,2.0")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: "jobs,load"
    args = parser.parse_args()
    if args.one:
        jobs, load = args.one.split(",")
        print(json.dumps(one(int(jobs), float(load), args.policy)))
        return
    from metaq_py import build

    print(f"{args.jobs:,} synthetic Theta-like jobs, {args.policy}, policy core: {build()}")
    print(f"{'load':>6}{'wall s':>10}{'us/job':>10}{'decide s':>10}{'longest queue':>15}")
    rows = []
    for load in (float(x) for x in args.loads.split(",")):
        out = subprocess.run([sys.executable, __file__, "--policy", args.policy,
                              "--one", f"{args.jobs},{load}"],
                             check=True, capture_output=True, text=True).stdout
        row = json.loads(out)
        rows.append(row)
        print(f"{load:6.0%}{row['wall']:10.2f}{row['per_job_us']:10.1f}{row['decide']:10.2f}"
              f"{row['longest_queue']:15,}")
    if len(rows) >= 2:
        ratio = rows[-1]["per_job_us"] / rows[0]["per_job_us"]
        print(f"\ntime per job at {rows[-1]['load']:.0%} is {ratio:.1f}x that at "
              f"{rows[0]['load']:.0%}, against at most {TARGET_RATIO:g}x: "
              f"{'met' if ratio <= TARGET_RATIO else 'NOT met'}")


if __name__ == "__main__":
    main()
