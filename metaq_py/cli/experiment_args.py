"""Reading ``metaq experiment``'s arguments into the simulator's values: the study, the trace,
the load, ``--set`` and ``--reading``. Each reader raises :class:`BadArgument` with one
sentence for what it cannot use; the command (:mod:`metaq_py.cli.experiment_commands`) turns
that into an exit with status 2. The simulator is imported inside each reader only.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sim.run.spec import TraceSource
    from sim.study.grid import Study, Variant

__all__ = ["THETA_2022", "BadArgument", "check_reading", "settings", "split_list",
           "study_named", "trace_source", "with_load"]

THETA_2022 = Path(__file__).resolve().parents[2].parent / "shared" / "traces" / \
    "theta_2022.swf.gz"
"""The default trace: Theta 2022 beside the repository, when it is there."""


class BadArgument(Exception):
    """An argument the command cannot use; the message is one sentence."""


def split_list(text: str | None) -> list[str] | None:
    if text is None:
        return None
    items = [w.strip() for w in text.split(",") if w.strip()]
    if not items:
        raise BadArgument(f"expected a comma-separated list, got {text!r}")
    return items


def study_named(name: str) -> Study:
    from sim.study.grid import STUDIES

    if name not in STUDIES:
        raise BadArgument(f"unknown study {name!r}; choose from {', '.join(STUDIES)}")
    return STUDIES[name]


def trace_source(*, trace: Path | None, synthetic: bool, jobs: int | None,
                  nodes: int | None) -> tuple[TraceSource, str]:
    """The trace to use and a sentence saying which it is and why."""
    from sim.run.spec import TraceSource

    if jobs is not None and jobs < 1:
        raise BadArgument(f"--jobs must be at least 1, got {jobs}")
    if nodes is not None and nodes < 1:
        raise BadArgument(f"--nodes must be at least 1, got {nodes}")
    if trace is not None and synthetic:
        raise BadArgument("--trace and --synthetic cannot be used together")
    if trace is not None:
        if not trace.is_file():
            raise BadArgument(f"trace {trace} is not a file")
        return (TraceSource(path=str(trace.resolve()), jobs=jobs, nodes=nodes),
                f"Using trace {trace}.")
    if not synthetic and THETA_2022.is_file():
        return (TraceSource(path=str(THETA_2022), jobs=jobs, nodes=nodes),
                f"Using the Theta 2022 trace found at {THETA_2022}.")
    why = "as asked" if synthetic else f"no trace at {THETA_2022}"
    return (TraceSource(jobs=jobs, nodes=nodes),
            f"Using the synthetic Theta-like workload ({why}).")


def with_load(source: TraceSource, said: str, load: float) -> tuple[TraceSource, str]:
    from dataclasses import replace

    if not load > 0 or load != load or load == float("inf"):
        raise BadArgument(f"--load must be a positive number, got {load}")
    return replace(source, load=load), f"{said.rstrip('.')}, arrivals x{load:g} as fast."


def settings(texts: list[str]) -> Variant:
    """``--set KEY=V`` options as sorted overrides; a key set twice is an error."""
    from sim.study.grid import parse_setting

    pairs = [parse_setting(t) for t in texts]
    keys = [k for k, _ in pairs]
    for k in keys:
        if keys.count(k) > 1:
            raise BadArgument(f"--set {k} is given twice")
    return tuple(sorted(pairs))


def check_reading(reading: str | None, *, judged: bool) -> None:
    from sim.study.observations import READINGS

    if reading is None:
        return
    if reading not in READINGS:
        raise BadArgument(f"--reading knows {' and '.join(READINGS)}, got {reading!r}")
    if not judged:
        raise BadArgument("--reading judges the 17 observations: use it with --study all "
                           "or --calibrate paper")
