"""Running a study's runs: one at a time, or the whole grid in parallel, with stored results.

:func:`run_one` turns a :class:`~sim.run.spec.RunSpec` into a :class:`FinishedRun` (the spec, the
run's figures from :mod:`sim.study.metrics`, and how long it took). The same spec always gives
the same figures: the trace, the workload model and the failure source are all drawn from the
spec's seeds, and the engine is deterministic.

:func:`run_grid` runs many specs on a :class:`~concurrent.futures.ProcessPoolExecutor`. The
trace is loaded once per process (:func:`load_source` is cached; on Linux the workers are
forked after the parent loaded it, so they inherit it). Each finished run is written to the
:class:`RunStore` at once, so an interrupted study resumes where it stopped, and a stored run
is never run again unless asked (``fresh``).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import numpy as np

from sim.engine.core import simulate
from sim.engine.failures import FailureModel, NodeFailures
from sim.run.spec import FAILURE_KEYS, RunSpec, SpecError, TraceSource
from sim.study.metrics import result_metrics
from sim.trace.loader import Trace, load_trace
from sim.trace.scaling import scale_load
from sim.trace.synthetic import synthetic_trace
from sim.workload.model import hybrid_workload

OnDone = Callable[["FinishedRun"], None]
"""Called in the parent process after each run finishes (or is found stored)."""


@dataclass(frozen=True, slots=True)
class FinishedRun:
    """One finished run: its spec, its figures (``None`` where a run has no such figure) and
    the wall-clock seconds it took (``wall_seconds``, kept apart from the figures because it
    is the only thing that differs between two runs of one spec)."""

    spec: RunSpec
    metrics: Mapping[str, float | None]
    wall_seconds: float
    trace: str

    def to_dict(self) -> dict[str, object]:
        return {"spec": self.spec.to_dict(), "metrics": dict(self.metrics),
                "wall_seconds": self.wall_seconds, "trace": self.trace}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> FinishedRun:
        try:
            metrics = {str(k): (None if v is None else float(v))
                       for k, v in dict(data["metrics"]).items()}  # type: ignore[call-overload]
            return cls(spec=RunSpec.from_dict(data["spec"]),  # type: ignore[arg-type]
                       metrics=metrics, wall_seconds=float(data["wall_seconds"]),  # type: ignore[arg-type]
                       trace=str(data.get("trace", "")))
        except (KeyError, TypeError, ValueError) as e:
            raise SpecError(f"a finished run is malformed: {e}") from None


@lru_cache(maxsize=16)
def load_source(source: TraceSource, oversize: str = "drop") -> Trace:
    """The trace ``source`` names, loaded and cleaned once per process; ``oversize`` is what
    cleaning does with a job larger than the machine (``drop`` or ``clamp``, see
    :mod:`sim.trace.cleaning`)."""
    if source.path is None:
        kwargs = {} if source.nodes is None else {"nodes": source.nodes}
        jobs = {} if source.jobs is None else {"jobs": source.jobs}
        synthetic = synthetic_trace(seed=source.seed, **kwargs, **jobs)  # type: ignore[arg-type]
        return scale_load(synthetic, source.load)
    trace = load_trace(source.path, nodes=source.nodes,
                       oversize="clamp" if oversize == "clamp" else "drop")
    if source.jobs is not None and source.jobs < len(trace):
        trace = replace(trace, jobs=trace.jobs.take(np.arange(source.jobs)))
    return scale_load(trace, source.load)


def run_one(spec: RunSpec) -> FinishedRun:
    """Simulate one run and measure it."""
    t0 = time.perf_counter()
    trace = load_source(spec.trace, spec.choice("oversize"))
    # the job types are drawn on the trace at its own load, the same at every load
    own = trace if spec.trace.load == 1.0 else \
        load_source(replace(spec.trace, load=1.0), spec.choice("oversize"))
    workload = hybrid_workload(trace, spec.model(), typed_on=own)
    failures = _failure_source(spec, trace)
    result = simulate(workload, policy=spec.scheduler(), failures=failures,
                      cqsim_oracle=spec.choice("planning") == "cqsim",
                      requeue=spec.choice("requeue"),
                      malleable_start=spec.choice("malleable_start"),
                      decisions=spec.choice("decisions"),
                      instant_order=spec.choice("instant_order"))
    counts = None if failures is None else failures.counts()
    killed = () if failures is None else failures.killed
    metrics = result_metrics(result, counts, killed=killed)
    return FinishedRun(spec=spec, metrics=metrics, wall_seconds=time.perf_counter() - t0,
                     trace=_describe(spec.trace, trace))


def _failure_source(spec: RunSpec, trace: Trace) -> NodeFailures | None:
    """The run's node failures, when its overrides ask for them."""
    params = spec.params
    if not any(k in params for k in FAILURE_KEYS):
        return None
    if "failure_mtbf" not in params:
        raise SpecError("failure_repair needs failure_mtbf, the time between failures")
    model = FailureModel.of(params, seed=spec.seed, loss=spec.choice("failure_loss"),
                            node=spec.choice("failure_node"), times=spec.choice("failure_times"))
    return NodeFailures(model, nodes=trace.nodes, start=trace.first_submit,
                        end=trace.last_submit)


def _describe(source: TraceSource, trace: Trace) -> str:
    return f"{source.describe()}: {len(trace)} jobs on {trace.nodes} nodes"


class RunStore:
    """Finished runs as one JSON file each, ``<dir>/<spec.key>.json``."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    def path(self, spec: RunSpec) -> Path:
        return self.directory / f"{spec.key}.json"

    def get(self, spec: RunSpec) -> FinishedRun | None:
        """The stored run of ``spec``, if there is one and it is for this very spec."""
        path = self.path(spec)
        if not path.is_file():
            return None
        record = read_finished_run(path)
        return record if record.spec == spec else None

    def put(self, record: FinishedRun) -> Path:
        """Store ``record`` (written to a temporary name, then renamed: never half a file)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.path(record.spec)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(record.to_dict(), indent=1, sort_keys=True) + "\n")
        tmp.replace(path)
        return path

    def records(self) -> list[FinishedRun]:
        """Every stored run, in file-name order."""
        if not self.directory.is_dir():
            return []
        return [read_finished_run(p) for p in sorted(self.directory.glob("*.json"))]


def read_finished_run(path: Path) -> FinishedRun:
    try:
        return FinishedRun.from_dict(json.loads(path.read_text()))
    except (OSError, json.JSONDecodeError, SpecError) as e:
        raise SpecError(f"{path}: cannot read this finished run ({e})") from None


def run_grid(specs: Sequence[RunSpec], *, workers: int | None = None,
             store: RunStore | None = None, fresh: bool = False,
             on_done: OnDone | None = None) -> list[FinishedRun]:
    """Run every spec (those already in ``store`` are reused unless ``fresh``) on ``workers``
    processes (default: every core; 1 runs in this process). Returns the records in the order
    of ``specs``."""
    if len(set(specs)) != len(specs):
        raise SpecError("the grid names a run twice")
    workers = workers or os.cpu_count() or 1
    if workers < 1:
        raise SpecError(f"need at least one worker, got {workers}")
    done: dict[RunSpec, FinishedRun] = {}
    todo: list[RunSpec] = []
    for spec in specs:
        stored = None if fresh or store is None else store.get(spec)
        if stored is None:
            todo.append(spec)
        else:
            done[spec] = stored
            if on_done is not None:
                on_done(stored)

    def finished(record: FinishedRun) -> None:
        done[record.spec] = record
        if store is not None:
            store.put(record)
        if on_done is not None:
            on_done(record)

    sources = list(dict.fromkeys((s.trace, s.choice("oversize")) for s in todo))
    for source, oversize in sources:
        # fail early on a bad trace, and let forked workers inherit it
        load_source(source, oversize)
    if workers == 1 or len(todo) <= 1:
        for spec in todo:
            finished(run_one(spec))
    else:
        with ProcessPoolExecutor(max_workers=min(workers, len(todo)), initializer=_warm,
                                 initargs=(tuple(sources),)) as pool:
            pending = {pool.submit(run_one, spec) for spec in todo}
            while pending:
                ready, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in ready:
                    finished(future.result())
    return [done[s] for s in specs]


def _warm(sources: Iterable[tuple[TraceSource, str]]) -> None:
    for source, oversize in sources:
        load_source(source, oversize)
