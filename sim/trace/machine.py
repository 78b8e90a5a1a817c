"""The machine a trace is replayed on: its size, the unit job sizes count, and where the size
came from.

The Standard Workload Format counts job sizes in **processors** (field 5, allocated
processors; field 8, requested processors), and its header gives the machine as ``MaxProcs``
processors in ``MaxNodes`` nodes. A trace is replayed in one of two units:

- ``processors`` (the SWF default): a job's size is its processor count and the machine is
  ``MaxProcs`` processors;
- ``nodes``: a job's size is converted to whole nodes, rounding up, with ``procs_per_node``
  processors a node (by default ``MaxProcs / MaxNodes`` when that is a whole number), and the
  machine is ``MaxNodes`` nodes. Machines that allocate whole nodes need this, and so does
  the on-demand model, which preempts nodes.

When the header says one processor per node (``MaxProcs == MaxNodes``, as Theta's SWF files,
which write nodes, do; or only ``MaxNodes`` is given), the two units are the same and the
trace is described in nodes. The ALCF, SLURM and PBS logs count nodes (SLURM's ``AllocCPUS``
and PBS's ``ncpus`` count processors when ``unit="processors"`` is asked for).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from sim.trace.columns import JobTable
from sim.trace.formats.swf import SwfHeader

Unit = Literal["processors", "nodes"]
UNITS: tuple[Unit, ...] = ("processors", "nodes")


@dataclass(frozen=True, slots=True)
class Machine:
    """The machine a trace runs on: ``size`` units of ``unit``.

    ``procs_per_node`` is the processors in a node when known (sizes were divided by it when
    ``unit`` is ``nodes`` and it is above 1). ``source`` says in words where the size came
    from, naming the header fields read (``"SWF header MaxProcs: 1024"``), the caller's
    ``--nodes``, or the largest job. ``fields`` lists the header fields read, for the warnings.
    """

    size: int
    unit: Unit
    source: str
    procs_per_node: int | None = None
    fields: tuple[str, ...] = ()

    def describe(self) -> str:
        """``1,024 processors (SWF header MaxProcs: 1024)``."""
        return f"{self.size:,} {self.unit} ({self.source})"

    def to_dict(self) -> dict[str, object]:
        return {"size": self.size, "unit": self.unit, "source": self.source,
                "procs_per_node": self.procs_per_node, "header_fields": list(self.fields)}


def swf_machine(header: SwfHeader, raw: JobTable, *, nodes: int | None = None,
                procs: int | None = None, unit: Unit | None = None,
                procs_per_node: int | None = None) -> tuple[Machine, JobTable]:
    """The machine an SWF trace runs on, and its jobs with sizes in that machine's unit.

    ``nodes`` or ``procs`` (the caller's ``--nodes`` / ``--procs``) override the header.
    """
    max_procs, max_nodes = header.max_procs, header.max_nodes
    ppn = procs_per_node if procs_per_node is not None else _header_ppn(max_procs, max_nodes)
    if ppn is not None and ppn < 1:
        raise ValueError(f"--procs-per-node must be a positive number, not {ppn}")
    wanted: Unit = unit or "processors"
    if wanted == "processors" and ppn == 1:
        wanted = "nodes"  # one processor a node: processors and nodes are the same thing
    read = tuple(k for k, v in (("MaxProcs", max_procs), ("MaxNodes", max_nodes))
                 if v is not None)
    stated = ", ".join(f"{k}: {v}" for k, v in (("MaxProcs", max_procs),
                                                 ("MaxNodes", max_nodes)) if v is not None)
    if wanted == "nodes":
        if ppn is None:
            raise ValueError(
                "--unit nodes needs the processors in a node, which the SWF header does not "
                f"give (MaxProcs {_text(max_procs)}, MaxNodes {_text(max_nodes)}); pass "
                "--procs-per-node")
        table = to_nodes(raw, ppn) if ppn > 1 else raw
        size = given_size(nodes, procs, "nodes", ppn)
        if size is not None:
            return Machine(size, "nodes", size_source(nodes), ppn), table
        if max_nodes is not None:
            return Machine(max_nodes, "nodes", f"SWF header {stated}", ppn, read), table
        if max_procs is not None:
            return Machine(max_procs // ppn, "nodes", f"SWF header {stated}, {ppn} processors "
                           "a node", ppn, read), table
        return largest_machine(table, "nodes", ppn), table
    size = given_size(nodes, procs, "processors", ppn)
    if size is not None:
        return Machine(size, "processors", size_source(nodes), ppn), raw
    if max_procs is not None:
        return Machine(max_procs, "processors", f"SWF header {stated}", ppn, read), raw
    return largest_machine(raw, "processors", ppn), raw


def given_size(nodes: int | None, procs: int | None, unit: Unit,
               procs_per_node: int | None) -> int | None:
    """The caller's machine size in ``unit``, from ``--nodes`` or ``--procs``, or ``None``."""
    if nodes is not None and procs is not None:
        raise ValueError("give the machine size once: --nodes or --procs, not both")
    if unit == "nodes":
        if procs is None:
            return nodes
        if procs_per_node is None:
            raise ValueError("--procs in nodes needs --procs-per-node")
        return procs // procs_per_node
    if nodes is None:
        return procs
    if procs_per_node is None:
        raise ValueError("the trace counts processors, so give the machine as --procs (or "
                         "--nodes with --procs-per-node, or --unit nodes)")
    return nodes * procs_per_node


def size_source(nodes: int | None) -> str:
    return "given by --nodes" if nodes is not None else "given by --procs"


def _header_ppn(max_procs: int | None, max_nodes: int | None) -> int | None:
    if max_procs is not None and max_nodes is not None:
        return max_procs // max_nodes if max_nodes > 0 and max_procs % max_nodes == 0 else None
    if max_procs is None and max_nodes is not None:
        return 1  # only MaxNodes: one processor a node, as the Theta files assume
    return None


def to_nodes(table: JobTable, procs_per_node: int) -> JobTable:
    """Sizes in processors converted to whole nodes, rounding up (unknown stays unknown)."""
    def convert(sizes: np.ndarray) -> np.ndarray:
        return np.where(sizes > 0, -(-sizes // procs_per_node), sizes)
    return table.with_columns(nodes=convert(table.nodes),
                              requested_nodes=convert(table.requested_nodes))


def largest_machine(raw: JobTable, unit: Unit, procs_per_node: int | None = None) -> Machine:
    """A machine just big enough for the largest job: the guess when nothing states a size."""
    sizes = np.where(raw.nodes == -1, raw.requested_nodes, raw.nodes)
    size = max(int(sizes.max()), 1) if len(sizes) else 1
    return Machine(size, unit, "the largest job, since the trace states no machine size",
                   procs_per_node)


def _text(value: int | None) -> str:
    return "absent" if value is None else str(value)
