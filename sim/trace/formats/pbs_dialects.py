"""The sizes of a PBS job as each dialect of PBS records them in its accounting ``E`` record.

Three families of PBS write the same ``key=value`` records but count a job's nodes in
different fields, and a field of the same name may mean different things:

- **PBS Professional / OpenPBS** asks in chunks: ``Resource_List.select=2:ncpus=36+1:ncpus=4``
  is 3 chunks, and ``Resource_List.nodect`` is the chunk count. The hosts it ran on are those
  of ``exec_host`` (``n001/0*36+n002/0*36``); with ``place=pack`` two chunks may share one.
  Size: the distinct ``exec_host`` hosts, else ``nodect``, else the chunk count; in
  processors, ``Resource_List.ncpus`` (else ``resources_used.ncpus``).
- **Torque** asks ``Resource_List.nodes=2:ppn=16`` (or named hosts, ``n1:ppn=2+n2:ppn=2``)
  and, from Torque 4 on, records what the job got: ``unique_node_count`` hosts and
  ``total_execution_slots`` cores. Size: ``unique_node_count``, else the distinct
  ``exec_host`` hosts (``n1/0-15+n2/0-15``), else ``nodect``, else the count in ``nodes``; in
  processors, ``total_execution_slots``, else the sum of ``N x ppn`` in ``nodes``, else
  ``Resource_List.ncpus``.
- **Cray PBS** (PBS on ALPS) runs the job script on a MOM node and the application on compute
  nodes: ``nodect`` (and ``select``, ``exec_host``) count the MOM node, 1 for any job. The
  width is ``Resource_List.mppwidth`` processing elements at ``mppnppn`` per node, each
  ``mppdepth`` threads wide (1 when absent). Size: ``ceil(mppwidth / mppnppn)`` nodes, else,
  without ``mppnppn``, ``ceil(mppwidth x mppdepth / cores per node)`` when the cores per node
  are given (``--procs-per-node``); in processors, ``mppwidth x mppdepth``.

A record is Cray when it has ``mppwidth``; Torque when it has ``unique_node_count``,
``total_execution_slots``, ``Resource_List.nodes`` or ``neednodes``; PBS Pro when it has
``select`` or ``exec_vnode``; a record with none of these (only ``nodect``, say) fits any.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Literal

Dialect = Literal["pbspro", "torque", "cray"]
DIALECT_NAMES: dict[Dialect, str] = {"pbspro": "PBS Pro", "torque": "Torque", "cray": "Cray PBS"}
_TORQUE_KEYS = ("unique_node_count", "total_execution_slots", "Resource_List.nodes",
                "Resource_List.neednodes")


class DialectError(ValueError):
    """A field of a record is not what its dialect writes; the message names the field."""


@dataclass(frozen=True, slots=True)
class Size:
    """A job's size: what it ran on (``ran``) and what it asked for (``asked``), NaN when
    unknown, and the disagreements found between its fields (keys of :data:`DISAGREEMENTS`)."""

    ran: float
    asked: float
    disagreements: tuple[str, ...] = ()


DISAGREEMENTS = {
    "nodect-select": "PBS Pro records whose nodect differs from their select's chunk count "
                     "(nodect kept)",
    "hosts-nodect": "PBS Pro records that ran on a different number of hosts (exec_host) than "
                    "their nodect (the hosts kept)",
    "unique-nodect": "Torque records whose unique_node_count differs from their nodect "
                     "(unique_node_count kept)",
    "slots-ppn": "Torque records whose total_execution_slots differs from nodes x ppn "
                 "(total_execution_slots kept)",
    "cray-no-nppn": "Cray PBS records without mppnppn and no --procs-per-node to place "
                    "mppwidth x mppdepth on (size unknown)",
}
"""The sentence counted for each kind of disagreement, after the count."""


def dialect_of(f: dict[str, str]) -> Dialect | None:
    """The dialect a record's fields belong to, ``None`` when they fit any."""
    if "Resource_List.mppwidth" in f:
        return "cray"
    if any(k in f for k in _TORQUE_KEYS):
        return "torque"
    if "Resource_List.select" in f or "exec_vnode" in f:
        return "pbspro"
    return None


def size_of(f: dict[str, str], dialect: Dialect | None, *, processors: bool,
            procs_per_node: int | None) -> Size:
    """The size of the job whose ``E`` record has fields ``f``, read as ``dialect``. Raises
    :class:`DialectError` for a field that is not a number or a statement of its kind."""
    if dialect == "cray":
        return _cray(f, processors, procs_per_node)
    if dialect == "torque":
        return _torque(f, processors)
    return _pbspro(f, processors)


def _pbspro(f: dict[str, str], processors: bool) -> Size:
    if processors:
        ncpus = _number(f, "Resource_List.ncpus")
        return Size(ncpus if not math.isnan(ncpus) else _number(f, "resources_used.ncpus"),
                    ncpus)
    nodect, chunks = _number(f, "Resource_List.nodect"), chunk_count(f.get("Resource_List.select"))
    asked = nodect if not math.isnan(nodect) else chunks
    hosts = host_count(f.get("exec_host"))
    said = []
    if not math.isnan(nodect) and not math.isnan(chunks) and nodect != chunks:
        said.append("nodect-select")
    if not math.isnan(hosts) and not math.isnan(asked) and hosts != asked:
        said.append("hosts-nodect")
    return Size(hosts if not math.isnan(hosts) else asked, asked, tuple(said))


def _torque(f: dict[str, str], processors: bool) -> Size:
    counted, per_node = _nodes_spec(f.get("Resource_List.nodes"))
    nodect = _number(f, "Resource_List.nodect")
    if processors:
        slots = _number(f, "total_execution_slots")
        asked = per_node if not math.isnan(per_node) else _number(f, "Resource_List.ncpus")
        said = ("slots-ppn",) if not math.isnan(slots) and not math.isnan(per_node) \
            and slots != per_node else ()
        return Size(slots if not math.isnan(slots) else asked, asked, said)
    unique = _number(f, "unique_node_count")
    asked = nodect if not math.isnan(nodect) else counted
    ran = unique if not math.isnan(unique) else host_count(f.get("exec_host"))
    said = ("unique-nodect",) if not math.isnan(unique) and not math.isnan(nodect) \
        and unique != nodect else ()
    return Size(ran if not math.isnan(ran) else asked, asked, said)


def _cray(f: dict[str, str], processors: bool, procs_per_node: int | None) -> Size:
    width = _number(f, "Resource_List.mppwidth")
    nppn = _number(f, "Resource_List.mppnppn")
    depth = _number(f, "Resource_List.mppdepth")
    depth = 1.0 if math.isnan(depth) or depth < 1 else depth
    if processors:
        cores = width * depth
        return Size(cores, cores)
    if not math.isnan(nppn) and nppn > 0:
        nodes = float(math.ceil(width / nppn))
    elif procs_per_node:
        nodes = float(math.ceil(width * depth / procs_per_node))
    else:
        return Size(math.nan, math.nan, ("cray-no-nppn",))
    return Size(nodes, nodes)


def _number(f: dict[str, str], key: str) -> float:
    text = f.get(key)
    if text is None or text == "":
        return math.nan
    try:
        return float(text)
    except ValueError:
        raise DialectError(f"{key} should be a number, found {text!r}.") from None


def chunk_count(select: str | None) -> float:
    """The chunk count of a PBS Pro select statement: ``2:ncpus=36+1:ncpus=4`` is 3."""
    if not select:
        return math.nan
    total = 0
    for chunk in select.split("+"):
        head = chunk.split(":", 1)[0]
        if head.isdigit():
            total += int(head)
        elif "=" in head:
            total += 1  # a chunk without a count is one chunk
        else:
            raise DialectError(f"Resource_List.select {select!r} is not a select statement "
                               "like 2:ncpus=36.")
    return float(total)


def host_count(exec_host: str | None) -> float:
    """The distinct hosts of an ``exec_host`` list (``n1/0*36+n2/0*36``, ``n1/0-15+n2/0``)."""
    if not exec_host:
        return math.nan
    return float(len({part.split("/", 1)[0] for part in exec_host.split("+") if part}))


def _nodes_spec(nodes: str | None) -> tuple[float, float]:
    """Torque's ``nodes`` request as (nodes, nodes x ppn): ``2:ppn=16`` is (2, 32); a named
    host (``n1:ppn=2``) is one node; ``ppn`` is 1 when absent."""
    if not nodes:
        return math.nan, math.nan
    count = cores = 0
    for part in nodes.split("+"):
        words = part.split(":")
        n = int(words[0]) if words[0].isdigit() else 1
        ppn = 1
        for word in words[1:]:
            key, _, value = word.partition("=")
            if key == "ppn":
                if not value.isdigit():
                    raise DialectError(f"Resource_List.nodes {nodes!r} has ppn={value!r}, "
                                       "not a whole number.")
                ppn = int(value)
        count += n
        cores += n * ppn
    return float(count), float(cores)


def mixed_sentence(dialects: Counter[Dialect], kept: Dialect) -> str:
    """The reading note of a log that mixes dialects: what was read, what was skipped."""
    parts = ", ".join(f"{n} {DIALECT_NAMES[d]}" for d, n in dialects.most_common())
    skipped = sum(n for d, n in dialects.items() if d != kept)
    return (f"the log mixes PBS dialects ({parts} records): read as {DIALECT_NAMES[kept]}, "
            f"the most common, and skipped the other {skipped} records")
