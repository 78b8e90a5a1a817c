"""The ``#METAQ`` keys: what each one accepts, and the limits on its values.

:data:`KEYS` maps every directive key to the function that reads its words into the values of a
:class:`~metaq_py.task_spec.TaskSpec`; a bad value raises :class:`BadValue`, to which the parser
(:func:`metaq_py.directives.parse_header`) adds the file and the line. The limits
(:data:`MAX_NODES`, :data:`MAX_SIGNAL_LEAD`, ...) and the signals a task may be warned with are
here too, as is :func:`parse_indices`, which reads an ``ARRAY`` index list (``metaq submit
--array`` reads the same lists). ``docs/user-guide.md`` lists every key.
"""

from __future__ import annotations

import re
import signal as _signal
from collections.abc import Callable

from metaq_py.durations import DurationError, format_duration, parse_duration
from metaq_py.hybrid import Kind
from metaq_py.ranges import MAX_ARRAY, parse_array, parse_indices
from metaq_py.task_spec import Checkpoint, Resize, ResizeMode, Signal

__all__ = [
    "INDEX",
    "KEYS",
    "MAX_ARRAY",
    "MAX_NODES",
    "MAX_PRIORITY",
    "MAX_RETRIES",
    "MAX_SHAPES",
    "MAX_SIGNAL_LEAD",
    "MAX_WALL_CLOCK",
    "REPEATABLE",
    "SHAPE_KEYS",
    "TIMEOUT_WORD",
    "WARNING_SIGNALS",
    "BadValue",
    "codes_of",
    "exit_codes",
    "parse_array",
    "parse_indices",
    "parse_mem",
]

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

REPEATABLE = ("AFTER", "AFTER_ANY", "SHAPE", "CREATES")
"""The keys that may be given on several lines: each line adds names (or a shape)."""

MAX_SHAPES = 16
"""The most ``SHAPE`` lines one task may have."""

SHAPE_KEYS = ("NODES", "GPUS", "CPUS", "MIN_WC_TIME")
"""The keys a ``SHAPE`` line may set; the rest of the header holds for every shape."""

MAX_SIGNAL_LEAD = 2 * 3600.0
"""The longest warning a ``SIGNAL`` may ask for (seconds): two hours. The runner waits this
long for a task to save its work when it must stop, so a task cannot hold it for ever."""


_INT = re.compile(r"^[+-]?[0-9]+$")

INDEX = "{index}"
"""In a name of an array task (``AFTER prop.sh[{index}]``, ``CREATES``), its own index."""

TIMEOUT_WORD = "timeout"
"""The word ``REQUEUE_ON`` takes to requeue a task stopped at its ``TIME_LIMIT``."""

MAX_RETRY_DELAY = 7 * 86400.0
"""The longest ``RETRY_DELAY`` and its cap: a week. A longer wait is a task on hold."""

MAX_MEM = 1 << 50
"""The most ``MEM`` a task may ask for: a pebibyte, more than any node has."""

MAX_CREATES = 64
"""The most ``CREATES`` lines one task may have."""

_GLOB = re.compile(r"[*?\[]")
_MEM = re.compile(r"^([0-9]+(?:\.[0-9]+)?)([KMGTP]?)(I?B)?$", re.IGNORECASE)
_UNITS = {"": 1 << 20, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}


class BadValue(Exception):
    """A bad value; the parser adds the file and line."""


def _one(key: str, words: list[str], what: str) -> str:
    if len(words) != 1:
        got = "nothing" if not words else f"{len(words)} words"
        raise BadValue(f"{key} takes one value ({what}), got {got}")
    return words[0]


def _integer(key: str, words: list[str], *, least: int | None, most: int) -> int:
    word = _one(key, words, "a whole number")
    if not _INT.match(word) or len(word) > 30:
        raise BadValue(f"{key} must be a whole number, not {word[:40]!r}")
    value = int(word, 10)
    if least is not None and value < least:
        raise BadValue(f"{key} must be at least {least}, not {value}")
    if value > most or (least is None and value < -most):
        raise BadValue(f"{key} must be at most {most}, not {value}")
    return value


def _duration(key: str, word: str, *, positive: bool, most: float = MAX_WALL_CLOCK) -> float:
    try:
        value = parse_duration(word)
    except DurationError as e:
        raise BadValue(f"{key} {e}") from None
    if positive and value <= 0:
        raise BadValue(f"{key} must be more than zero, not {word!r}")
    if value > most:
        raise BadValue(f"{key} {word!r} is longer than the {format_duration(most)} it may be")
    return value


def _word(key: str, words: list[str], what: str) -> str:
    return _one(key, words, what)


def _signal_name(key: str, word: str) -> str:
    name = word.upper()
    name = name[3:] if name.startswith("SIG") else name
    if name in _UNCATCHABLE:
        raise BadValue(f"{key} cannot use {word}, which a task cannot catch; "
                       f"use USR1, USR2 or TERM")
    if name not in _SIGNAL_NAMES:
        raise BadValue(f"{key} has unknown signal {word!r}; "
                       f"use a name such as USR1, USR2 or TERM")
    if name not in WARNING_SIGNALS:
        raise BadValue(f"{key} cannot use {word}, which is not a signal a program catches to save "
                   f"its work; use one of {', '.join(WARNING_SIGNALS)}")
    return name


def _set_nodes(spec: dict, key: str, words: list[str]) -> None:
    value = _integer(key, words, least=None, most=MAX_NODES)
    if value < 0:
        raise BadValue(f"{key} must be at least 1, not {value}")
    # 0 is METAQ's GPU-only task; the header's check refuses it without GPUS.
    spec["nodes"] = value


def _set_min_nodes(spec: dict, key: str, words: list[str]) -> None:
    spec["min_nodes"] = _integer(key, words, least=1, most=MAX_NODES)


def _set_gpus(spec: dict, key: str, words: list[str]) -> None:
    spec["gpus"] = _integer(key, words, least=0, most=MAX_NODES)


def _set_cpus(spec: dict, key: str, words: list[str]) -> None:
    spec["cpus"] = _integer(key, words, least=1, most=MAX_NODES)


def _set_exclusive(spec: dict, key: str, words: list[str]) -> None:
    if words:
        raise BadValue(f"{key} takes no value")
    spec["exclusive"] = True


def _set_header_only(spec: dict, key: str, words: list[str]) -> None:
    if words:
        raise BadValue(f"{key} takes no value")
    spec["header_only"] = True


def _set_force(spec: dict, key: str, words: list[str]) -> None:
    if words:
        raise BadValue(f"{key} takes no value")
    spec["force"] = True


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
        raise BadValue(f"{key} needs a file path")
    text = " ".join(words)
    if any(c in text for c in "$`"):
        raise BadValue(f"{key} is a plain path and is never expanded by a shell, so it cannot "
                   f"contain $ or `")
    if text.startswith("~"):
        raise BadValue(f"{key} is a plain path and ~ is not expanded; write the full path")
    spec["log"] = text


def _set_type(spec: dict, key: str, words: list[str]) -> None:
    word = _one(key, words, "rigid, malleable or ondemand")
    try:
        spec["type"] = Kind(word.lower())
    except ValueError:
        raise BadValue(f"{key} {word!r} is unknown; use rigid, malleable or ondemand") from None


def _set_priority(spec: dict, key: str, words: list[str]) -> None:
    spec["priority"] = _integer(key, words, least=None, most=MAX_PRIORITY)


def _set_setup(spec: dict, key: str, words: list[str]) -> None:
    spec["setup"] = _duration(key, _one(key, words, "a duration"), positive=False)


def _set_checkpoint(spec: dict, key: str, words: list[str]) -> None:
    if len(words) != 2:
        raise BadValue(f"{key} takes two durations, the interval and the cost of one checkpoint "
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
        raise BadValue(f"{key} must start with in-place or restart")
    mode = words[0]
    if mode == ResizeMode.RESTART:
        if len(words) != 1:
            raise BadValue(f"{key} restart takes no signal; the task's SIGNAL warns it instead")
        spec["resize"] = Resize(mode=mode)
        return
    if len(words) > 2:
        raise BadValue(f"{key} in-place takes at most one signal name")
    sig = _signal_name(key, words[1]) if len(words) == 2 else "USR2"
    spec["resize"] = Resize(mode=mode, signal=sig)


def _set_after(spec: dict, key: str, words: list[str]) -> None:
    if not words:
        raise BadValue(f"{key} needs the name of a task, an array or a glob, such as {key} prop.sh")
    for word in words:
        if ".." in word.split("/") or word.startswith("/"):
            raise BadValue(f"{key} {word!r} must name a task inside the queue, without .. or a "
                       f"leading /")
    name = "after" if key == "AFTER" else "after_any"
    spec[name] = (*spec.get(name, ()), *words)


def _set_array(spec: dict, key: str, words: list[str]) -> None:
    text = _one(key, words, "indices such as 0-999, 1-99:2 or 1,5,7, and %4 to run at "
                            "most 4 at once")
    try:
        parse_array(text)
    except ValueError as e:
        raise BadValue(f"{key} {e}") from None
    spec["array"] = text


def _set_shape(spec: dict, key: str, words: list[str]) -> None:
    """One ``SHAPE`` line: pairs of a key and its value (``SHAPE NODES 8 MIN_WC_TIME 1h``),
    each read as the key itself reads it. What the line leaves out comes from the header, and
    the shape as a whole is checked once the header is read (:mod:`metaq_py.directives`)."""
    shapes = spec.setdefault("shapes", [])
    if len(shapes) >= MAX_SHAPES:
        raise BadValue(f"{key} is given more than {MAX_SHAPES} times; a task has at most "
                       f"{MAX_SHAPES + 1} shapes")
    if not words or len(words) % 2:
        raise BadValue(f"{key} takes pairs of a key and a value, such as "
                       f"{key} NODES 8 MIN_WC_TIME 1h")
    values: dict = {}
    for name, value in zip(words[::2], words[1::2], strict=True):
        if name not in SHAPE_KEYS:
            raise BadValue(f"{key} cannot set {name!r}; a shape sets only "
                           f"{', '.join(SHAPE_KEYS)}")
        field = name.lower()
        if field in values:
            raise BadValue(f"{key} sets {name} twice")
        KEYS[name](values, name, [value])
    shapes.append(values)


# --- a campaign's failure semantics (metaq_py.outcomes) ---------------------------------


def set_retry_delay(spec: dict, key: str, words: list[str]) -> None:
    """``RETRY_DELAY 30s`` or ``RETRY_DELAY 30s 1h``: the wait after a first failure, doubled
    after each one after it, never more than the cap (the queue's when not given)."""
    if len(words) not in (1, 2):
        raise BadValue(f"{key} takes the first delay and, if you like, the cap of its "
                       f"doubling, such as {key} 30s 1h")
    first = _duration(key, words[0], positive=False, most=MAX_RETRY_DELAY)
    cap = _duration(key, words[1], positive=False, most=MAX_RETRY_DELAY) if len(words) == 2 \
        else None
    if cap is not None and cap < first:
        raise BadValue(f"{key}'s cap {words[1]!r} is shorter than its first delay "
                       f"{words[0]!r}; write the shorter one first")
    spec["retry_delay"] = (first, cap)


def exit_codes(key: str, words: list[str], *, timeout: bool) -> tuple[str, ...]:
    """The exit codes ``words`` list, each a code from 1 to 255 or a range ``A-B`` (and
    ``timeout`` where ``timeout`` is true), normalised; ``none`` alone is the empty list."""
    if not words:
        raise BadValue(f"{key} needs exit codes, such as {key} 75, or none")
    if [w.lower() for w in words] == ["none"]:
        return ()
    out: list[str] = []
    for word in (w for item in words for w in item.split(",") if w):
        if timeout and word.lower() == TIMEOUT_WORD:
            out.append(TIMEOUT_WORD)
            continue
        lo, dash, hi = word.partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()) or len(word) > 9:
            extra = " or timeout" if timeout else ""
            raise BadValue(f"{key} {word!r} is not an exit code; write codes from 1 to 255, "
                           f"ranges such as 64-78{extra}")
        a, b = int(lo), int(hi) if dash else int(lo)
        for code in (a, b):
            if not 1 <= code <= 255:
                why = "0 is success" if code == 0 else "an exit code is at most 255"
                raise BadValue(f"{key} {word!r} is outside the exit codes 1-255 ({why})")
        if b < a:
            raise BadValue(f"{key} {word!r} counts down; write the smaller code first")
        out.append(str(a) if a == b else f"{a}-{b}")
    return tuple(dict.fromkeys(out))


def set_requeue_on(spec: dict, key: str, words: list[str]) -> None:
    spec["requeue_on"] = exit_codes(key, words, timeout=True)


def set_soft_fail_on(spec: dict, key: str, words: list[str]) -> None:
    spec["soft_fail_on"] = exit_codes(key, words, timeout=False)


def codes_of(items: tuple[str, ...]) -> frozenset[int]:
    """The codes a normalised list of :func:`exit_codes` names (``timeout`` aside)."""
    out: set[int] = set()
    for item in items:
        if item == TIMEOUT_WORD:
            continue
        lo, _, hi = item.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return frozenset(out)


def set_max_fails(spec: dict, key: str, words: list[str]) -> None:
    spec["max_fails"] = _integer(key, words, least=1, most=MAX_ARRAY)


def set_time_limit(spec: dict, key: str, words: list[str]) -> None:
    spec["time_limit"] = _duration(key, _one(key, words, "a duration"), positive=True)


def parse_mem(text: str) -> int:
    """Bytes from a size as ``sbatch --mem`` writes it: a number with ``K``, ``M``, ``G``,
    ``T`` or ``P`` (powers of 1024, ``B``/``iB`` allowed after), megabytes without a unit.
    Raises ``ValueError`` with one sentence."""
    m = _MEM.match(text.strip())
    if m is None:
        raise ValueError(f"{text[:40]!r} is not a size; write a number with K, M, G or T, "
                         f"such as 4G (megabytes without a unit, as sbatch --mem)")
    value = float(m.group(1)) * _UNITS[m.group(2).upper()]
    if value < 1 or value > MAX_MEM:
        raise ValueError(f"{text[:40]!r} is {'zero' if value < 1 else 'more than any node has'}")
    return int(value)


def set_mem(spec: dict, key: str, words: list[str]) -> None:
    if len(words) != 1:
        raise BadValue(f"{key} takes one size, such as {key} 4G")
    try:
        spec["mem"] = parse_mem(words[0])
    except ValueError as e:
        raise BadValue(f"{key} {e}") from None


def set_creates(spec: dict, key: str, words: list[str]) -> None:
    """One output (``CREATES out/cfg_{index}.h5``, ``CREATES out/run7_*.dat``): a path,
    absolute or relative to the queue root, with wildcards in its last part only."""
    if len(words) != 1:
        raise BadValue(f"{key} takes one path or glob per line (no spaces); give several "
                       f"{key} lines for several outputs")
    path = words[0]
    made = spec.setdefault("creates", ())
    if len(made) >= MAX_CREATES:
        raise BadValue(f"{key} is given more than {MAX_CREATES} times")
    if any(c in path for c in "$`") or path.startswith("~"):
        raise BadValue(f"{key} is a plain path, never expanded by a shell: no $, ` or ~")
    parts = path.split("/")
    if ".." in parts:
        raise BadValue(f"{key} {path!r} may not go up with ..")
    head, last = parts[:-1], parts[-1]
    if not last:
        raise BadValue(f"{key} {path!r} names a folder; name the files it holds")
    if any(_GLOB.search(p) for p in head):
        raise BadValue(f"{key} {path!r} has a wildcard in a folder's name; wildcards may be "
                       f"used in the file's name only, so each output is one folder's look")
    if "**" in last:
        raise BadValue(f"{key} {path!r} uses **; outputs are matched in one folder, without "
                       f"descending")
    bare = last.replace(INDEX, "")
    if "{" in path.replace(INDEX, "") or "}" in path.replace(INDEX, ""):
        raise BadValue(f"{key} {path!r} has a brace that is not {INDEX}")
    if bare and bare.strip("*?") == "" and _GLOB.search(last):
        raise BadValue(f"{key} {path!r} would match every file of its folder; name the "
                       f"outputs more closely")
    spec["creates"] = (*made, path)


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
    # Several sizes, the one that starts soonest taken (mpi_jm's task sizes).
    "SHAPE": _set_shape,
    # Campaigns: arrays and dependencies (SLURM's --array and --dependency).
    "ARRAY": _set_array,
    "AFTER": _set_after,
    "AFTER_ANY": _set_after,
    # A campaign's failure semantics (Merlin, HyperQueue, SLURM; metaq_py.outcomes).
    "RETRY_DELAY": set_retry_delay,
    "REQUEUE_ON": set_requeue_on,
    "SOFT_FAIL_ON": set_soft_fail_on,
    "MAX_FAILS": set_max_fails,
    "TIME_LIMIT": set_time_limit,
    "MEM": set_mem,
    "CREATES": set_creates,
    "FORCE": _set_force,
    # The header is all: #METAQ lines below the first command belong to the script's body.
    "HEADER_ONLY": _set_header_only,
}
"""Every directive key, mapped to the function that reads its value."""

