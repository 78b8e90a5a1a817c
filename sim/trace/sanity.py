"""Checks that make a wrong answer loud: a trace that overloads its machine, a machine size
that is probably wrong, cleaning that threw most of the trace away.

A simulator's worst failure is a confident number that cannot be right. These checks run
before a simulation and produce plain sentences that the command prints and ``summary.json``
keeps (:class:`TraceCheck`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sim.trace.loader import Trace

OVERSIZE_SHARE = 0.01
"""Above this share of jobs dropped as larger than the machine, the machine size is suspect."""
DROPPED_SHARE = 0.5
"""Above this share of jobs dropped by cleaning, the run says so."""


@dataclass(frozen=True, slots=True)
class TraceCheck:
    """What the checks found: the offered load (NaN when the submit span is zero) and the
    warnings, one sentence each."""

    offered_load: float
    warnings: tuple[str, ...]

    def load_line(self, trace: Trace) -> str:
        """``Offered load: 76% of 4,360 nodes over 363.7 days.``"""
        if math.isnan(self.offered_load):
            return "Offered load: unknown (every job is submitted at the same instant)."
        days = (trace.last_submit - trace.first_submit) / 86400
        return (f"Offered load: {self.offered_load:.0%} of {trace.nodes:,} {trace.unit} over "
                f"{days:,.1f} days.")

    def to_dict(self) -> dict[str, object]:
        load = None if math.isnan(self.offered_load) else self.offered_load
        return {"offered_load": load, "warnings": list(self.warnings)}


def check_trace(trace: Trace) -> TraceCheck:
    """Run every check on a loaded trace."""
    load = trace.offered_load()
    warnings: list[str] = []
    if load > 1:
        warnings.append(
            f"The offered load is {load:.0%} of the machine: more work arrives than it can do, "
            "so the queue grows without bound and the waits measure the overload, not the "
            "policy.")
    report, machine = trace.report, trace.machine
    unit = trace.unit
    if report.records and report.oversize_dropped / report.records > OVERSIZE_SHARE:
        share = report.oversize_dropped / report.records
        where = machine.source if machine is not None else "the caller"
        fields = ""
        if machine is not None and machine.fields:
            fields = f" (header fields read: {', '.join(machine.fields)})"
        warnings.append(
            f"{report.oversize_dropped:,} jobs ({share:.1%}) were dropped as larger than the "
            f"machine of {trace.nodes:,} {unit}, so the machine size is probably wrong: it "
            f"came from {where}{fields}. Check --unit, or give the size with --procs or "
            "--nodes.")
    if machine is not None and machine.source.startswith("the largest job"):
        warnings.append(
            f"The trace states no machine size, so the machine is taken to be its largest job "
            f"({trace.nodes:,} {unit}); give the real size with --nodes or --procs.")
    if report.records and report.dropped / report.records > DROPPED_SHARE:
        warnings.append(
            f"Cleaning dropped {report.dropped:,} of {report.records:,} jobs "
            f"({report.dropped / report.records:.0%}); the rest may not represent the "
            "workload.")
    return TraceCheck(offered_load=load, warnings=tuple(warnings))
