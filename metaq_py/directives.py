"""``#METAQ`` directives: the resource needs written at the top of a task script.

A task script is an ordinary executable file. Its first line is a shebang; the comment block
right after it may hold directives, one per line::

    #!/bin/bash
    #METAQ NODES 4
    #METAQ MIN_WC_TIME 2:00:00
    #METAQ PROJECT lattice

The rules follow ``#SBATCH``: directives are read only from the leading comment block (blank
lines and other comments may be mixed in; the first command ends it), keys are matched exactly,
a key given twice is an error, and every error names the file, the line and the problem in
one sentence (:class:`~metaq_py.errors.TaskError`). Values are plain words: nothing is ever
expanded by a shell. ``docs/user-guide.md`` lists every key.

:func:`parse_header` works on bytes and never raises anything but ``TaskError``;
:func:`read_task` reads a file with the checks a file needs (executable, at most
:data:`HEADER_LIMIT` bytes of header, symlink loops, files that vanish while being read).
:func:`format_directives` writes a :class:`TaskSpec` back as directive lines.
"""

from __future__ import annotations

import difflib
import errno
import os
import re
import signal as _signal
import stat
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from metaq_py.durations import DurationError, format_duration, parse_duration
from metaq_py.errors import TaskError, TaskVanished
from metaq_py.policy.model import Kind

__all__ = [
    "HEADER_LIMIT",
    "KEYS",
    "Checkpoint",
    "Resize",
    "ResizeMode",
    "Signal",
    "TaskSpec",
    "format_directives",
    "late_directives",
    "miscased_directives",
    "parse_header",
    "parse_indices",
    "read_head",
    "read_task",
    "with_path",
]

HEADER_LIMIT = 64 * 1024
"""At most this many bytes are read from a task script to find its header."""

PREFIX = "#METAQ"

_UNCATCHABLE = {"KILL", "STOP"}
_SIGNAL_NAMES = sorted(
    s.name[3:] for s in _signal.Signals if s.name.startswith("SIG") and "_" not in s.name
)
WARNING_SIGNALS = ("HUP", "INT", "QUIT", "USR1", "USR2", "ALRM", "TERM", "XCPU", "URG",
                   "WINCH")
"""The signals a task may ask to be warned with (``SIGNAL``, ``RESIZE``): those a program
catches to save its work. ``CHLD``, ``SEGV``, ``PIPE`` and the like mean something else."""

MAX_NODES = 1_000_000
"""The most nodes (and GPUs) a task may ask for: more than any machine has. A larger count
could never run and would only wait for ever (``caps.nodes`` in ``metaq.yaml`` sets a real
limit)."""

MAX_PRIORITY = 1_000_000
"""``PRIORITY`` is between ``-MAX_PRIORITY`` and ``MAX_PRIORITY``."""

MAX_RETRIES = 100
"""The most ``RETRIES`` a task may ask for."""

MAX_WALL_CLOCK = 366 * 86400.0
"""The longest ``MIN_WC_TIME``, ``SETUP`` and ``CHECKPOINT`` interval: a year."""

MAX_ARRAY = 100_000
"""The most indices one task array may have (``ARRAY``, ``metaq submit --array``)."""

REPEATABLE = ("AFTER", "AFTER_ANY")
"""The keys that may be given on several lines: each line adds names."""

INDEX = "{index}"
"""In an ``AFTER`` name of an array task, the task's own index (``AFTER prop.sh[{index}]``)."""

MAX_SIGNAL_LEAD = 2 * 3600.0
"""The longest warning a ``SIGNAL`` may ask for (seconds): two hours. The runner waits this
long for a task to save its work when it must stop, so a task cannot hold it for ever."""


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A task that checkpoints every ``interval`` seconds, each checkpoint taking ``cost``."""

    interval: float
    cost: float


@dataclass(frozen=True, slots=True)
class Signal:
    """Send signal ``name`` (``USR1``, ``TERM``, ...) ``before`` seconds ahead of a preemption
    or of the end of the allocation's wall clock, like ``sbatch --signal=USR1@60``."""

    name: str
    before: float


class ResizeMode:
    """How a malleable task takes a new node count (``#METAQ RESIZE``)."""

    IN_PLACE = "in-place"
    """The task keeps running: metaq rewrites its node list and sends it the resize signal."""
    RESTART = "restart"
    """The task is stopped (with its ``SIGNAL`` warning) and started again at the new size."""

    ALL = (IN_PLACE, RESTART)


@dataclass(frozen=True, slots=True)
class Resize:
    """How a malleable task is shrunk or expanded: ``mode`` is ``in-place`` or ``restart``;
    ``signal`` names the signal sent after an in-place resize (``None`` for restart)."""

    mode: str
    signal: str | None = None


@dataclass(frozen=True, slots=True)
class TaskSpec:
    """What a task script asks for, read from its ``#METAQ`` lines.

    ``nodes`` is the node count (the *maximum* for a malleable task) and ``min_nodes`` the
    smallest count it can run on (equal to ``nodes`` unless ``type`` is malleable). ``gpus`` is
    the total number of GPUs the task needs. ``min_wc_time`` is the wall clock, in seconds, the
    task needs at full size; ``None`` means the queue's default. ``priority``: higher runs
    first within a folder. ``setup``: seconds spent before useful work starts, paid again on
    every restart. ``retries``: how many times a failed run is tried again (``None``: the
    queue's default). ``notice`` ties an on-demand task to an advance notice. ``path`` is where
    the script was read from. ``cpus`` above 0 makes the task a *share* of one node: that many
    of its cores, beside other shares, with ``gpus`` of its GPUs; 0 (no ``CPUS``) keeps whole
    nodes, as METAQ did. ``exclusive`` keeps whole nodes to the task (``EXCLUSIVE``: the
    default already, said out loud). ``after`` names the tasks (identities, arrays or globs)
    that must have finished before this one may start, ``after_any`` those that must have
    ended, whatever their outcome. ``array`` is the ``ARRAY`` index list, as written, for a
    script that is to be queued once per index. ``lines`` maps each directive key given to
    its line number, for error messages; it takes no part in comparisons.
    """

    path: str
    nodes: int = 1
    min_nodes: int = 0
    gpus: int = 0
    min_wc_time: float | None = None
    project: str | None = None
    log: str | None = None
    machine: str | None = None
    type: Kind = Kind.RIGID
    priority: int = 0
    setup: float = 0.0
    checkpoint: Checkpoint | None = None
    signal: Signal | None = None
    notice: str | None = None
    retries: int | None = None
    resize: Resize | None = None
    cpus: int = 0
    exclusive: bool = False
    after: tuple[str, ...] = ()
    after_any: tuple[str, ...] = ()
    array: str | None = None
    lines: tuple[tuple[str, int], ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.min_nodes == 0:
            default = 1 if self.type is Kind.MALLEABLE else self.nodes
            object.__setattr__(self, "min_nodes", default)

    def line_of(self, key: str) -> int | None:
        """The line the directive ``key`` was written on, if it was."""
        for k, n in self.lines:
            if k == key:
                return n
        return None


# --- values --------------------------------------------------------------------------------

_INT = re.compile(r"^[+-]?[0-9]+$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_COMMENT = re.compile(r"\s#.*$")


class _Bad(Exception):
    """A bad value; the parser adds the file and line."""


def _one(key: str, words: list[str], what: str) -> str:
    if len(words) != 1:
        got = "nothing" if not words else f"{len(words)} words"
        raise _Bad(f"{key} takes one value ({what}), got {got}")
    return words[0]


def _integer(key: str, words: list[str], *, least: int | None, most: int) -> int:
    word = _one(key, words, "a whole number")
    if not _INT.match(word) or len(word) > 30:
        raise _Bad(f"{key} must be a whole number, not {word[:40]!r}")
    value = int(word, 10)
    if least is not None and value < least:
        raise _Bad(f"{key} must be at least {least}, not {value}")
    if value > most or (least is None and value < -most):
        raise _Bad(f"{key} must be at most {most}, not {value}")
    return value


def _duration(key: str, word: str, *, positive: bool, most: float = MAX_WALL_CLOCK) -> float:
    try:
        value = parse_duration(word)
    except DurationError as e:
        raise _Bad(f"{key} {e}") from None
    if positive and value <= 0:
        raise _Bad(f"{key} must be more than zero, not {word!r}")
    if value > most:
        raise _Bad(f"{key} {word!r} is longer than the {format_duration(most)} it may be")
    return value


def _word(key: str, words: list[str], what: str) -> str:
    return _one(key, words, what)


def _signal_name(key: str, word: str) -> str:
    name = word.upper()
    name = name[3:] if name.startswith("SIG") else name
    if name in _UNCATCHABLE:
        raise _Bad(f"{key} cannot use {word}, which a task cannot catch; use USR1, USR2 or TERM")
    if name not in _SIGNAL_NAMES:
        raise _Bad(f"{key} has unknown signal {word!r}; use a name such as USR1, USR2 or TERM")
    if name not in WARNING_SIGNALS:
        raise _Bad(f"{key} cannot use {word}, which is not a signal a program catches to save "
                   f"its work; use one of {', '.join(WARNING_SIGNALS)}")
    return name


def _set_nodes(spec: dict, key: str, words: list[str]) -> None:
    spec["nodes"] = _integer(key, words, least=1, most=MAX_NODES)


def _set_min_nodes(spec: dict, key: str, words: list[str]) -> None:
    spec["min_nodes"] = _integer(key, words, least=1, most=MAX_NODES)


def _set_gpus(spec: dict, key: str, words: list[str]) -> None:
    spec["gpus"] = _integer(key, words, least=0, most=MAX_NODES)


def _set_cpus(spec: dict, key: str, words: list[str]) -> None:
    spec["cpus"] = _integer(key, words, least=1, most=MAX_NODES)


def _set_exclusive(spec: dict, key: str, words: list[str]) -> None:
    if words:
        raise _Bad(f"{key} takes no value")
    spec["exclusive"] = True


def _set_wc(spec: dict, key: str, words: list[str]) -> None:
    spec["min_wc_time"] = _duration(key, _one(key, words, "a duration"), positive=True)


def _set_project(spec: dict, key: str, words: list[str]) -> None:
    spec["project"] = _word(key, words, "a project name without spaces")


def _set_machine(spec: dict, key: str, words: list[str]) -> None:
    spec["machine"] = _word(key, words, "a machine name without spaces")


def _set_notice(spec: dict, key: str, words: list[str]) -> None:
    spec["notice"] = _word(key, words, "a notice name without spaces")


def _set_log(spec: dict, key: str, words: list[str]) -> None:
    if not words:
        raise _Bad(f"{key} needs a file path")
    text = " ".join(words)
    if any(c in text for c in "$`"):
        raise _Bad(f"{key} is a plain path and is never expanded by a shell, so it cannot "
                   f"contain $ or `")
    if text.startswith("~"):
        raise _Bad(f"{key} is a plain path and ~ is not expanded; write the full path")
    spec["log"] = text


def _set_type(spec: dict, key: str, words: list[str]) -> None:
    word = _one(key, words, "rigid, malleable or ondemand")
    try:
        spec["type"] = Kind(word.lower())
    except ValueError:
        raise _Bad(f"{key} {word!r} is unknown; use rigid, malleable or ondemand") from None


def _set_priority(spec: dict, key: str, words: list[str]) -> None:
    spec["priority"] = _integer(key, words, least=None, most=MAX_PRIORITY)


def _set_setup(spec: dict, key: str, words: list[str]) -> None:
    spec["setup"] = _duration(key, _one(key, words, "a duration"), positive=False)


def _set_checkpoint(spec: dict, key: str, words: list[str]) -> None:
    if len(words) != 2:
        raise _Bad(f"{key} takes two durations, the interval and the cost of one checkpoint "
                   f"(e.g. {key} 1h 5m)")
    spec["checkpoint"] = Checkpoint(
        interval=_duration(key, words[0], positive=True),
        cost=_duration(key, words[1], positive=False),
    )


def _set_signal(spec: dict, key: str, words: list[str]) -> None:
    word = _one(key, words, "SIG@TIME, e.g. USR1@60")
    name, at, when = word.partition("@")
    spec["signal"] = Signal(
        name=_signal_name(key, name),
        before=_duration(key, when, positive=False, most=MAX_SIGNAL_LEAD) if at else 60.0,
    )


def _set_retries(spec: dict, key: str, words: list[str]) -> None:
    spec["retries"] = _integer(key, words, least=0, most=MAX_RETRIES)


def _set_resize(spec: dict, key: str, words: list[str]) -> None:
    if not words or words[0] not in ResizeMode.ALL:
        raise _Bad(f"{key} must start with in-place or restart")
    mode = words[0]
    if mode == ResizeMode.RESTART:
        if len(words) != 1:
            raise _Bad(f"{key} restart takes no signal; the task's SIGNAL warns it instead")
        spec["resize"] = Resize(mode=mode)
        return
    if len(words) > 2:
        raise _Bad(f"{key} in-place takes at most one signal name")
    sig = _signal_name(key, words[1]) if len(words) == 2 else "USR2"
    spec["resize"] = Resize(mode=mode, signal=sig)


def _set_after(spec: dict, key: str, words: list[str]) -> None:
    if not words:
        raise _Bad(f"{key} needs the name of a task, an array or a glob, such as {key} prop.sh")
    for word in words:
        if ".." in word.split("/") or word.startswith("/"):
            raise _Bad(f"{key} {word!r} must name a task inside the queue, without .. or a "
                       f"leading /")
    name = "after" if key == "AFTER" else "after_any"
    spec[name] = (*spec.get(name, ()), *words)


def _set_array(spec: dict, key: str, words: list[str]) -> None:
    text = _one(key, words, "indices such as 0-999, 1-99:2 or 1,5,7")
    try:
        parse_indices(text)
    except ValueError as e:
        raise _Bad(f"{key} {e}") from None
    spec["array"] = text


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


_Setter = Callable[[dict, str, list[str]], None]

KEYS: dict[str, _Setter] = {
    # METAQ's own keys: every METAQ task script works unchanged.
    "NODES": _set_nodes,
    "GPUS": _set_gpus,
    "MIN_WC_TIME": _set_wc,
    "PROJECT": _set_project,
    "LOG": _set_log,
    "MACHINE": _set_machine,
    # Extensions for the hybrid (rigid / malleable / on-demand) model.
    "TYPE": _set_type,
    "MIN_NODES": _set_min_nodes,
    "PRIORITY": _set_priority,
    "SETUP": _set_setup,
    "CHECKPOINT": _set_checkpoint,
    "SIGNAL": _set_signal,
    "NOTICE": _set_notice,
    "RETRIES": _set_retries,
    "RESIZE": _set_resize,
    # Shares of a node (mpi_jm, HyperQueue): some cores and GPUs of one node.
    "CPUS": _set_cpus,
    "EXCLUSIVE": _set_exclusive,
    # Campaigns: arrays and dependencies (SLURM's --array and --dependency).
    "ARRAY": _set_array,
    "AFTER": _set_after,
    "AFTER_ANY": _set_after,
}
"""Every directive key, mapped to the function that reads its value."""


# --- parsing -------------------------------------------------------------------------------


def parse_header(data: bytes, *, path: str, truncated: bool = False) -> TaskSpec:
    """Read the directives of a task script given as bytes.

    ``data`` is the start of the file; ``truncated`` says the file goes on beyond it (so a
    header still open at the end of ``data`` is too long rather than complete). Raises
    :class:`TaskError` and nothing else.
    """
    path = str(path)
    if not data:
        raise TaskError(path, None, "the file is empty; a task needs a shebang line such as "
                                    "#!/bin/bash and a command")
    nul = data.find(b"\0")
    if nul >= 0:
        raise TaskError(path, data.count(b"\n", 0, nul) + 1,
                        "this is a binary file (it contains a NUL byte), not a task script")
    raw_lines = data.split(b"\n")
    if truncated:
        # The last piece may be cut mid-line; it is not a whole line.
        raw_lines.pop()
    if not raw_lines or not raw_lines[0].startswith(b"#!"):
        raise TaskError(path, 1, "the first line must be a shebang such as #!/bin/bash")
    if raw_lines[0].endswith(b"\r"):
        raise TaskError(path, 1, "the file has Windows (CRLF) line endings, which break the "
                                 "shebang; convert it with dos2unix")
    try:
        # One decode for the whole head is much cheaper than one per line.
        lines = b"\n".join(raw_lines).decode("utf-8").split("\n")
    except UnicodeDecodeError:
        lines = _decode_header(raw_lines, path)
    values: dict = {}
    seen: dict[str, int] = {}
    ended = False
    for number, line in enumerate(lines, start=1):
        if number == 1:
            continue
        text = line.strip()
        if not text:
            continue
        if text[0] != "#":
            ended = True
            break
        if not text.startswith(PREFIX):
            continue
        rest = text[len(PREFIX):]
        if rest and not rest[0].isspace():
            raise TaskError(path, number, f"{text.split()[0]!r} is not a directive; write "
                                          f"'{PREFIX} KEY VALUE' with a space after {PREFIX}")
        if "#" in rest:
            rest = _COMMENT.sub("", rest)
        words = rest.split()
        if not words:
            raise TaskError(path, number, f"{PREFIX} has no key; write '{PREFIX} KEY VALUE'")
        key, args = words[0], words[1:]
        setter = KEYS.get(key)
        if setter is None:
            raise TaskError(path, number, _unknown_key(key))
        if key in seen and key not in REPEATABLE:
            raise TaskError(path, number, f"{key} is given again (first on line {seen[key]}); "
                                          f"keep only one")
        if _CONTROL.search("".join(args)):
            bad = next(w for w in args if _CONTROL.search(w))
            raise TaskError(path, number, f"{key} has a control character in {bad!r}")
        try:
            setter(values, key, args)
        except _Bad as e:
            raise TaskError(path, number, str(e)) from None
        seen[key] = number
    if truncated and not ended:
        raise TaskError(path, None, f"the header runs past {HEADER_LIMIT // 1024} KiB without "
                                    f"ending; put a command after the #METAQ lines")
    return _checked(values, seen, path)


def _decode_header(raw_lines: list[bytes], path: str) -> list[str]:
    """Decode line by line up to the end of the header, naming the first line that is not
    UTF-8 there. Bytes after the header (the script's body) are the shell's business."""
    lines: list[str] = []
    for number, raw in enumerate(raw_lines, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise TaskError(path, number, f"the text is not UTF-8 (byte {e.start + 1} of the "
                                          f"line); save the script as UTF-8") from None
        lines.append(line)
        text = line.strip()
        if number > 1 and text and text[0] != "#":
            break
    return lines


def _unknown_key(key: str) -> str:
    near = difflib.get_close_matches(key.upper(), KEYS, n=1, cutoff=0.6)
    hint = f"; did you mean {near[0]}?" if near else f"; known keys are {', '.join(KEYS)}"
    return f"{key!r} is not a known {PREFIX} key{hint}"


def _checked(values: dict, seen: dict[str, int], path: str) -> TaskSpec:
    kind = values.get("type", Kind.RIGID)
    nodes = values.get("nodes", 1)
    for key, needs in (("MIN_NODES", Kind.MALLEABLE), ("RESIZE", Kind.MALLEABLE),
                       ("NOTICE", Kind.ONDEMAND)):
        if key in seen and kind is not needs:
            raise TaskError(path, seen[key], f"{key} applies only to {needs} tasks; add "
                                             f"'{PREFIX} TYPE {needs}' or remove it")
    if "CPUS" in seen:
        for key, bad in (("EXCLUSIVE", "EXCLUSIVE" in seen), ("NODES", nodes != 1),
                         ("TYPE", kind is not Kind.RIGID)):
            if bad:
                raise TaskError(path, seen[key], f"CPUS asks for a share of one node, which "
                                                 f"a rigid task on one node gets; remove {key} "
                                                 f"or CPUS")
    if values.get("min_nodes", 0) > nodes:
        raise TaskError(path, seen["MIN_NODES"], f"MIN_NODES {values['min_nodes']} is more than "
                                                 f"NODES {nodes}; NODES is the maximum")
    return TaskSpec(path=path, lines=tuple(seen.items()), **values)


def late_directives(data: bytes) -> list[int]:
    """Line numbers of ``#METAQ`` lines that come after the header ended, and so are ignored
    (as ``sbatch`` ignores ``#SBATCH`` after the first command). Used to warn people."""
    late: list[int] = []
    ended = False
    for number, raw in enumerate(data.split(b"\n"), start=1):
        text = raw.strip()
        if number == 1 or not text:
            continue
        if not text.startswith(b"#"):
            ended = True
        elif ended and text.startswith(PREFIX.encode()):
            late.append(number)
    return late


def miscased_directives(data: bytes) -> list[int]:
    """Line numbers of header lines that read ``#METAQ`` in another case (``#metaq``,
    ``#Metaq``): comments to the shell and so ignored, though surely meant as directives.
    Used to warn people."""
    found: list[int] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        text = raw.strip()
        if number == 1 or not text:
            continue
        if not text.startswith(b"#"):
            break
        head = text[:len(PREFIX)]
        if head.upper() == PREFIX.encode() and head != PREFIX.encode():
            found.append(number)
    return found


def read_task(path: str | os.PathLike[str]) -> TaskSpec:
    """Read and check the task script at ``path`` (following a symlink to it).

    Besides the header rules of :func:`parse_header`, the file must be a regular, executable
    file; a symlink loop, a dangling link or a file that vanishes while being read is reported
    as a :class:`TaskError`.
    """
    data, truncated, _ = read_head(path)
    return parse_header(data, path=str(path), truncated=truncated)


def read_head(path: str | os.PathLike[str]) -> tuple[bytes, bool, os.stat_result]:
    """The first :data:`HEADER_LIMIT` bytes of a task file, whether it goes on past them, and
    the ``stat`` of the opened file (so callers check the same file they read)."""
    name = str(path)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        if e.errno == errno.ENOENT and not os.path.islink(name):
            raise TaskVanished(name, None, _open_problem(name, e)) from None
        raise TaskError(name, None, _open_problem(name, e)) from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise TaskError(name, None, "this is a folder, not a task script")
        if not stat.S_ISREG(st.st_mode):
            raise TaskError(name, None, "this is not a regular file, so it cannot be a task")
        if not st.st_mode & 0o111:
            raise TaskError(name, None, f"the script is not executable; run chmod +x {name}")
        chunks = []
        size = 0
        while size <= HEADER_LIMIT:
            chunk = os.read(fd, HEADER_LIMIT + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size >= st.st_size:
                break  # the whole file is in: spare the read that would return nothing
    except OSError as e:
        raise TaskError(name, None, _open_problem(name, e)) from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    truncated = len(data) > HEADER_LIMIT
    return data[:HEADER_LIMIT], truncated, st


def _open_problem(name: str, e: OSError) -> str:
    if e.errno == errno.ELOOP:
        return "the path is a symlink loop; point the link at a real script"
    if e.errno == errno.ENOENT:
        if os.path.islink(name):
            return "the symlink points to a file that does not exist"
        return "the file does not exist (it may have vanished while being read)"
    if e.errno == errno.EACCES:
        return "the file cannot be read (permission denied)"
    return f"the file cannot be read ({e.strerror})"


# --- writing -------------------------------------------------------------------------------


def format_directives(spec: TaskSpec) -> str:
    """The ``#METAQ`` lines that describe ``spec``; parsing them back gives an equal spec.

    Only what differs from the defaults is written, in the order of :data:`KEYS`.
    """
    out: list[tuple[str, str]] = [("NODES", str(spec.nodes))]
    if spec.gpus:
        out.append(("GPUS", str(spec.gpus)))
    if spec.min_wc_time is not None:
        out.append(("MIN_WC_TIME", format_duration(spec.min_wc_time)))
    for key, value in (("PROJECT", spec.project), ("LOG", spec.log),
                       ("MACHINE", spec.machine)):
        if value is not None:
            out.append((key, value))
    if spec.type is not Kind.RIGID:
        out.append(("TYPE", spec.type.value))
    if spec.type is Kind.MALLEABLE:
        out.append(("MIN_NODES", str(spec.min_nodes)))
    if spec.priority:
        out.append(("PRIORITY", str(spec.priority)))
    if spec.setup:
        out.append(("SETUP", format_duration(spec.setup)))
    if spec.checkpoint is not None:
        c = spec.checkpoint
        out.append(("CHECKPOINT", f"{format_duration(c.interval)} {format_duration(c.cost)}"))
    if spec.signal is not None:
        before = spec.signal.before
        when = str(int(before)) if before.is_integer() else format_duration(before)
        out.append(("SIGNAL", f"{spec.signal.name}@{when}"))
    if spec.notice is not None:
        out.append(("NOTICE", spec.notice))
    if spec.retries is not None:
        out.append(("RETRIES", str(spec.retries)))
    if spec.resize is not None:
        r = spec.resize
        out.append(("RESIZE", r.mode if r.signal is None else f"{r.mode} {r.signal}"))
    if spec.cpus:
        out.append(("CPUS", str(spec.cpus)))
    if spec.exclusive:
        out.append(("EXCLUSIVE", ""))
    if spec.array is not None:
        out.append(("ARRAY", spec.array))
    if spec.after:
        out.append(("AFTER", " ".join(spec.after)))
    if spec.after_any:
        out.append(("AFTER_ANY", " ".join(spec.after_any)))
    return "".join(f"{PREFIX} {key} {value}".rstrip() + "\n" for key, value in out)


def with_path(spec: TaskSpec, path: str) -> TaskSpec:
    """The same spec, read from another place (after a move within the queue)."""
    return replace(spec, path=str(path))
