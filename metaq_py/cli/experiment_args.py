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

__all__ = ["THETA_2022", "BadArgument", "check_reading", "default_traces", "settings",
           "split_list", "study_named", "trace_dirs", "trace_source", "with_load"]

THETA_2022 = "theta_2022.swf.gz"
"""The default trace's file name (the ALCF Theta 2022 log, in SWF)."""
BESIDE_SOURCE = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
"""``../shared/traces`` beside the source tree this package was loaded from: a checkout's
neighbour; for an installed package, a folder beside ``site-packages`` that rarely exists."""


def trace_dirs() -> list[Path]:
    """Where the default traces are looked for, in order: ``$METAQ_TRACES``; ``shared/traces``
    in the working directory and in its parent (the layout of a checkout beside
    ``shared/``, from its root or from beside it); and ``../shared/traces`` beside the
    source tree this package was loaded from (a checkout, not an installed package)."""
    import os

    found = [Path(os.environ["METAQ_TRACES"])] if os.environ.get("METAQ_TRACES") else []
    cwd = Path.cwd()
    found += [cwd / "shared" / "traces", cwd.parent / "shared" / "traces", BESIDE_SOURCE]
    return list(dict.fromkeys(found))


def default_traces(*, every: bool) -> tuple[list[Path], str]:
    """The default trace (``every``: every ``*.swf.gz`` beside it) and where it was found;
    :class:`BadArgument` naming the folders tried when there is none."""
    tried = trace_dirs()
    for folder in tried:
        if (folder / THETA_2022).is_file():
            paths = sorted(folder.glob("*.swf.gz")) if every else [folder / THETA_2022]
            return paths, f"the default, found in {folder}"
    raise BadArgument(f"no trace given and none found ({THETA_2022} in "
                      f"{', '.join(str(d) for d in tried)}): pass --trace PATH, set "
                      f"METAQ_TRACES, or ask for --synthetic")


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
    if synthetic:
        return (TraceSource(jobs=jobs, nodes=nodes),
                "Using the synthetic Theta-like workload (--synthetic).")
    why = "--trace"
    if trace is None:
        (trace,), why = default_traces(every=False)
    if not trace.is_file():
        raise BadArgument(f"trace {trace} is not a file")
    return (TraceSource(path=str(trace.resolve()), jobs=jobs, nodes=nodes),
            f"Using trace {trace} ({why}).")


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
    from sim.study.judging import READINGS

    if reading is None:
        return
    if reading not in READINGS:
        raise BadArgument(f"--reading knows {', '.join(READINGS)}, got {reading!r}")
    if not judged:
        raise BadArgument("--reading judges the 17 observations: use it with --study all "
                           "or --calibrate paper")
