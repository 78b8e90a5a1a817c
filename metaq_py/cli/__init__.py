"""The ``metaq`` command line: the top layer, sitting on everything else.

Each group of commands lives in its own module and registers itself on :data:`app`
(:mod:`metaq_py.cli.app`, which also holds the options and error handling they share). This is
the only place in ``metaq_py`` allowed to import the ``sim`` package, and it does so lazily inside
the simulator's commands.
"""

from __future__ import annotations

# Command modules register themselves on `app` when imported.
from metaq_py.cli import (  # noqa: F401
    alloc_commands,
    doctor_commands,
    experiment_commands,
    queue_commands,
    report_commands,
    run_commands,
    sim_commands,
    trace_commands,
)
from metaq_py.cli.app import app

__all__ = ["app", "main"]


def main() -> None:
    app()
