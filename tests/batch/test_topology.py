"""The hardware's neighbourhoods: ``nvidia-smi topo -m`` (a sample written byte for byte as
nvidia-smi 535 prints it on a Perlmutter GPU node, underline escapes and tabs included),
``scontrol show topology`` and hostname blocks; and shares taking cores next to their GPUs."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from metaq_py.batch.topology import (
    blocks_of,
    gpu_cores,
    hostname_blocks,
    parse_nvidia_topology,
    parse_slurm_topology,
)
from metaq_py.policy.shares import NodeLoad, NodeShape

SAMPLE = (Path(__file__).parent / "nvidia_topo_perlmutter.txt").read_text()


def test_the_cpu_affinity_column_of_nvidia_smi() -> None:
    found = parse_nvidia_topology(SAMPLE)
    assert sorted(found) == [0, 1, 2, 3]
    assert found[0] == tuple(range(48, 64)) + tuple(range(112, 128))
    assert found[3] == tuple(range(16)) + tuple(range(64, 80))


def test_a_topology_without_the_column_is_one_sentence() -> None:
    with pytest.raises(ValueError, match="no CPU Affinity column"):
        parse_nvidia_topology("\tGPU0\nGPU0\t X \n")


def test_gpu_cores_are_positions_among_the_usable_cpus() -> None:
    found = parse_nvidia_topology(SAMPLE)
    # a job holding CPUs 0-63 only (no hyperthreads): GPU 3's neighbours are cores 0-15
    near = gpu_cores(found, ("0", "3"), tuple(range(64)))
    assert near == (tuple(range(48, 64)), tuple(range(16)))
    # a job holding CPUs 16-31 and 48-63: positions 0-15 are CPUs 16-31 (GPU 2's)
    cpus = tuple(range(16, 32)) + tuple(range(48, 64))
    assert gpu_cores(found, ("2", "0"), cpus) == (tuple(range(16)), tuple(range(16, 32)))
    assert gpu_cores(found, ("GPU-uuid",), cpus) == ()


def test_a_share_takes_the_cores_next_to_its_gpu() -> None:
    near = gpu_cores(parse_nvidia_topology(SAMPLE), ("0", "1", "2", "3"), tuple(range(64)))
    load = NodeLoad(0, NodeShape(64, 4, 0, near))
    first = load.add("a", 8, 1, 10.0, 10.0)  # GPU 0 sits next to cores 48-63
    assert first.gpus == (0,) and first.cores == tuple(range(48, 56))
    cpu = load.add("b", 4, 0, 10.0, 10.0)  # next to no free GPU: GPU 0's remaining cores
    assert cpu.cores == tuple(range(56, 60))
    second = load.add("c", 20, 1, 10.0, 10.0)  # GPU 1: 32-47, then the rest
    assert second.gpus == (1,) and set(range(32, 48)) <= set(second.cores)
    assert not set(first.cores) & set(second.cores) & set(cpu.cores)


@given(st.lists(st.tuples(st.integers(1, 20), st.integers(0, 2)), max_size=30))
def test_paired_shares_never_get_a_core_twice(asks: list[tuple[int, int]]) -> None:
    near = ((0, 1, 2, 3, 4, 5, 6, 7), (8, 9, 10, 11), (12, 13, 14, 15))
    load = NodeLoad(0, NodeShape(16, 3, 1, near))
    given: set[int] = set()
    for i, (cores, gpus) in enumerate(asks):
        if load.fits(cores, gpus):
            placed = load.add(i, cores, gpus, 1.0, 1.0)
            assert len(placed.cores) == cores and not given & set(placed.cores)
            given |= set(placed.cores)
    assert sorted(given | set(load.free_cores)) == list(range(16))


TOPOLOGY = """\
SwitchName=s0 Level=0 LinkSpeed=1 Nodes=n[1-2]
SwitchName=s1 Level=0 LinkSpeed=1 Nodes=n[3-4]
SwitchName=top Level=1 LinkSpeed=1 Nodes=n[1-4] Switches=s[0-1]
"""


def test_the_leaf_switches_of_scontrol_show_topology() -> None:
    assert parse_slurm_topology(TOPOLOGY) == [("s0", "n[1-2]"), ("s1", "n[3-4]")]
    switches = [("s0", ("n1", "n2")), ("s1", ("n3", "n4"))]
    assert blocks_of(("n4", "n1", "n3", "n2", "x"), switches, 16) == ((1, 3), (0, 2), (4,))


def test_without_switches_blocks_follow_hostname_numbers() -> None:
    nodes = ("nid0010", "nid0002", "nid0003", "nid0001", "nid0011", "login")
    assert hostname_blocks(nodes, 2) == [["login"], ["nid0001", "nid0002"], ["nid0003"],
                                         ["nid0010", "nid0011"]]
    assert blocks_of(nodes, [], 16) == ((5,), (1, 2, 3), (0, 4))


@given(st.lists(st.integers(0, 60), unique=True, min_size=1, max_size=30), st.integers(1, 8))
def test_hostname_blocks_hold_every_node_once(numbers: list[int], size: int) -> None:
    nodes = tuple(f"c{n:03d}" for n in numbers)
    blocks = blocks_of(nodes, [], size)
    flat = [i for b in blocks for i in b]
    assert sorted(flat) == list(range(len(nodes))) and all(len(b) <= size for b in blocks)
