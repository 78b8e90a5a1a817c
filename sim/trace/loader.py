"""A cleaned job trace ready to replay, and :func:`load_trace`, the one way to get one from a file.

``load_trace`` recognises the format from the content (not the name): a Standard Workload
Format file (:mod:`sim.trace.formats.swf`), an ALCF ``DIM_JOB_COMPOSITE`` CSV
(:mod:`sim.trace.formats.alcf`), SLURM ``sacct --parsable2`` output
(:mod:`sim.trace.formats.sacct`) or a PBS accounting log (:mod:`sim.trace.formats.pbs`), any of
them plain or gzipped. It settles the machine and the unit of job sizes
(:mod:`sim.trace.machine`), then applies the cleaning rules of :mod:`sim.trace.cleaning` and
keeps their report with the trace.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from sim.trace.cache import RawTrace, cached_read
from sim.trace.cleaning import CleaningReport, MissingWalltime, Oversize, clean
from sim.trace.columns import JobTable, TraceError, TraceJob
from sim.trace.formats.swf import SwfHeader, read_swf
from sim.trace.formats.textio import numbered_lines
from sim.trace.machine import Machine, Unit, given_size, largest_machine, swf_machine

__all__ = ["CleaningReport", "Trace", "TraceError", "TraceJob", "detect_format", "load_trace"]

Format = Literal["swf", "alcf-csv", "sacct", "pbs", "synthetic"]
DEFAULT_MISSING_WALLTIME = "limit"
"""Jobs without a requested walltime get their queue's limit, as a batch system would."""


@dataclass(frozen=True, slots=True, eq=False)
class Trace:
    """Jobs to replay on a machine of ``nodes`` units, sorted by submit time.

    The simulator allocates whole units; the unit is ``machine.unit`` (``nodes``, or
    ``processors`` for an SWF trace read as the standard counts). Every job has a submit time,
    a size in ``1..nodes`` (the ``nodes`` column), a runtime ``> 0`` and a walltime ``> 0``;
    ids are unique. ``report`` says what cleaning did to the file's records, ``notes`` what
    reading did (job steps skipped, requeued runs folded ...); ``header`` is the SWF header
    when the source was SWF.
    """

    source: str
    format: Format
    nodes: int
    jobs: JobTable
    report: CleaningReport
    header: SwfHeader | None = None
    machine: Machine | None = None
    notes: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.jobs)

    def __iter__(self) -> Iterator[TraceJob]:
        return iter(self.jobs)

    @property
    def unit(self) -> Unit:
        """What job sizes and the machine size count."""
        return self.machine.unit if self.machine is not None else "nodes"

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
    """The format of ``path``, judged from its first non-blank line."""
    for number, text in numbered_lines(path):
        stripped = text.strip()
        if not stripped:
            continue
        if stripped.startswith(";"):
            return "swf"
        # the other formats' readers load only for files that are not SWF: a simulation
        # of an SWF trace is a whole command whose imports count (docs/model.md)
        from sim.trace.formats.alcf import MARKER
        from sim.trace.formats.pbs import is_pbs
        from sim.trace.formats.sacct import is_sacct

        if MARKER in stripped.upper() and "," in stripped:
            return "alcf-csv"
        if is_pbs(stripped):
            return "pbs"
        if is_sacct(stripped):
            return "sacct"
        first = stripped.split()[0]
        try:
            float(first)
        except ValueError:
            raise TraceError(str(path), number,
                             "this is neither an SWF record, an ALCF CSV header (which names "
                             "QUEUED_TIMESTAMP), sacct --parsable2 output nor a PBS "
                             "accounting record.") from None
        return "swf"
    raise TraceError(str(path), None, "the file is empty.")


def load_trace(path: str | Path, *, nodes: int | None = None, procs: int | None = None,
               unit: Unit | None = None, procs_per_node: int | None = None,
               missing_walltime: MissingWalltime = DEFAULT_MISSING_WALLTIME,
               oversize: Oversize = "drop", cap_runtime: bool = True,
               cache: bool = False, dependencies: bool = False) -> Trace:
    """Read and clean the trace at ``path``.

    The machine is ``nodes`` nodes or ``procs`` processors when given; otherwise an SWF file's
    header states it (``MaxProcs`` processors, or ``MaxNodes`` nodes with ``unit="nodes"``),
    and a file that states no size gets the size of its largest job. ``unit`` and
    ``procs_per_node`` are described in :mod:`sim.trace.machine`. The other options select
    the cleaning variants described in :mod:`sim.trace.cleaning`; ``dependencies`` keeps the
    preceding jobs a simulation may honour (its rule 9). With ``cache``, a file read
    before is taken from the cache of parsed traces (:mod:`sim.trace.cache`); the library
    leaves the user's cache directory alone unless asked, and the command line asks.
    """
    fmt = detect_format(path)
    header, raw, notes, machine = _read(path, fmt, nodes=nodes, procs=procs, unit=unit,
                                        procs_per_node=procs_per_node, cache=cache)
    table, report = clean(raw, nodes=machine.size, missing_walltime=missing_walltime,
                          oversize=oversize, cap_runtime=cap_runtime, unit=machine.unit,
                          dependencies=dependencies)
    return Trace(source=str(path), format=fmt, nodes=machine.size, jobs=table, report=report,
                 header=header, machine=machine, notes=notes)


def _read_log(path: str | Path, fmt: Format, processors: bool,
              procs_per_node: int | None) -> RawTrace:
    """A node-counting log's raw jobs and reading notes (``procs_per_node`` places a Cray PBS
    job that does not say how many of its processes share a node)."""
    from sim.trace.formats.alcf import read_alcf_csv
    from sim.trace.formats.pbs import parse_pbs
    from sim.trace.formats.sacct import parse_sacct

    if fmt == "alcf-csv":
        return RawTrace(None, read_alcf_csv(path))
    if fmt == "sacct":
        table, notes = parse_sacct(numbered_lines(path), source=str(path), processors=processors)
    else:
        table, notes = parse_pbs(numbered_lines(path), source=str(path), processors=processors,
                                 procs_per_node=procs_per_node)
    return RawTrace(None, table, notes)


def _read(path: str | Path, fmt: Format, *, nodes: int | None, procs: int | None,
          unit: Unit | None, procs_per_node: int | None, cache: bool
          ) -> tuple[SwfHeader | None, JobTable, tuple[str, ...], Machine]:
    """The raw jobs of a file in the chosen unit, with its header, notes and machine."""
    if fmt == "swf":
        found = cached_read(path, "swf", lambda: RawTrace(*read_swf(path)), cache=cache)
        assert found.header is not None
        machine, raw = swf_machine(found.header, found.table, nodes=nodes, procs=procs,
                                   unit=unit, procs_per_node=procs_per_node)
        return found.header, raw, (), machine
    wanted: Unit = unit or "nodes"
    processors = wanted == "processors"
    if fmt == "alcf-csv" and processors:
        raise ValueError("an ALCF job log counts nodes only; use --unit nodes")
    variant = f"{fmt}-{wanted}" + (f"-{procs_per_node}" if fmt == "pbs" and procs_per_node else "")
    found = cached_read(path, variant, lambda: _read_log(path, fmt, processors, procs_per_node),
                        cache=cache)
    raw, notes = found.table, found.notes
    ppn = procs_per_node
    size = given_size(nodes, procs, wanted, ppn) if (nodes, procs) != (None, None) else None
    if size is not None:
        source = "given by --nodes" if nodes is not None else "given by --procs"
        return None, raw, notes, Machine(size, wanted, source, ppn)
    return None, raw, notes, largest_machine(raw, wanted, ppn)
