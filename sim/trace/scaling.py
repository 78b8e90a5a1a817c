"""Changing a trace's load: the same jobs, arriving ``factor`` times as fast.

CQSim's density option does this: every gap between consecutive submits is divided by the
factor, the first submit stays where it is, and sizes, runtimes and walltimes are unchanged.
The offered load (work per unit of capacity over the submit span) is multiplied by the
factor, and the order of the jobs is kept. ``factor`` 1 gives back the very same trace.
"""

from __future__ import annotations

import math
from dataclasses import replace

from sim.trace.loader import Trace


class LoadError(ValueError):
    """A load factor that cannot scale a trace; the message is one sentence."""


def check_load(factor: float) -> float:
    """``factor`` as a float if it is a positive finite number, else :class:`LoadError`."""
    if isinstance(factor, bool) or not isinstance(factor, int | float) \
            or not math.isfinite(factor) or factor <= 0:
        raise LoadError(f"a load factor is a positive number, got {factor!r}")
    return float(factor)


def scale_load(trace: Trace, factor: float) -> Trace:
    """``trace`` with every inter-arrival gap divided by ``factor`` (first submit fixed)."""
    factor = check_load(factor)
    if factor == 1.0 or not len(trace):
        return trace
    submit = trace.jobs.submit
    first = float(submit[0])
    scaled = first + (submit - first) / factor
    return replace(trace, jobs=replace(trace.jobs, submit=scaled))
