"""Whole numbers written as ranges, ``0-3,7,9-10``: the form of ``#METAQ ARRAY``,
``--array`` and the kernel's CPU lists (``Cpus_allowed_list``, ``nvidia-smi topo -m``'s CPU
affinity); and the CPUs this process may run on.

On the ground floor: the task format, the batch systems and the launcher all read or write
these lists, and none of them needs another's code for it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

__all__ = ["MAX_ARRAY", "cpu_list", "format_indices", "machine_cpus", "parse_array",
           "parse_cpu_list", "parse_indices"]

MAX_ARRAY = 100_000
"""The most indices one task array may have (``ARRAY``, ``metaq submit --array``)."""


def format_indices(values: Iterable[int]) -> str:
    """Whole numbers as a short list of ranges, ``0-3,7,9-10``: the form ``ARRAY``,
    ``--array`` and the kernel's ``Cpus_allowed_list`` share
    (:func:`~metaq_py.directive_keys.parse_indices` reads it back). Repeats are dropped and the
    order is ascending."""
    out: list[str] = []
    ordered = sorted(set(values))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)


def cpu_list(cpus: Sequence[int]) -> str:
    """``cpus`` in the kernel's list form (``0-3,8``), as ``Cpus_allowed_list`` prints it."""
    return format_indices(cpus)


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """The CPU ids of a list such as ``0-3,8,10-11`` (ascending, each once); ``ValueError``
    with one sentence naming the bad part."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        lo, dash, hi = part.partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()):
            raise ValueError(f"{part!r} in the CPU list {text!r} is not a CPU id or range")
        first, last = int(lo), int(hi) if dash else int(lo)
        if last < first or last - first > 1 << 16:
            raise ValueError(f"{part!r} in the CPU list {text!r} is not an ascending range")
        cpus.update(range(first, last + 1))
    return tuple(sorted(cpus))


def machine_cpus() -> tuple[int, ...]:
    """The CPU ids this process may run on, ascending (the node's cores ``0 ..`` map onto
    them in this order)."""
    try:
        return tuple(sorted(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return tuple(range(os.cpu_count() or 1))


def parse_indices(text: str) -> tuple[int, ...]:
    """The indices an ``ARRAY`` list names, in order and without repeats: comma-separated
    items, each ``N``, ``A-B`` (both included) or ``A-B:STEP``, as ``sbatch --array``. Raises
    ``ValueError`` with one sentence saying what is wrong."""
    out: dict[int, None] = {}
    for item in text.split(","):
        rng, _, step_text = item.partition(":")
        first, dash, last = rng.partition("-")
        if not first.isdigit() or (dash and not last.isdigit()) or \
                (step_text and not (dash and step_text.isdigit())):
            raise ValueError(f"{item!r} is not an index list item; write N, A-B or A-B:STEP "
                             f"(e.g. 0-999, 1-99:2, 1,5,7)")
        lo = int(first)
        hi = int(last) if dash else lo
        step = int(step_text) if step_text else 1
        if hi < lo or step < 1:
            raise ValueError(f"{item!r} counts down or steps by 0; write the smaller index first")
        if len(out) + (hi - lo) // step + 1 > MAX_ARRAY:
            raise ValueError(f"{text[:40]!r} names more than {MAX_ARRAY} indices")
        out.update(dict.fromkeys(range(lo, hi + 1, step)))
    return tuple(out)


def parse_array(text: str) -> tuple[tuple[int, ...], int | None]:
    """An ``ARRAY`` value: its index list (:func:`parse_indices`) and the throttle after a
    ``%``, how many of its indices may run at once (``0-19%4``, as ``sbatch --array``), or
    ``None`` without one. Raises ``ValueError`` with one sentence saying what is wrong."""
    body, pct, limit = text.partition("%")
    if pct and not (limit.isdigit() and int(limit) >= 1):
        raise ValueError(f"{text!r}: after % comes how many indices may run at once, a whole "
                         f"number of at least 1 (e.g. 0-19%4)")
    return parse_indices(body), int(limit) if pct else None
