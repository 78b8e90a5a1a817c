"""The ``metaq`` command line: the top layer, sitting on everything else.

Each group of commands lives in its own module and registers itself on :data:`app`. This is the
only place in ``metaq_py`` allowed to import the ``sim`` package, and it does so lazily inside
the simulator's commands.
"""

from __future__ import annotations

import typer

app = typer.Typer(
    name="metaq",
    help="A file-system task backfiller for supercomputers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Command modules register themselves on `app` when imported.
from metaq_py.cli import (  # noqa: E402,F401
    experiment_commands,
    queue_commands,
    report_commands,
    run_commands,
    sim_commands,
)


def main() -> None:
    app()
