"""Task scripts written from Python values: the ``#METAQ`` lines and the body.

:class:`Directives` holds what a task asks for, one field per directive key, named as the key
in lower case (``nodes`` for ``NODES``, ``min_wc_time`` for ``MIN_WC_TIME``); ``None`` leaves a
key out, so the queue's default holds. :func:`script_text` writes a task script from them and a
body. Nothing here judges a value: the script is judged afterwards exactly as ``metaq submit``
judges a file (:mod:`metaq_py.api.handle`), so a bad value gets the same sentence. Only what the
directive syntax itself cannot carry is refused here: a line break or another control character
in a value (it would end the line and start another directive), spaces the line would not keep
(at an end, or several between words), and `` #``, which starts a comment in a ``#METAQ``
line.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, fields

from metaq_py.durations import format_duration
from metaq_py.errors import TaskError
from metaq_py.hybrid import Kind

__all__ = ["Directives", "Duration", "Line", "Names", "Shape", "directive_lines",
           "script_text", "shell_lines"]

Duration = float | int | str
"""A duration: seconds as a number, or text the one duration parser reads (``"2h"``,
``"1:30:00"``)."""

Names = str | Sequence[str]
"""Task names for ``AFTER``: one name, or several."""

Line = str | Sequence[str]
"""One step of a script: a shell line as written, or a command as its words (each one
quoted for the shell, so a word with spaces stays one word)."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


@dataclass(frozen=True, slots=True, kw_only=True)
class Shape:
    """Another shape a task accepts (``#METAQ SHAPE``): whole ``nodes``, or a share of one
    node's ``cpus``, with ``gpus`` and ``min_wc_time``. What is left ``None`` is the task's
    own value; ``nodes`` or ``cpus`` gives the whole size."""

    nodes: int | None = None
    gpus: int | None = None
    cpus: int | None = None
    min_wc_time: Duration | None = None

    def words(self) -> str:
        """The words of its ``SHAPE`` line."""
        out = []
        for key, value in (("NODES", self.nodes), ("GPUS", self.gpus), ("CPUS", self.cpus)):
            if value is not None:
                out.append(f"{key} {_words(value)}")
        if self.min_wc_time is not None:
            out.append(f"MIN_WC_TIME {_duration_words(self.min_wc_time)}")
        return " ".join(out)


@dataclass(frozen=True, slots=True)
class Directives:
    """What a task asks for, one field per ``#METAQ`` key (``docs/user-guide.md`` lists them
    with what each accepts). ``None`` (or ``False`` for ``exclusive`` and ``header_only``)
    writes no line."""

    nodes: int | None = None
    gpus: int | None = None
    min_wc_time: Duration | None = None
    project: str | None = None
    log: str | None = None
    machine: str | None = None
    type: Kind | str | None = None
    min_nodes: int | None = None
    priority: int | None = None
    setup: Duration | None = None
    checkpoint: tuple[Duration, Duration] | str | None = None
    signal: str | None = None
    notice: str | None = None
    retries: int | None = None
    resize: str | None = None
    cpus: int | None = None
    exclusive: bool = False
    array: str | None = None
    after: Names | None = None
    after_any: Names | None = None
    shapes: Sequence[Shape] | None = None
    header_only: bool = False

    def merged(self, over: Directives) -> Directives:
        """These directives with every field that ``over`` sets put in their place."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        for f in fields(over):
            value = getattr(over, f.name)
            if value is not None and value is not False:
                values[f.name] = value
        return Directives(**values)


def _words(value: object) -> str:
    """A value as the words of its directive line."""
    if isinstance(value, Kind):
        return value.value
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return str(value)  # the parser refuses it as it would any word that is no number
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, Sequence):
        return " ".join(_words(v) for v in value)
    return str(value)


def _duration_words(value: Duration) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return format_duration(float(value))
    return _words(value)


def directive_lines(d: Directives, *, name: str) -> list[str]:
    """The ``#METAQ`` lines of ``d``, in the order of the user guide's tables. ``name`` (the
    task's name) is what a refused value is reported against."""
    lines: list[tuple[str, str]] = []
    for f in fields(d):
        value = getattr(d, f.name)
        if value is None or value is False:
            continue
        key = f.name.upper()
        if f.name == "shapes":
            for shape in value:
                words = shape.words() if isinstance(shape, Shape) else _words(shape)
                _check_words("SHAPE", words, name=name)
                lines.append(("SHAPE", words))
            continue
        if f.name in ("exclusive", "header_only"):
            words = "" if value is True else _words(value)
        elif f.name in ("min_wc_time", "setup"):
            words = _duration_words(value)
        elif f.name == "checkpoint" and not isinstance(value, str):
            words = " ".join(_duration_words(v) for v in value)
        else:
            words = _words(value)
        _check_words(key, words, name=name)
        lines.append((key, words))
    return [f"#METAQ {key} {words}".rstrip() for key, words in lines]


def _check_words(key: str, words: str, *, name: str) -> None:
    bad = _CONTROL.search(words)
    if bad is not None:
        raise TaskError(name, None, f"{key} has a control character ({bad.group()!r}) in "
                                    f"{words!r}; a directive is one line")
    if " ".join(words.split()) != words:
        raise TaskError(name, None, f"{key} {words!r} has spaces a #METAQ line does not keep "
                                    f"(at an end, or more than one between words); write one "
                                    f"space between words")
    if re.search(r"\s#", words):
        raise TaskError(name, None, f"{key} {words!r} holds ' #', which starts a comment in "
                                    f"a #METAQ line; leave the # out")


def shell_lines(step: Sequence[Line] | Line | None) -> list[str]:
    """The shell lines of one step: a string is its own line(s); a list holds lines, each a
    string or a command as its words."""
    if step is None:
        return []
    if isinstance(step, str):
        return [step]
    out: list[str] = []
    for line in step:
        out.append(line if isinstance(line, str) else shlex.join(line))
    return out


def script_text(d: Directives, body: Sequence[str], *, name: str, shell: str,
                made_by: str) -> str:
    """A whole task script: the shebang ``shell``, the directives, a comment saying what
    ``made_by`` it, and the ``body`` lines."""
    if _CONTROL.search(shell) or not shell.startswith("/"):
        raise TaskError(name, None, f"the shell {shell!r} must be a full path such as /bin/bash")
    if not any(line.strip() for line in body):
        raise TaskError(name, None, "the task has nothing to run; give a command or a script")
    head = [f"#!{shell}", *directive_lines(d, name=name), f"# made by {made_by}"]
    return "\n".join([*head, *body]) + "\n"
