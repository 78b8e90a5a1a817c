"""The hardware's neighbourhoods: which cores sit next to which GPU, and which nodes next to
which.

- **GPUs and cores** (:func:`parse_nvidia_topology`, :func:`gpu_cores`): ``nvidia-smi topo -m``
  prints, per GPU, its ``CPU Affinity`` (the CPU ids of its NUMA domain). They become, per GPU
  of the allocation, the node's core numbers (``0 ..`` among the CPUs this process may use)
  that sit next to it, so that a share's cores are taken next to its GPUs.
- **Blocks of nodes** (:func:`parse_slurm_topology`, :func:`blocks_of`): SLURM's
  ``scontrol show topology`` names each leaf switch and its nodes; the allocation's nodes under
  one leaf switch form a block. Without it, blocks are runs of hostnames that differ only in
  their number, in that number's order, cut every ``block_size`` nodes.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable, Sequence

from metaq_py.ranges import parse_cpu_list

__all__ = ["HOSTNAME_BLOCK", "blocks_of", "gpu_cores", "hostname_blocks", "nvidia_affinity",
           "parse_nvidia_topology", "parse_slurm_topology"]

HOSTNAME_BLOCK = 16
"""Nodes per block when only hostnames tell which nodes are neighbours (a cabinet chassis
holds 8 to 16 nodes on the machines metaq is for)."""

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def parse_nvidia_topology(text: str) -> dict[int, tuple[int, ...]]:
    """GPU index -> the CPU ids of its ``CPU Affinity`` column in ``nvidia-smi topo -m``
    output (GPUs whose affinity is ``N/A`` are left out). ``ValueError`` with one sentence
    when the text has no such column."""
    lines = [_ANSI.sub("", line).rstrip("\n") for line in text.splitlines()]
    header = next((line for line in lines if "CPU Affinity" in line), None)
    if header is None:
        raise ValueError("the nvidia-smi topology has no CPU Affinity column")
    columns = [c.strip() for c in header.split("\t")]
    at = columns.index("CPU Affinity")
    found: dict[int, tuple[int, ...]] = {}
    for line in lines:
        cells = [c.strip() for c in line.split("\t")]
        label = re.fullmatch(r"GPU([0-9]+)", cells[0])
        if label is None or len(cells) <= at:
            continue
        if cells[at] and cells[at] != "N/A":
            found[int(label.group(1))] = parse_cpu_list(cells[at])
    return found


def gpu_cores(affinity: dict[int, tuple[int, ...]], gpu_ids: Sequence[str],
              cpus: Sequence[int]) -> tuple[tuple[int, ...], ...]:
    """For each GPU of ``gpu_ids`` (in that order), the node's core numbers next to it: the
    positions in ``cpus`` (the CPU ids metaq may use, ascending) of its affinity's CPUs.
    ``()`` when a GPU's affinity is unknown (no pairing at all, rather than a partial one)."""
    position = {c: i for i, c in enumerate(cpus)}
    out = []
    for gid in gpu_ids:
        if not gid.isdigit() or int(gid) not in affinity:
            return ()
        out.append(tuple(position[c] for c in affinity[int(gid)] if c in position))
    return tuple(out)


def nvidia_affinity(run: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run,
                    ) -> dict[int, tuple[int, ...]]:
    """This node's GPU -> CPU affinity from ``nvidia-smi topo -m``; empty when there is no
    ``nvidia-smi`` or it does not answer readably."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {}
    try:
        done = run([exe, "topo", "-m"], capture_output=True, text=True, timeout=20, check=False)
        return parse_nvidia_topology(done.stdout) if done.returncode == 0 else {}
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return {}


def parse_slurm_topology(text: str) -> list[tuple[str, str]]:
    """``(switch, nodes expression)`` for each leaf switch of ``scontrol show topology``
    (lines ``SwitchName=s1 Level=0 LinkSpeed=1 Nodes=n[1-2]``); switches of a higher level
    are left out."""
    out = []
    for line in text.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        if fields.get("Level") == "0" and fields.get("SwitchName") and fields.get("Nodes"):
            out.append((fields["SwitchName"], fields["Nodes"]))
    return out


_NUMBERED = re.compile(r"^(.*?)([0-9]+)([^0-9]*)$")


def hostname_blocks(nodes: Sequence[str], block_size: int) -> list[list[str]]:
    """Blocks by hostname order: nodes sorted by (prefix, number), cut into runs of consecutive
    numbers of at most ``block_size`` nodes."""
    def key(host: str) -> tuple[str, int, str]:
        m = _NUMBERED.match(host)
        return (m.group(1), int(m.group(2)), m.group(3)) if m else (host, -1, "")

    blocks: list[list[str]] = []
    last: tuple[str, int, str] | None = None
    for host in sorted(nodes, key=key):
        k = key(host)
        near = last is not None and k[0] == last[0] and k[2] == last[2] and k[1] == last[1] + 1
        if not blocks or not near or len(blocks[-1]) >= block_size:
            blocks.append([])
        blocks[-1].append(host)
        last = k
    return blocks


def blocks_of(nodes: Sequence[str], switches: Sequence[tuple[str, Sequence[str]]],
              block_size: int) -> tuple[tuple[int, ...], ...]:
    """The allocation's node indexes grouped into blocks: one per leaf switch holding some of
    ``nodes`` (``switches`` as switch name and its expanded host names), else by hostname order
    (:func:`hostname_blocks`). A node under no switch is a block of its own."""
    index = {h: i for i, h in enumerate(nodes)}
    blocks: list[tuple[int, ...]] = []
    if switches:
        seen: set[str] = set()
        for _, hosts in switches:
            mine = tuple(index[h] for h in hosts if h in index and h not in seen)
            seen.update(hosts)
            if mine:
                blocks.append(tuple(sorted(mine)))
        blocks += [(index[h],) for h in nodes if h not in seen]
        return tuple(blocks)
    return tuple(tuple(sorted(index[h] for h in b)) for b in hostname_blocks(nodes, block_size))
