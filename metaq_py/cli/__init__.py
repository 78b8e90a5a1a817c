"""The ``metaq`` command line: the top layer, sitting on everything else.

Each group of commands lives in its own module and registers itself on :data:`app`
(:mod:`metaq_py.cli.shared`, which also holds the options and error handling they share). This is
the only place in ``metaq_py`` allowed to import the ``sim`` package, and it does so lazily inside
the simulator's commands.

A command imports only its own module: ``metaq status`` on a batch node does not pay for the
simulator's or ``alloc``'s imports. :data:`COMMANDS` says which module holds which command
(``tests/cli/test_help.py`` holds it to what the modules register); ``metaq --help``, an
unknown command and ``from metaq_py.cli import app`` load them all.
"""

from __future__ import annotations

import sys
from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import typer

__all__ = ["COMMANDS", "MODULES", "app", "load", "main"]

MODULES = (
    "alloc_commands",
    "doctor_commands",
    "experiment_commands",
    "queue_commands",
    "status_commands",
    "listing_commands",
    "log_commands",
    "report_commands",
    "run_commands",
    "sim_commands",
    "trace_commands",
)
"""Every command module, in the order ``metaq --help`` lists their commands."""

COMMANDS = {
    **dict.fromkeys(("alloc", "jobscript"), "alloc_commands"),
    "doctor": "doctor_commands",
    "experiment": "experiment_commands",
    **dict.fromkeys(
        ("init", "submit", "check", "hold", "release", "cancel", "retry"), "queue_commands"),
    "status": "status_commands",
    **dict.fromkeys(("ls", "show"), "listing_commands"),
    "log": "log_commands",
    **dict.fromkeys(("notice", "report", "explain", "gantt", "jobs"), "report_commands"),
    **dict.fromkeys(("run", "running", "reset", "checkpoint", "demo"), "run_commands"),
    "simulate": "sim_commands",
    "trace": "trace_commands",
}
"""Which module registers each top-level command (or group of commands)."""


def load(modules: tuple[str, ...] = MODULES) -> typer.Typer:
    """Import command modules, which register their commands on the app, and return it."""
    for name in modules:
        import_module(f"metaq_py.cli.{name}")
    from metaq_py.cli.shared import app, reflow_help

    reflow_help(app)
    return app


def __getattr__(name: str) -> object:
    if name == "app":
        return load()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def version() -> str:
    """``metaq --version``: the release, the build of the policy core, and where it was loaded
    from (as ``pip --version`` says), so that "which metaq is this?" has one answer."""
    from pathlib import Path

    import metaq_py

    where = Path(metaq_py.__file__).resolve().parent
    return f"metaq-py {metaq_py.__version__} ({metaq_py.build()}) from {where}"


def main() -> None:
    if sys.argv[1:] in (["--version"], ["-V"]):
        print(version())
        return
    command = next((a for a in sys.argv[1:] if not a.startswith("-")), None)
    module = COMMANDS.get(command or "")
    load((module,) if module else MODULES)()
