"""Writing a loaded trace as SWF, so that other simulators read what this one reads.

What is written is the trace as replayed: cleaned, in its unit. Submit times start at 0 and
the header's ``UnixStartTime`` holds the first submit's epoch seconds, as the standard asks.
The header states the machine: a trace in processors gets ``MaxProcs`` (and ``MaxNodes``
when the processors a node are known); a trace in nodes gets ``MaxNodes``, with ``MaxProcs``
equal to it, so that sizes (then nodes) and the machine agree for any SWF reader, as in
Theta's files. ``; Note:`` lines record the source, the unit, the reading notes and the
cleaning sentences. Users, groups, accounts, queues and the other identity labels are
numbered, as the Parallel Workloads Archive does (:mod:`sim.trace.formats.anonymise`), unless
``keep_names``; the header then names no file either, since a log's name may be a site's or a
person's.
"""

from __future__ import annotations

from pathlib import Path

from sim.trace.formats.anonymise import anonymise
from sim.trace.formats.swf import SwfHeader, write_swf
from sim.trace.loader import Trace


def swf_header(trace: Trace, *, keep_names: bool = False) -> SwfHeader:
    """The header that describes ``trace``'s machine and history (naming its file only with
    ``keep_names``)."""
    start = int(trace.first_submit)
    origin = f"from {Path(trace.source).name} " if keep_names else ""
    entries: list[tuple[str, str]] = [
        ("Version", "2.2"),
        ("Computer", f"converted by metaq trace convert {origin}({trace.format})"),
        ("UnixStartTime", str(start)),
    ]
    machine = trace.machine
    if not keep_names:
        entries.append(("Note", "anonymised: each user, group, account, queue and partition "
                                "is a number, in order of first appearance"))
    if trace.unit == "processors":
        entries.append(("MaxProcs", str(trace.nodes)))
        if machine is not None and machine.procs_per_node:
            entries.append(("MaxNodes", str(trace.nodes // machine.procs_per_node)))
    else:
        entries += [("MaxNodes", str(trace.nodes)), ("MaxProcs", str(trace.nodes))]
    entries.append(("MaxJobs", str(len(trace))))
    entries.append(("MaxRecords", str(len(trace))))
    entries.append(("Note", f"job sizes count {trace.unit}"
                    + (f"; machine size {machine.source}" if machine is not None else "")))
    for line in (*trace.notes, *trace.report.lines()):
        entries.append(("Note", f"reading {line}"))
    return SwfHeader(unix_start_time=start, entries=tuple(entries))


def convert_to_swf(trace: Trace, target: str | Path, *, keep_names: bool = False) -> Path:
    """Write ``trace`` as SWF at ``target`` (gzipped when it ends in ``.gz``), anonymised
    unless ``keep_names``."""
    jobs = trace.jobs.with_columns(submit=trace.jobs.submit - int(trace.first_submit))
    if not keep_names:
        jobs = anonymise(jobs)
    write_swf(jobs, target, header=swf_header(trace, keep_names=keep_names))
    return Path(target)
