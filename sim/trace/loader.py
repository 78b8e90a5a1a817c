"""A cleaned job trace ready to replay, and :func:`load_trace`, the one way to get one from a file.

``load_trace`` recognises the format from the content (not the name): a Standard Workload
Format file (:mod:`sim.trace.swf`) or an ALCF ``DIM_JOB_COMPOSITE`` CSV (:mod:`sim.trace.alcf`),
either of them plain or gzipped. It then applies the cleaning rules of :mod:`sim.trace.cleaning`
and keeps their report with the trace.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from sim.trace.alcf import MARKER, read_alcf_csv
from sim.trace.cleaning import CleaningReport, MissingWalltime, Oversize, clean
from sim.trace.columns import JobTable, TraceError, TraceJob
from sim.trace.swf import SwfHeader, read_swf
from sim.trace.textio import numbered_lines

__all__ = ["CleaningReport", "Trace", "TraceError", "TraceJob", "detect_format", "load_trace"]

Format = Literal["swf", "alcf-csv", "synthetic"]


@dataclass(frozen=True, slots=True, eq=False)
class Trace:
    """Jobs to replay on a machine of ``nodes`` nodes, sorted by submit time.

    Every job has a submit time, a size in ``1..nodes`` (the ``nodes`` column), a runtime
    ``> 0`` and a walltime ``> 0``; ids are unique. ``report`` says what cleaning did to the
    file's records; ``header`` is the SWF header when the source was SWF.
    """

    source: str
    format: Format
    nodes: int
    jobs: JobTable
    report: CleaningReport
    header: SwfHeader | None = None

    def __len__(self) -> int:
        return len(self.jobs)

    def __iter__(self) -> Iterator[TraceJob]:
        return iter(self.jobs)

    @property
    def first_submit(self) -> float:
        return float(self.jobs.submit[0]) if len(self.jobs) else 0.0

    @property
    def last_submit(self) -> float:
        return float(self.jobs.submit[-1]) if len(self.jobs) else 0.0

    def offered_load(self) -> float:
        """The work submitted per unit of capacity over the submit span:
        ``sum(runtime * size) / (nodes * (last submit - first submit))``."""
        span = self.last_submit - self.first_submit
        if span <= 0:
            return float("nan")
        work = float(np.dot(self.jobs.runtime, self.jobs.nodes.astype(np.float64)))
        return work / (self.nodes * span)


def detect_format(path: str | Path) -> Format:
    """``"swf"`` or ``"alcf-csv"``, judged from the first non-blank line."""
    for number, text in numbered_lines(path):
        stripped = text.strip()
        if not stripped:
            continue
        if stripped.startswith(";"):
            return "swf"
        if MARKER in stripped.upper() and "," in stripped:
            return "alcf-csv"
        first = stripped.split()[0]
        try:
            float(first)
        except ValueError:
            raise TraceError(str(path), number,
                             "this is neither an SWF record nor an ALCF CSV header "
                             "(which names QUEUED_TIMESTAMP).") from None
        return "swf"
    raise TraceError(str(path), None, "the file is empty.")


def load_trace(path: str | Path, *, nodes: int | None = None,
               missing_walltime: MissingWalltime = "drop", oversize: Oversize = "drop",
               cap_runtime: bool = True) -> Trace:
    """Read and clean the trace at ``path``.

    ``nodes`` is the machine size. Without it, an SWF file's ``MaxNodes`` (else
    ``MaxProcs``) header is used; a file that states no size gets the size of its largest job
    (the report's ``machine_nodes`` records the figure used). The other options select the
    cleaning variants described in :mod:`sim.trace.cleaning`.
    """
    fmt = detect_format(path)
    header: SwfHeader | None = None
    if fmt == "swf":
        header, raw = read_swf(path)
    else:
        raw = read_alcf_csv(path)
    machine = nodes or (header.machine_nodes if header else None) or _largest(raw)
    table, report = clean(raw, nodes=machine, missing_walltime=missing_walltime,
                          oversize=oversize, cap_runtime=cap_runtime)
    return Trace(source=str(path), format=fmt, nodes=machine, jobs=table, report=report,
                 header=header)


def _largest(raw: JobTable) -> int:
    sizes = np.where(raw.nodes == -1, raw.requested_nodes, raw.nodes)
    return max(int(sizes.max()), 1) if len(sizes) else 1
