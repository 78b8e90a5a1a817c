"""Benchmark of the hybrid-workload study on the full Theta 2022 trace (prints figures).

1. One mechanism on one workload (CUA&SPAA, W5, seed 0): target at most 2 s. Printed with
   the parts of the run (trace load once per process, workload model, simulation + metrics).
   The run is repeated (``--repeat``, 5 by default) and the best time is the figure, as
   ``timeit`` does: on a shared machine the slower runs measure its other tenants. The median
   is printed beside it.
2. The full paper grid: 7 policies x 5 workloads x 10 seeds = 350 runs on every core; target
   at most 10 minutes on 2 cores. A stratified subset (every policy, every workload, once) is
   timed first and the full time projected from it; the full grid then runs only when the
   projection is within 1.5 x the target, or with ``--full``. When it does not run, the
   projection is printed and said to be one.

3. ``--all``: the whole ``--study all`` (every trace in ``../shared/traces``, calibration,
   every run the 17 observations need, 3 seeds): target at most 10 minutes on 2 cores. It
   prints the wall time and the CPU seconds (the wall time a quiet 2-core machine would
   take is about half of them).

Usage: ``python bench/experiment_grid.py [--trace PATH] [--workers N] [--full] [--skip-grid]
[--repeat N] [--out DIR] [--all [--seeds N]]``. With ``--out`` the full grid's table, figures
and report (or the ``--all`` report) are written there.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.append(str(REPO))  # the installed package first: it may be the compiled build

from metaq_py import build  # noqa: E402
from sim.run.spec import RunSpec, TraceSource  # noqa: E402
from sim.study.execution import load_source, run_grid, run_one  # noqa: E402
from sim.study.grid import STUDIES, build_grid  # noqa: E402
from sim.workload.model import WORKLOADS, hybrid_workload  # noqa: E402

THETA = REPO.parent / "shared" / "traces" / "theta_2022.swf.gz"
ONE_TARGET = 2.0
GRID_TARGET = 600.0


def one_run(source: TraceSource, repeat: int) -> None:
    t0 = time.perf_counter()
    trace = load_source(source)
    load = time.perf_counter() - t0
    spec = RunSpec(policy="CUA&SPAA", workload="W5", seed=0, trace=source)
    t0 = time.perf_counter()
    hybrid_workload(trace, spec.model())
    model = time.perf_counter() - t0
    times = []
    for _ in range(repeat):
        record = run_one(spec)
        times.append(record.wall_seconds)
    best, median = min(times), statistics.median(times)
    print(f"trace: {len(trace):,} jobs on {trace.nodes:,} nodes, loaded in {load:.2f} s "
          f"(once per process)")
    print(f"one run (CUA&SPAA, W5, seed 0): {best:.2f} s (best of {repeat}, median "
          f"{median:.2f} s; workload model {model:.2f} s of it); target {ONE_TARGET:.0f} s -> "
          f"{'met' if best <= ONE_TARGET else 'NOT met'}; {len(trace) / best:,.0f} jobs/s")
    m = record.metrics
    print(f"  instant start {100 * m['instant_start']:.1f}%, utilisation "
          f"{100 * m['utilisation']:.1f}%, turnaround {m['turnaround_all']:.2f} h")


def grid(source: TraceSource, *, workers: int, full: bool, out: Path | None) -> None:
    specs = build_grid(STUDIES["paper"], trace=source)
    workloads = list(WORKLOADS)
    subset = [s for s in specs
              if s.seed == 0 and s.workload == workloads[specs.index(s) // 50 % 5]]
    t0 = time.perf_counter()
    run_grid(subset, workers=workers)
    spent = time.perf_counter() - t0
    projected = spent * len(specs) / len(subset)
    print(f"subset: {len(subset)} runs (every policy, every workload) on {workers} workers in "
          f"{spent:.1f} s -> {spent / len(subset) * workers:.2f} s per run per worker")
    print(f"projected full grid ({len(specs)} runs): {projected / 60:.1f} min; target "
          f"{GRID_TARGET / 60:.0f} min")
    if not full and projected > 1.5 * GRID_TARGET:
        print("full grid NOT run: the projection above is clearly over the target "
              "(run with --full to measure it)")
        return
    done = 0

    def tick(_record: object) -> None:
        nonlocal done
        done += 1
        if done % 50 == 0:
            print(f"  {done}/{len(specs)} runs, {time.perf_counter() - t0:.0f} s", flush=True)

    t0 = time.perf_counter()
    records = run_grid(specs, workers=workers, on_done=tick)
    spent = time.perf_counter() - t0
    print(f"full grid: {len(records)} runs on {workers} workers in {spent / 60:.1f} min "
          f"(measured); target {GRID_TARGET / 60:.0f} min -> "
          f"{'met' if spent <= GRID_TARGET else 'NOT met'}")
    if out is not None:
        from sim.study.outputs import write_study
        from sim.study.report import StudyContext

        study = STUDIES["paper"]
        ctx = StudyContext(name=study.name, title=study.title, question=study.question,
                           trace=records[0].trace, seeds=tuple(range(10)), runs=len(records),
                           command="python bench/experiment_grid.py --out " + str(out))
        result = write_study(records, out, ctx)
        print(f"outputs written to {out}/ ({', '.join(p.name for p in result.files)})")


def all_study(workers: int, seeds: int, out: Path | None) -> None:
    import resource
    import tempfile

    from sim.study.execution import RunStore
    from sim.study.full import run_all
    from sim.study.full_report import FullContext, write_full

    traces = sorted(THETA.parent.glob("*.swf.gz"))
    directory = out or Path(tempfile.mkdtemp(prefix="metaq-all-"))
    store = RunStore(directory / "runs")
    t0, c0 = time.perf_counter(), _cpu(resource)
    results = run_all([TraceSource(path=str(p)) for p in traces], seeds=tuple(range(seeds)),
                      run=lambda specs: run_grid(specs, workers=workers, store=store))
    write_full(results, directory, FullContext("python bench/experiment_grid.py --all",
                                               tuple(range(seeds)),
                                               len(store.records())))
    wall, cpu = time.perf_counter() - t0, _cpu(resource) - c0
    print(f"--study all: {len(store.records())} runs on {len(traces)} traces, {seeds} seeds, "
          f"{workers} workers: {wall / 60:.1f} min wall, {cpu / 60:.1f} CPU-min "
          f"(a quiet machine: about {cpu / workers / 60:.1f} min); target "
          f"{GRID_TARGET / 60:.0f} min -> {'met' if wall <= GRID_TARGET else 'NOT met'}; "
          f"report in {directory}/report.md")


def _cpu(resource) -> float:  # type: ignore[no-untyped-def]
    own, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF,
                                                 resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=THETA)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--full", action="store_true", help="run the full grid regardless")
    parser.add_argument("--skip-grid", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=5,
                        help="times the one run is repeated; the best is the figure (the "
                             "machine is shared, so slower runs measure its other tenants)")
    parser.add_argument("--all", action="store_true", help="time the whole --study all")
    parser.add_argument("--seeds", type=int, default=3, help="seeds of --all")
    args = parser.parse_args()
    print(f"policy core: {build()}")
    if args.all:
        print(f"{os.cpu_count()} cores; {args.workers} workers")
        all_study(args.workers, args.seeds, args.out)
        return
    if not args.trace.is_file():
        print(f"no trace at {args.trace}; nothing to measure")
        return
    source = TraceSource(path=str(args.trace.resolve()))
    print(f"{os.cpu_count()} cores; {args.workers} workers")
    one_run(source, args.repeat)
    if not args.skip_grid:
        grid(source, workers=args.workers, full=args.full, out=args.out)


if __name__ == "__main__":
    main()
