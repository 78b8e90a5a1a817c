"""The files a run leaves behind: ``jobs.csv``, ``summary.json`` and the plots.

``jobs.csv`` has one row per job in submit order; times are seconds on the trace's clock, an
empty cell means "never" (a job that never started or never finished). ``summary.json`` holds
what the run was (policy, trace, seed, workload, window, speed), what cleaning did to the
trace, and every metric of :mod:`sim.run.metrics`. The plots come from :mod:`sim.run.plots`.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from metaq_py.policy.model import Kind
from sim.run.metrics import KIND_CODE, KIND_CODES, JobOutcome, Summary
from sim.run.result import Outcomes, SimulationResult

JOB_COLUMNS = (
    "id", "kind", "size", "submit", "start", "end", "wait", "turnaround", "runtime",
    "useful_node_seconds", "preemptions", "shrinks", "lost_node_seconds", "instant_start",
    "notice",
)
"""The columns of ``jobs.csv``, in order."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunInfo:
    """What was simulated, for the record: the trace's name and why it was that one (``why``:
    the option that chose it), the seed of the synthetic trace and workload model, the
    workload (``W1``..``W5``, ``None`` for a plain trace) and the cleaning report's sentences;
    then the trace's checks: the machine (size, unit and where the size came from,
    :meth:`sim.trace.machine.Machine.to_dict`), the offered load, the reading notes, the
    missing-walltime estimate in words and the sanity warnings."""

    trace: str
    why: str | None = None
    seed: int | None = None
    workload: str | None = None
    cleaning: tuple[str, ...] = ()
    machine: dict[str, object] | None = None
    offered_load: float | None = None
    reading: tuple[str, ...] = ()
    walltime_estimate: str | None = None
    warnings: tuple[str, ...] = ()


def write_jobs_csv(outcomes: Sequence[JobOutcome], path: Path) -> Path:
    """One row per job (see :data:`JOB_COLUMNS`)."""
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(JOB_COLUMNS)
        if isinstance(outcomes, Outcomes):
            # the engine's columns, without building a JobOutcome per job: the same text
            out.writerows(_rows_of_columns(outcomes))
            return path
        for o in outcomes:
            out.writerow((
                o.id, str(o.kind), o.size, _num(o.submit), _num(o.start), _num(o.end),
                _num(o.wait), _num(o.turnaround), _num(o.runtime), _num(o.useful_node_seconds),
                o.preemptions, o.shrinks, _num(o.lost_node_seconds),
                "" if o.instant_start is None else int(o.instant_start), o.notice or "",
            ))
    return path


def _rows_of_columns(outcomes: Outcomes) -> Iterator[tuple[object, ...]]:
    """The rows of ``jobs.csv`` from an engine's columns, as :func:`write_jobs_csv` writes
    them from :class:`JobOutcome` values. Each column becomes its cells in one pass
    (:func:`_cells`), so the csv writer formats Python ints and floats in C: the whole
    command spends a fifth of its simulation's time here otherwise."""
    c = outcomes.columns
    ondemand = c.kind == KIND_CODE[Kind.ONDEMAND]
    names = np.array([str(kind) for kind in KIND_CODES], dtype=object)
    categories = outcomes.categories
    never_started, never_ended = np.isnan(c.start), np.isnan(c.end)
    instant = np.where(ondemand, c.instant.astype(np.int64), 0).astype(object)
    instant[~ondemand] = ""
    notices = [(categories.get(jid) or "") if od else ""
               for jid, od in zip(outcomes.ids, ondemand.tolist(), strict=True)]
    lost = np.where(c.lost == 0, 0.0, c.lost)  # float(lost or 0.0): -0.0 is 0.0
    return zip(outcomes.ids, names[c.kind].tolist(), c.size.tolist(), _cells(c.submit),
               _cells(c.start, never_started), _cells(c.end, never_ended),
               _cells(c.start - c.submit, never_started), _cells(c.end - c.submit, never_ended),
               _cells(c.runtime), _cells(c.useful), c.preemptions.tolist(),
               c.shrinks.tolist(), _cells(lost), instant.tolist(), notices, strict=True)


def _cells(values: np.ndarray, missing: np.ndarray | None = None) -> list[object]:
    """``values`` as :func:`_float` spells them, for the csv writer to format: whole numbers
    as ints (it writes ``str``), others as floats (it writes ``repr``), ``missing`` as
    empty cells."""
    whole = np.isfinite(values) & (np.abs(values) < 2.0 ** 62)
    whole[whole] = values[whole] == np.floor(values[whole])
    cells = values.astype(object)
    cells[whole] = values[whole].astype(np.int64).astype(object)
    huge = np.isfinite(values) & ~(np.abs(values) < 2.0 ** 62)  # whole, beyond int64's reach
    if huge.any():
        cells[huge] = [int(x) for x in values[huge].tolist()]
    if missing is not None:
        cells[missing] = ""
    return cells.tolist()  # type: ignore[no-any-return]


def _float(x: float) -> str:
    return str(int(x)) if x.is_integer() else repr(x)


def summary_document(result: SimulationResult, summary: Summary, info: RunInfo) -> dict:
    """The content of ``summary.json``."""
    u = summary.utilisation
    return {
        "run": {
            "policy": result.policy,
            "oracle": result.oracle,
            "cqsim_oracle": result.cqsim_oracle,
            "trace": info.trace,
            "trace_why": info.why,
            "workload": info.workload,
            "seed": info.seed,
            "nodes": result.nodes,
            "jobs": len(result.outcomes),
            "window": {"start": u.start, "end": u.end, "hours": (u.end - u.start) / 3600.0},
            "wall_seconds": result.wall_seconds,
            "agenda_items": result.agenda_items,
            "agenda_items_per_second": result.agenda_items_per_second,
            "jobs_per_second": result.jobs_per_second,
        },
        "cleaning": list(info.cleaning),
        "trace": {"machine": info.machine, "offered_load": info.offered_load,
                  "reading": list(info.reading), "walltime_estimate": info.walltime_estimate,
                  "warnings": list(info.warnings)},
        "summary": summary.to_dict(),
    }


def write_summary_json(result: SimulationResult, summary: Summary, info: RunInfo,
                       path: Path) -> Path:
    """``summary.json``: see :func:`summary_document`."""
    path.write_text(json.dumps(summary_document(result, summary, info), indent=2) + "\n")
    return path


def write_outputs(result: SimulationResult, out: Path, *, info: RunInfo,
                  summary: Summary | None = None, plots: bool = True) -> list[Path]:
    """Write the CSV, the JSON and (unless ``plots`` is false) the PNGs into ``out``;
    returns the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    summary = summary if summary is not None else result.summary()
    written = [write_jobs_csv(result.outcomes, out / "jobs.csv"),
               write_summary_json(result, summary, info, out / "summary.json")]
    if plots:
        from sim.run.plots import write_plots  # matplotlib only when plots are wanted

        written.extend(write_plots(result, out, trace=info.trace, summary=summary))
    return written


def _num(x: float | None) -> str:
    """A number as the shortest text that reads back to the same float; empty for None."""
    if x is None:
        return ""
    return repr(float(x)) if x != int(x) else str(int(x))
