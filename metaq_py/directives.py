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
one sentence (:class:`~metaq_py.errors.TaskError`). A ``#METAQ`` line after the first command
is an error too, unless the header says ``#METAQ HEADER_ONLY``: METAQ read such lines (it
grepped the whole file), so a script written for it would otherwise run at the wrong size.
Values are plain words: nothing is ever expanded by a shell. ``docs/user-guide.md`` lists every key.

:func:`parse_header` works on bytes and never raises anything but ``TaskError``;
:func:`read_task` reads a file with the checks a file needs (executable, at most
:data:`HEADER_LIMIT` bytes of header, symlink loops, files that vanish while being read).
:func:`format_directives` writes a :class:`~metaq_py.task_spec.TaskSpec` back as directive
lines. What each key accepts is in :mod:`metaq_py.directive_keys`; the value a header
becomes, :class:`~metaq_py.task_spec.TaskSpec`, is in :mod:`metaq_py.task_spec`.
"""

from __future__ import annotations

import difflib
import errno
import os
import re
import stat

from metaq_py.directive_keys import KEYS, REPEATABLE, BadValue
from metaq_py.durations import format_duration
from metaq_py.errors import TaskError, TaskVanished
from metaq_py.hybrid import Kind
from metaq_py.task_spec import TaskShape, TaskSpec

__all__ = [
    "HEADER_LIMIT",
    "SCRIPT_LIMIT",
    "format_directives",
    "miscased_directives",
    "not_executable",
    "parse_header",
    "read_head",
    "read_script",
    "read_task",
]

HEADER_LIMIT = 64 * 1024
"""At most this many bytes are read from a task script to find its header."""

SCRIPT_LIMIT = 16 * 1024 * 1024
"""The largest task file (bytes) a runner runs: it reads the whole file once, checks it, and
runs those very bytes (see :mod:`metaq_py.program`)."""

PREFIX = "#METAQ"

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")

_COMMENT = re.compile(r"\s#.*$")


# --- parsing -------------------------------------------------------------------------------


def parse_header(data: bytes, *, path: str, truncated: bool = False,
                 header_only: bool = False) -> TaskSpec:
    """Read the directives of a task script given as bytes.

    ``data`` is the start of the file; ``truncated`` says the file goes on beyond it (so a
    header still open at the end of ``data`` is too long rather than complete).
    ``header_only`` reads the header as if it said ``#METAQ HEADER_ONLY`` (``metaq submit
    --header-only``, which then writes that line into the queued copy). Raises
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
    shape_lines: list[int] = []
    ended = 0
    for number, line in enumerate(lines, start=1):
        if number == 1:
            continue
        text = line.strip()
        if not text:
            continue
        if text[0] != "#":
            ended = number
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
        except BadValue as e:
            raise TaskError(path, number, str(e)) from None
        seen[key] = number
        if key == "SHAPE":
            shape_lines.append(number)
    if truncated and not ended:
        raise TaskError(path, None, f"the header runs past {HEADER_LIMIT // 1024} KiB without "
                                    f"ending; put a command after the #METAQ lines")
    if header_only:
        values["header_only"] = True
    elif ended and "HEADER_ONLY" not in seen:
        _refuse_late(data, ended, path, truncated)
    return _checked(values, seen, path, shape_lines)


def _starts_directive(data: bytes, at: int) -> bool:
    """Whether the ``#METAQ`` at offset ``at`` begins a line that would be a directive in the
    header: only blanks before it on its line, and a blank after it."""
    line = data.rfind(b"\n", 0, at) + 1
    return not data[line:at].strip(b" \t\r\f\v") and data[at + 6:at + 7] in (b" ", b"\t")


def _refuse_late(data: bytes, command: int, path: str, truncated: bool) -> None:
    """Refuse a ``#METAQ`` line below line ``command``, the first command of ``data``: the
    shell takes it for a comment, METAQ read it as a directive, so a script moved from METAQ
    would silently run at another size. Only whole lines count (a ``truncated`` head's last
    piece is not one)."""
    start = 0
    for _ in range(command):
        start = data.find(b"\n", start) + 1
        if start == 0:
            return  # the command is the last line
    end = data.rfind(b"\n") + 1 if truncated else len(data)
    at = data.find(b"#METAQ", start, end)  # memchr-fast: most bodies have none
    while at >= 0 and not _starts_directive(data, at):
        at = data.find(b"#METAQ", at + 6, end)
    if at >= 0:
        raise TaskError(path, data.count(b"\n", 0, at) + 1,
                        f"this #METAQ line comes after the first command (line {command}), so "
                        f"it would be ignored; move it above line {command}, or write '#METAQ "
                        f"HEADER_ONLY' in the header (metaq submit --header-only) if the line "
                        f"belongs to the script's body")


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


def _checked(values: dict, seen: dict[str, int], path: str,
             shape_lines: list[int] | None = None) -> TaskSpec:
    kind = values.get("type", Kind.RIGID)
    shapes = values.pop("shapes", [])
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
    if nodes == 0:
        _gpu_share(values, seen, path, kind)

    if values.get("min_nodes", 0) > nodes:
        raise TaskError(path, seen["MIN_NODES"], f"MIN_NODES {values['min_nodes']} is more than "
                                                 f"NODES {nodes}; NODES is the maximum")
    lines = tuple(seen.items())
    if shapes:
        values["shapes"] = _shapes(shapes, values, seen, path, shape_lines or [])
        # every SHAPE line is kept, in order, so that each shape's errors name its own line
        lines = (*((k, n) for k, n in lines if k != "SHAPE"),
                 *(("SHAPE", n) for n in shape_lines or []))
    return TaskSpec(path=path, lines=lines, **values)


def _shapes(given: list[dict], values: dict, seen: dict[str, int], path: str,
            lines: list[int]) -> tuple[TaskShape, ...]:
    """The ``SHAPE`` lines as whole shapes: what a line leaves out comes from the header
    (``values``, already checked). A line that sets ``NODES`` or ``CPUS`` gives the whole size
    (``CPUS`` a share of one node; ``NODES`` whole nodes, ``NODES 0`` METAQ's GPU-only share);
    ``GPUS`` and ``MIN_WC_TIME`` are kept from the header unless set."""
    kind = values.get("type", Kind.RIGID)
    if kind is not Kind.RIGID:
        why = ("a malleable task already runs at any size from MIN_NODES to NODES"
               if kind is Kind.MALLEABLE else "an on-demand task starts at once, at one size")
        raise TaskError(path, lines[0], f"SHAPE applies only to rigid tasks; {why}")
    own = TaskShape(nodes=values.get("nodes", 1), gpus=values.get("gpus", 0),
                    cpus=values.get("cpus", 0), min_wc_time=values.get("min_wc_time"),
                    gpu_share=values.get("gpu_share", False))
    out: list[TaskShape] = []
    for line, d in zip(lines, given, strict=True):
        gpus = d.get("gpus", own.gpus)
        nodes, cpus, share = own.nodes, own.cpus, own.gpu_share
        if "cpus" in d:
            if d.get("nodes", 1) != 1:
                raise TaskError(path, line, "SHAPE with CPUS is a share of one node; remove "
                                            "its NODES or write NODES 1")
            nodes, cpus, share = 1, d["cpus"], False
        elif "nodes" in d:
            nodes, cpus, share = d["nodes"], 0, False
            if nodes == 0:
                if not gpus:
                    raise TaskError(path, line, "SHAPE NODES 0 is METAQ's GPU-only task, "
                                                "which needs GPUS too")
                nodes, share = 1, True
        if (cpus or share) and "EXCLUSIVE" in seen:
            raise TaskError(path, line, "this SHAPE is a share of one node, and EXCLUSIVE "
                                        "keeps whole nodes; remove one of them")
        shape = TaskShape(nodes=nodes, gpus=gpus, cpus=cpus,
                          min_wc_time=d.get("min_wc_time", own.min_wc_time), gpu_share=share)
        if shape == own or shape in out:
            twin = "the header's own" if shape == own else f"line {lines[out.index(shape)]}'s"
            raise TaskError(path, line, f"this SHAPE is the same as {twin}; remove it")
        out.append(shape)
    return tuple(out)


def _gpu_share(values: dict, seen: dict[str, int], path: str, kind: Kind) -> None:
    """Make METAQ's ``NODES 0`` with ``GPUS``, a GPU-only task, a share of one node."""
    if not values.get("gpus"):
        raise TaskError(path, seen["NODES"], "NODES must be at least 1, not 0. NODES 0 is "
                                             "METAQ's GPU-only task, which needs GPUS too")
    for key, bad in (("EXCLUSIVE", "EXCLUSIVE" in seen), ("TYPE", kind is not Kind.RIGID)):
        if bad:
            raise TaskError(path, seen[key], f"NODES 0 asks for a share of one node's GPUs, "
                                             f"which only a rigid task gets; remove {key} or "
                                             f"write NODES 1")
    values["nodes"] = 1
    values["gpu_share"] = True


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
    data, st = _read_task(str(path), HEADER_LIMIT)
    return data[:HEADER_LIMIT], len(data) > HEADER_LIMIT, st


def read_script(path: str | os.PathLike[str]) -> tuple[bytes, os.stat_result]:
    """The whole task file at ``path`` (at most :data:`SCRIPT_LIMIT` bytes) and the ``stat``
    of the opened file, with the checks and sentences of :func:`read_head`: the bytes a
    runner checks and then runs, never the path again."""
    name = str(path)
    data, st = _read_task(name, SCRIPT_LIMIT)
    if len(data) > SCRIPT_LIMIT:
        raise TaskError(name, None, f"the file is more than {SCRIPT_LIMIT >> 20} MiB; a task "
                                    f"is a script, which may run a large program by its path")
    return data, st


def _read_task(name: str, limit: int) -> tuple[bytes, os.stat_result]:
    """At most ``limit + 1`` bytes of the task file ``name`` (a regular, executable file;
    never blocking on a FIFO) and its ``fstat``."""
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
            raise TaskError(name, None, not_executable(name))
        chunks = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
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
    return b"".join(chunks), st


def not_executable(name: str) -> str:
    """The sentence for a task file ``name`` without an execute bit."""
    return f"the script is not executable; run chmod +x {name}"


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
    out: list[tuple[str, str]] = [("NODES", "0" if spec.gpu_share else str(spec.nodes))]
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
    for shape in spec.shapes:
        out.append(("SHAPE", _shape_words(shape)))
    if spec.array is not None:
        out.append(("ARRAY", spec.array))
    if spec.after:
        out.append(("AFTER", " ".join(spec.after)))
    if spec.after_any:
        out.append(("AFTER_ANY", " ".join(spec.after_any)))
    if spec.header_only:
        out.append(("HEADER_ONLY", ""))
    out.extend(_failure_lines(spec))
    return "".join(f"{PREFIX} {key} {value}".rstrip() + "\n" for key, value in out)


def _failure_lines(spec: TaskSpec) -> list[tuple[str, str]]:
    """The lines of a spec's failure semantics (:mod:`metaq_py.outcomes`)."""
    out: list[tuple[str, str]] = []
    if spec.retry_delay is not None:
        first, cap = spec.retry_delay
        out.append(("RETRY_DELAY", format_duration(first) if cap is None
                    else f"{format_duration(first)} {format_duration(cap)}"))
    for key, codes in (("REQUEUE_ON", spec.requeue_on), ("SOFT_FAIL_ON", spec.soft_fail_on)):
        if codes is not None:
            out.append((key, " ".join(codes) or "none"))
    if spec.max_fails is not None:
        out.append(("MAX_FAILS", str(spec.max_fails)))
    if spec.time_limit is not None:
        out.append(("TIME_LIMIT", format_duration(spec.time_limit)))
    if spec.mem is not None:
        unit = next(u for u in "TGMK" if spec.mem % (1 << (10 * ("KMGT".index(u) + 1))) == 0
                    or u == "K")
        out.append(("MEM", f"{spec.mem // (1 << (10 * ('KMGT'.index(unit) + 1)))}{unit}"))
    out.extend(("CREATES", path) for path in spec.creates)
    if spec.force:
        out.append(("FORCE", ""))
    return out


def _shape_words(shape: TaskShape) -> str:
    """A ``SHAPE`` line's words that give ``shape`` whole, whatever the header says."""
    if shape.cpus:
        words = [f"CPUS {shape.cpus}"]
    else:
        words = [f"NODES {0 if shape.gpu_share else shape.nodes}"]
    words.append(f"GPUS {shape.gpus}")
    if shape.min_wc_time is not None:
        words.append(f"MIN_WC_TIME {format_duration(shape.min_wc_time)}")
    return " ".join(words)
