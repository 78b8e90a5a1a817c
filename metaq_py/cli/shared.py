"""The ``metaq`` typer application, and the options and error handling its commands share.

Command modules import :data:`app` from here and register their commands on it;
:mod:`metaq_py.cli` imports them all. Nothing here imports a command module, so the command
line has no import cycle.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from rich.console import Console

from metaq_py.errors import MetaqError

if TYPE_CHECKING:
    from metaq_py.queue.layout import Layout
    from metaq_py.queue.store import Queue

app = typer.Typer(
    name="metaq",
    help="A file-system task backfiller for supercomputers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def reflow_help(typer_app: typer.Typer) -> None:
    """Make each paragraph of every command's help one line, as help texts are written
    across several docstring lines. Typer keeps a docstring's line breaks and rich then wraps
    each line again at the terminal's width, which leaves ragged half-lines behind (a word or
    two alone on a line); one paragraph per line is wrapped once, by rich."""
    import inspect

    for info in typer_app.registered_commands:
        text = info.help if info.help is not None else inspect.getdoc(info.callback) or ""
        info.help = "\n\n".join(" ".join(p.split()) for p in text.split("\n\n"))
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            reflow_help(group.typer_instance)


@app.callback()
def _group() -> None:
    # A Typer app with one registered command runs it without its name; `metaq status` loads
    # only its own module (metaq_py/cli/__init__.py), so the app must stay a group of commands.
    pass

QueueOpt = Annotated[
    Path,
    typer.Option("--queue", "-q", envvar="METAQ_QUEUE", show_default=True,
                 help="The queue directory (or set METAQ_QUEUE)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for machines.")]
SCHEDULER_HELP = ("The scheduler: easy, conservative, or an on-demand mechanism such as "
                  "CUA&SPAA (N, CUA or CUP, then &PAA, &SPAA or &SPAA+).")


def one_scheduler(scheduler: str | None, old: str | None, old_flag: str) -> str | None:
    """The scheduler a command was given: ``--scheduler``, or its old name ``old_flag``
    (``--mechanism`` for ``run``, ``--policy`` for ``simulate``, ``--policies`` for
    ``experiment``), still accepted; both given differently is an error."""
    if old is not None and scheduler is not None and old != scheduler:
        raise MetaqError(f"--scheduler {scheduler!r} and {old_flag} {old!r} disagree; "
                         f"{old_flag} is --scheduler's old name: give --scheduler alone")
    return scheduler if scheduler is not None else old
TaskArg = Annotated[str, typer.Argument(
    help="The task, as <folder>/<path>, a file path, or a file name that one task has.")]

UNCUT_WIDTH = 1 << 16
"""The width of standard output when it is not a terminal: more than any row, so that a table
piped into ``cat``, ``grep`` or a cron mail keeps every cell whole."""


def _console() -> Console:
    """Standard output for people: a terminal's own width, and where there is no terminal
    (a pipe, a file, cron) :data:`UNCUT_WIDTH` unless ``COLUMNS`` says otherwise, where rich
    alone would cut every table at 80 columns."""
    import os

    out = Console(highlight=False, soft_wrap=True)
    if not out.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        out.width = UNCUT_WIDTH
    return out


console = _console()
"""Standard output for tables and text meant for people (no colour guessing in pipes)."""


def printable(text: str) -> str:
    """``text`` with each control or other unprintable character escaped as Python writes it
    (``\\n``, ``\\t``, ``\\x1b``): a task named with a newline or a terminal escape never
    breaks a listing nor reaches the terminal as itself."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape", "backslashreplace")
                   .decode("ascii") for c in text)


def cell(text: str) -> str:
    """:func:`printable` ``text`` for a rich table, its ``[`` never taken for markup."""
    from rich.markup import escape

    return escape(printable(text))


@contextmanager
def reported() -> Iterator[None]:
    """Turn a MetaqError into one line on standard error and exit status 1."""
    try:
        yield
    except MetaqError as e:
        typer.echo(f"metaq: {e}", err=True)
        raise typer.Exit(1) from None


def open_queue(queue: Path) -> Queue:
    """The queue at ``queue``, or a :class:`MetaqError` saying why it is not one."""
    from metaq_py.queue.store import Queue  # not every command opens a queue

    return _checked(Queue(queue))


def open_layout(queue: Path) -> Layout:
    """The queue at ``queue`` as its folders alone, for a command that moves no task
    (``submit``), checked as :func:`open_queue` checks it."""
    from metaq_py.queue.layout import Layout

    return _checked(Layout(queue))


_L = TypeVar("_L", bound="Layout")


def _checked(q: _L) -> _L:
    """``q``, once its folder is known to be a queue; else a :class:`MetaqError`."""
    import os

    from metaq_py.errors import QueueError
    from metaq_py.queue.settings.config import CONFIG_NAME

    q.require()
    # A folder that holds none of a queue's parts is not one: no command may reshape it
    # (a runner would make jobs/ and working/ in someone's home folder).
    parts = (CONFIG_NAME, *q.config.folders, "hold", "working", "finished")
    if not any(os.path.lexists(q.root / part) for part in parts):
        raise QueueError(f"{q.root} is not a queue (it has no metaq.yaml and no task "
                         f"folders); create one with 'metaq init {q.root}' or pass --queue")
    return q
