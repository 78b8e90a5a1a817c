"""``metaq experiment``: the hybrid-workload study of Fan et al. and the studies past it.

One command, four modes:

- run a study on this machine (default): ``metaq experiment --study paper`` runs every
  policy x workload x seed (x variant) in parallel and writes the table, figures and report;
- ``--emit-tasks DIR``: write the same grid as ``#METAQ`` task scripts instead, to run
  through a queue;
- ``--run-one SPEC.json --out RUNS``: run one emitted spec (what each task script does);
- ``--collect DIR``: build the table, figures and report from an emitted grid's runs.

The simulator (``sim``) is imported inside the command only. Argument errors are one sentence
on standard error with exit status 2; other failures exit with 1.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.table import Table

from metaq_py.cli.experiment_args import (
    BadArgument,
    check_reading,
    default_traces,
    settings,
    split_list,
    study_named,
    trace_source,
    with_load,
)
from metaq_py.cli.shared import app, console, one_scheduler
from metaq_py.errors import MetaqError

if TYPE_CHECKING:
    from sim.run.spec import RunSpec, TraceSource
    from sim.study.calibrate import Calibration
    from sim.study.execution import FinishedRun
    from sim.study.findings import Finding
    from sim.study.full import TraceResults
    from sim.study.grid import Study, Variant




def _fail(message: object, *, code: int = 2) -> NoReturn:
    typer.echo(f"metaq experiment: {message}", err=True)
    raise typer.Exit(code)


# Over 80 lines: typer reads every option of the command from this signature, one
# declaration with its help text each, and takes most of these lines.
@app.command()
def experiment(
    study: Annotated[str, typer.Option(
        help="paper, checkpoint, malleable-min, spaa-plus, failures, setup, or all (every "
             "run the paper's 17 observations need, on every trace).")] = "paper",
    sweep: Annotated[list[str] | None, typer.Option(
        help="Also vary a parameter: KEY=V1,V2,... (repeatable), e.g. checkpoint_scale=0.5,2 "
             "or failure_mtbf=5h,50h.")] = None,
    reading: Annotated[str | None, typer.Option(
        help="What 'preempted' counts when judging the 17 observations (with --study all or "
             "--calibrate paper): kills-as-preemptions (R19, the default), mechanisms-only "
             "or shrinks-as-preemptions.")] = None,
    observation: Annotated[list[int] | None, typer.Option(
        help="With --study all: only the runs this observation (1-17) needs, to rerun one "
             "row of the report (repeatable).")] = None,
    max_seeds: Annotated[int, typer.Option(
        help="With --study all: the most seeds an undecided observation gets.")] = 10,
    escalation_runs: Annotated[int | None, typer.Option(
        help="With --study all: the most runs added for undecided observations, the "
             "cheapest first (default 400; no limit with --observation).")] = None,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="Change a modelling choice for every run, calibration included: "
                      "KEY=V (repeatable), e.g. oracle=1, mtbf=6h, "
                      "victim_order=seconds, requeue=at-preemption, type_shares=drawn, "
                      "oversize=clamp, borrowers=all, other_reservations=spared, "
                      "cup_preempt=at-arrival, preempt_when=always, "
                      "malleable_start=full, decisions=per-item, instant_order=submits-first, "
                      "failure_loss=since-checkpoint, failure_node=busy, "
                      "failure_times=weibull-0.7, malleable_speedup=amdahl-0.05, "
                      "resize_cost=setup (or setup-fixed) or "
                      "node_order=highest-first "
                      "(docs/model.md lists every key).")] = None,
    trace: Annotated[list[Path] | None, typer.Option(
        help="SWF or ALCF CSV trace; repeat it (with --study all) for several machines. "
             "Default: theta_2022.swf.gz in $METAQ_TRACES, ./shared/traces, "
             "../shared/traces or beside the checkout (with --study all, every *.swf.gz "
             "there); none found is an error naming where it looked.")] = None,
    traces: Annotated[str | None, typer.Option(
        help="Several traces at once, comma-separated (same as repeating --trace).")] = None,
    load: Annotated[float | None, typer.Option(
        help="Divide the trace's inter-arrival gaps by this factor: the same jobs arrive F "
             "times as fast (CQSim's density).")] = None,
    calibrate: Annotated[str | None, typer.Option(
        help="'paper': run at the load at which baseline EASY reaches the paper's 83.93% "
             "utilisation (found by bisection and reported), and at the trace's own load, "
             "side by side.")] = None,
    synthetic: Annotated[bool, typer.Option(
        "--synthetic", help="Use the synthetic Theta-like workload even if a trace is "
                            "found.")] = False,
    jobs: Annotated[int | None, typer.Option(
        help="Keep only the first N jobs of the trace (or draw N synthetic jobs): quick "
             "runs.")] = None,
    nodes: Annotated[int | None, typer.Option(
        help="Machine size in nodes (default: the trace's; 4,360 for Theta).")] = None,
    seeds: Annotated[int | None, typer.Option(
        help="Seeds per policy and workload (default 10; 3 with --study all).")] = None,
    first_seed: Annotated[int, typer.Option(help="The first seed.")] = 0,
    workloads: Annotated[str, typer.Option(help="Workloads, e.g. W1,W5.")] =
        "W1,W2,W3,W4,W5",
    scheduler: Annotated[str | None, typer.Option(
        help="Schedulers, e.g. easy,CUA&SPAA (default: the study's).")] = None,
    policies: Annotated[str | None, typer.Option(
        hidden=True, help="The old name of --scheduler.")] = None,
    workers: Annotated[int | None, typer.Option(
        help="Processes to run on (default: every core).")] = None,
    out: Annotated[Path | None, typer.Option(
        help="Output directory (default: experiment-<study>); with --run-one, where the run's "
             "record goes; with --collect, default the collected directory.")] = None,
    fresh: Annotated[bool, typer.Option(
        "--fresh", help="Run again even the runs already stored in the output "
                        "directory.")] = False,
    emit_tasks: Annotated[Path | None, typer.Option(
        help="Write the grid as #METAQ task scripts into this directory instead of "
             "running it.")] = None,
    task_walltime: Annotated[str, typer.Option(
        help="MIN_WC_TIME of each emitted task.")] = "30m",
    project: Annotated[str, typer.Option(help="PROJECT of each emitted task.")] =
        "metaq-study",
    run_one: Annotated[Path | None, typer.Option(
        help="Run the single spec in this JSON file (what an emitted task does).")] = None,
    collect: Annotated[Path | None, typer.Option(
        help="Build the table, figures and report from an emitted grid's runs.")] = None,
) -> None:
    """Run the hybrid-workload study (or a sweep past it) and write table, figures, report."""
    from sim.run.spec import SpecError
    from sim.trace.loader import TraceError

    try:
        policies = one_scheduler(scheduler, policies, "--policies")
    except MetaqError as e:
        _fail(e)
    modes = [name for name, value in (("--emit-tasks", emit_tasks), ("--run-one", run_one),
                                      ("--collect", collect)) if value is not None]
    try:
        if len(modes) > 1:
            raise BadArgument(f"{' and '.join(modes)} cannot be used together")
        if run_one is not None:
            _run_one(run_one, out)
            return
        if collect is not None:
            _collect(collect, out)
            return
        paths = [*(trace or []), *(Path(p) for p in (split_list(traces) or []))]
        if calibrate is not None and calibrate != "paper":
            raise BadArgument(f"--calibrate knows only 'paper', got {calibrate!r}")
        if load is not None and (calibrate is not None or study == "all"):
            raise BadArgument("--load cannot be used with --calibrate or --study all, "
                               "which find the paper's load themselves")
        overrides = settings(set_ or [])
        check_reading(reading, judged=study == "all" or calibrate is not None)
        if observation and study != "all":
            raise BadArgument("--observation reruns a row of --study all: use it with it")
        if study == "all":
            _run_all_study(paths, synthetic=synthetic, jobs=jobs, nodes=nodes,
                           seeds=seeds or 3, first_seed=first_seed, workers=workers,
                           out=out or Path("experiment-all"), fresh=fresh,
                           overrides=overrides, reading=reading,
                           observations=observation or [], max_seeds=max_seeds,
                           escalation=escalation_runs)
            return
        if len(paths) > 1:
            raise BadArgument("several traces need --study all")
        chosen = study_named(study)
        own, said = trace_source(trace=paths[0] if paths else None, synthetic=synthetic,
                                  jobs=jobs, nodes=nodes)
        source, calibration = own, None
        if load is not None:
            source, said = with_load(own, said, load)
        if calibrate is not None:
            source, said, calibration = _calibrated(
                own, said, out or Path(f"experiment-{chosen.name}"), workers=workers,
                overrides=overrides)
        specs_at = [_grid(chosen, at, seeds=10 if seeds is None else seeds,
                          first_seed=first_seed, workloads=workloads, policies=policies,
                          sweep=sweep or [], overrides=overrides)
                    for at in ([source] if calibration is None else [source, own])]
        specs = specs_at[0]
        context = _context(chosen, said, specs)
        if emit_tasks is not None:
            _emit(specs, emit_tasks, context, task_walltime=task_walltime, project=project)
            return
        two = None if calibration is None else _TwoLoads(own, calibration, specs_at[1],
                                                         reading)
        _run_study(specs, out or Path(f"experiment-{chosen.name}"), context, workers=workers,
                   fresh=fresh, said=said, two=two)
    except BadArgument as e:
        _fail(e)
    except (SpecError, TraceError) as e:
        _fail(e)
    except OSError as e:
        _fail(f"{e.filename or ''}: {e.strerror or e}".lstrip(": "), code=1)


# --- building the grid ------------------------------------------------------------------------


def _calibrated(source: TraceSource, said: str, out: Path, *, workers: int | None,
                overrides: Variant) -> tuple[TraceSource, str, Calibration]:
    """``source`` at the paper's load; prints the factor and the Table III comparison."""
    from dataclasses import replace

    from sim.study.calibrate import TABLE_III_HEADER, calibrate, table_iii
    from sim.study.execution import RunStore, run_grid

    store = RunStore(out / "runs")
    found = calibrate(source, lambda specs: run_grid(specs, workers=workers, store=store),
                      overrides=overrides)
    console.print(f"Calibrated: load x{found.factor:g} gives baseline EASY "
                  f"{100 * found.reached:.2f}% utilisation (paper's reading; paper 83.93%).")
    table = Table(title="Baseline beside the paper's Table III")
    for column in TABLE_III_HEADER:
        table.add_column(column, overflow="fold")
    for row in table_iii(found):
        table.add_row(*row)
    console.print(table)
    return (replace(source, load=found.factor),
            f"{said.rstrip('.')}, at the paper's load (arrivals x{found.factor:g} as fast).",
            found)


def _grid(study: Study, source: TraceSource, *, seeds: int, first_seed: int, workloads: str,
          policies: str | None, sweep: list[str], overrides: Variant) -> tuple[RunSpec, ...]:
    from sim.study.grid import build_grid, parse_sweep

    if seeds < 1:
        raise BadArgument(f"--seeds must be at least 1, got {seeds}")
    if first_seed < 0:
        raise BadArgument(f"--first-seed must be 0 or more, got {first_seed}")
    return build_grid(study, trace=source, seeds=seeds, first_seed=first_seed,
                      workloads=split_list(workloads) or (), policies=split_list(policies),
                      sweeps=[parse_sweep(s) for s in sweep], overrides=overrides)


def _context(study: Study, said: str, specs: tuple[RunSpec, ...]) -> dict[str, object]:
    seeds = sorted({s.seed for s in specs})
    return {"name": study.name, "title": study.title, "question": study.question,
            "trace": said.removeprefix("Using ").rstrip("."), "seeds": seeds,
            "command": "metaq " + shlex.join(sys.argv[1:]) if sys.argv[1:] else ""}


def _run_all_study(paths: list[Path], *, synthetic: bool, jobs: int | None,
                   nodes: int | None, seeds: int, first_seed: int, workers: int | None,
                   out: Path, fresh: bool, overrides: Variant, reading: str | None,
                   observations: list[int], max_seeds: int, escalation: int | None) -> None:
    """``--study all``: calibrate, run and judge all 17 observations on every trace."""
    import os
    import time

    from sim.study.execution import RunStore, run_grid
    from sim.study.full import ESCALATION_RUNS, run_all
    from sim.study.full_page import write_full_page
    from sim.study.full_report import FullContext, write_full

    if seeds < 1:
        raise BadArgument(f"--seeds must be at least 1, got {seeds}")
    if not seeds <= max_seeds <= 30:
        raise BadArgument(f"--max-seeds must be between --seeds ({seeds}) and 30, got "
                          f"{max_seeds}")
    if first_seed < 0:
        raise BadArgument(f"--first-seed must be 0 or more, got {first_seed}")
    if workers is not None and workers < 1:
        raise BadArgument(f"--workers must be at least 1, got {workers}")
    if escalation is not None and escalation < 0:
        raise BadArgument(f"--escalation-runs must be 0 or more, got {escalation}")
    if escalation is None and not observations:
        escalation = ESCALATION_RUNS
    wrong = [n for n in observations if not 1 <= n <= 17]
    if wrong:
        raise BadArgument(f"--observation is a number from 1 to 17, got {wrong[0]}")
    if paths and synthetic:
        raise BadArgument("--trace and --synthetic cannot be used together")
    why = "--trace"
    if not paths and not synthetic:
        paths, why = default_traces(every=True)
    sources, said = [], {}
    for path in paths:
        source, _ = trace_source(trace=path, synthetic=False, jobs=jobs, nodes=nodes)
        sources.append(source)
        said[source.describe()] = f"{path} ({why})"
    if synthetic:
        source, _ = trace_source(trace=None, synthetic=True, jobs=jobs, nodes=nodes)
        sources.append(source)
        said[source.describe()] = "the synthetic Theta-like workload (--synthetic)"
    for name, where in said.items():
        console.print(f"Trace {name}: {where}.")
    store = RunStore(out / "runs")
    started, count = time.perf_counter(), 0

    def run(specs: list) -> list:
        nonlocal count
        count += len(specs)
        if len(specs) > 1:
            console.print(f"{len(specs)} runs into {out}/ on {workers or os.cpu_count()} "
                          f"workers ...")
        return run_grid(specs, workers=workers, store=store, fresh=fresh)

    seed_list = tuple(range(first_seed, first_seed + seeds))
    results = run_all(sources, seeds=seed_list, run=run, overrides=overrides, reading=reading,
                      max_seeds=max_seeds, escalation=escalation,
                      observations=observations or None)
    command = "metaq " + shlex.join(sys.argv[1:]) if sys.argv[1:] else "metaq experiment"
    context = FullContext(
        command=command, seeds=seed_list, runs=count, reading=reading, traces=said,
        max_seeds=max_seeds,
        rerun={name: _rerun(path, synthetic, out, overrides, seeds, jobs, reading)
               for name, path in zip(said, [*paths, None], strict=False)})
    files = [*write_full(results, out, context), write_full_page(results, out, context)]
    for r in results:
        _show_verdicts(r)
    console.print(f"Wrote {len(files)} files to {out}/ (report.md, report.html) in "
                  f"{time.perf_counter() - started:.0f} s.")


def _rerun(path: Path | None, synthetic: bool, out: Path, overrides: Variant, seeds: int,
           jobs: int | None, reading: str | None) -> str:
    """The command that reruns rows of one trace of a ``--study all`` (``--observation N``
    follows it)."""
    args = ["metaq", "experiment", "--study", "all", "--out", str(out)]
    args += ["--synthetic"] if synthetic and path is None else ["--trace", str(path)]
    if jobs is not None:
        args += ["--jobs", str(jobs)]
    if seeds != 3:
        args += ["--seeds", str(seeds)]
    if reading is not None:
        args += ["--reading", reading]
    for key, value in overrides:
        args += ["--set", f"{key}={value}"]
    return shlex.join(args)


# --- the four modes -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _TwoLoads:
    """What ``--calibrate paper`` runs beside the study at the paper's load: the same grid
    (``specs``) on the trace at its own load (``source``)."""

    source: TraceSource
    calibration: Calibration
    specs: tuple[RunSpec, ...]
    reading: str | None


def _show_verdicts(r: TraceResults) -> None:
    """The loads of one trace and its 17 verdicts at each."""
    from sim.study.full_report import loads_line

    console.print(f"{r.verdicts.trace}: {loads_line(r)[0]}", highlight=False)
    loads = [x for x in r.plan.factors if x in r.verdicts.at]
    table = Table(title=f"The paper's 17 observations: {r.verdicts.trace}")
    for column in ("#", *(f"At x{r.plan.factors[x]:g}" for x in loads),
                   f"Ours at x{r.plan.factors[loads[0]]:g}"):
        table.add_column(column, overflow="fold")
    colour = {"holds": "green", "contradicted": "red", "undecided": "yellow",
              "cannot judge": "default"}
    for i, first in enumerate(r.verdicts.at[loads[0]]):
        cells = []
        for x in loads:
            v = r.verdicts.at[x][i]
            cells.append(f"[{colour[str(v.word)]}]{v.word}[/] ({v.seeds} seeds)")
        table.add_row(str(first.number), *cells, first.ours)
    console.print(table)


def _run_study(specs: tuple[RunSpec, ...], out: Path, context: dict[str, object], *,
               workers: int | None, fresh: bool, said: str, two: _TwoLoads | None) -> None:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from sim.study.execution import RunStore, run_grid

    if workers is not None and workers < 1:
        raise BadArgument(f"--workers must be at least 1, got {workers}")
    console.print(said)
    every = list(dict.fromkeys([*specs, *(two.specs if two else ())]))
    console.print(f"{len(every)} runs of study {context['name']!r} into {out}/"
                  + (" (at the trace's own load and at the paper's)." if two else "."))
    store = RunStore(out / "runs")
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("runs", total=len(every))

        def done(record: FinishedRun) -> None:
            s = record.spec
            progress.update(task, advance=1,
                            description=f"{s.policy} {s.workload} seed {s.seed}")

        found = dict(zip(every, run_grid(every, workers=workers, store=store, fresh=fresh,
                                         on_done=done), strict=True))
    records = [found[s] for s in specs]
    if two is None:
        _write(records, out, context)
        return
    from sim.study.full import two_loads
    from sim.study.full_report import side_by_side, write_two_loads

    r = two_loads(two.source, two.calibration, str(context["name"]),
                  [found[s] for s in two.specs], records, reading=two.reading)
    _write(records, out, context, beside=side_by_side(r, reading=two.reading))
    write_two_loads(r, out, reading=two.reading)
    _show_verdicts(r)


def _emit(specs: tuple, directory: Path, context: dict[str, object], *, task_walltime: str,
          project: str) -> None:
    from metaq_py.durations import DurationError, parse_duration
    from sim.study.task_scripts import emit_tasks

    try:
        walltime = parse_duration(task_walltime)
    except DurationError as e:
        raise BadArgument(f"--task-walltime: {e}") from None
    emitted = emit_tasks(specs, directory, context=context, walltime=walltime, project=project)
    console.print(f"Wrote {len(emitted.tasks)} task scripts to {emitted.directory}/tasks/. "
               f"Submit them (metaq submit), then run: metaq experiment --collect "
               f"{emitted.directory}")


def _run_one(spec_path: Path, out: Path | None) -> None:
    from sim.run.spec import RunSpec
    from sim.study.execution import RunStore, run_one

    if out is None:
        raise BadArgument("--run-one needs --out, the directory its record goes to")
    try:
        spec = RunSpec.from_json(spec_path.read_text())
    except FileNotFoundError:
        raise BadArgument(f"spec file {spec_path} does not exist") from None
    record = run_one(spec)
    path = RunStore(out).put(record)
    console.print(f"{spec.policy} {spec.workload} seed {spec.seed} ({spec.variant}): "
               f"{record.wall_seconds:.1f} s, written to {path}")


def _collect(directory: Path, out: Path | None) -> None:
    from sim.study.task_scripts import collect

    got = collect(directory)
    if not got.records:
        raise BadArgument(f"no run of {directory} has finished yet "
                           f"({len(got.missing)} missing)")
    if got.missing:
        console.print(f"[yellow]{len(got.missing)} of {len(got.missing) + len(got.records)} runs "
                   f"have not finished; the outputs cover the {len(got.records)} that "
                   f"have.[/yellow]")
    _write(list(got.records), out or directory, got.context)


def _write(records: list[FinishedRun], out: Path, context: dict[str, object], *,
           beside: list[str] | None = None) -> None:
    from sim.study.outputs import write_study
    from sim.study.report import StudyContext

    seeds = tuple(sorted({r.spec.seed for r in records}))
    ctx = StudyContext(name=str(context.get("name", "")), title=str(context.get("title", "")),
                       question=str(context.get("question", "")),
                       trace=records[0].trace + (f"; {context['trace']}"
                                                 if context.get("trace") else ""),
                       seeds=seeds, runs=len(records),
                       command=str(context.get("command", "")))
    result = write_study(records, out, ctx, beside=beside or ())
    _show(result.findings)
    console.print(f"Wrote {', '.join(p.name for p in result.files)} to {out}/.")


def _show(findings: list[Finding] | tuple[Finding, ...]) -> None:
    table = Table(title="The paper's findings beside ours")
    for column in ("Finding", "Paper", "Ours", "Verdict"):
        table.add_column(column, overflow="fold")
    verdicts = {True: "[green]holds[/green]", False: "[red]does not hold[/red]",
                None: "cannot judge"}
    for f in findings:
        table.add_row(f.claim, f.paper, f.ours, verdicts[f.holds])
    console.print(table)
