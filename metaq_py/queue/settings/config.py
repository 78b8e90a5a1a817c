"""Queue-wide settings, read from ``metaq.yaml`` at the queue root.

Every setting is optional; a queue without the file uses the defaults below. A bad setting is
a :class:`~metaq_py.errors.ConfigError` naming the key and its line.
:data:`~metaq_py.queue.settings.template.TEMPLATE` is the commented file ``metaq init``
writes; ``docs/user-guide.md`` explains each setting.

Over 500 lines on purpose: each section's value (a dataclass) sits beside the function that
reads it, one schema read in one pass by every command. Its YAML reader (``_Reader``, 70 lines)
would be the one part to split off, but every command loads it with the settings, so a module
of its own costs each command an import (the counts ``tests/test_architecture.py`` bounds) for
no reader that needs it alone.
"""

from __future__ import annotations

import grp
import os
import pwd
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from metaq_py.directive_keys import MAX_RETRY_DELAY, BadValue, exit_codes
from metaq_py.durations import DurationError, parse_duration
from metaq_py.errors import ConfigError
from metaq_py.queue.disk.fileio import Refused, read_regular
from metaq_py.queue.settings.trust import settings_problem

__all__ = ["ALLOC_SYSTEMS", "CONFIG_NAME", "LARGEST_FIRST", "ORDERS", "OUTPUTS", "SUBMIT",
           "AllocSettings", "Caps", "Defaults", "MpiSettings", "QueueConfig",
           "default_folder",
           "load_config"]

CONFIG_NAME = "metaq.yaml"

CONFIG_LIMIT = 256 * 1024
"""The largest ``metaq.yaml`` (bytes) that is read; the commented template is 2 KiB."""

MAX_INTERVAL = 86400.0
"""The longest ``heartbeat`` and ``poll_interval`` (seconds): a day."""

MAX_STALE_AFTER = 7 * 86400.0
"""The longest ``stale_after`` (seconds): a week."""

SUBMIT, LARGEST_FIRST = "submit", "largest-first"
ORDERS = (SUBMIT, LARGEST_FIRST)
"""The values of ``order``: which of two waiting tasks in the same folder and with the same
``PRIORITY`` goes first. ``submit``: the earlier original submit time. ``largest-first``: the
one needing more nodes (its smallest size: ``NODES``, or ``MIN_NODES`` of a malleable task,
the count EASY holds nodes for), then the earlier submit time."""

OUTPUTS = ("files", "streams")
"""The values of ``output``: a log file per task, or a few stream files per batch job."""

STATE_FOLDERS = ("hold", "working", "finished", "failed", "rejected", "cancelled", "notices",
                 "jobs", "alloc")
"""Folders of the queue that hold tasks in other states; never task folders."""


@dataclass(frozen=True, slots=True)
class Defaults:
    """What a task gets when it does not say: its wall clock, how often it is retried and
    how long after a failure (``retry_delay``, doubled after each failure in a row up to
    ``retry_delay_cap``), which exit codes requeue it or finish it with a warning
    (``requeue_on``, ``soft_fail_on``, as :func:`~metaq_py.directive_keys.exit_codes` writes
    them), and
    when a running task is stopped (``time_limit``; ``None``: never before its allocation
    ends)."""

    min_wc_time: float = 3600.0
    retries: int = 0
    retry_delay: float = 0.0
    retry_delay_cap: float = 3600.0
    requeue_on: tuple[str, ...] = ("75",)
    soft_fail_on: tuple[str, ...] = ()
    time_limit: float | None = None


@dataclass(frozen=True, slots=True)
class Caps:
    """Upper limits. A task asking for more nodes, GPUs or wall clock is rejected; a task whose
    runs ended without success ``attempts`` times goes to ``failed/`` instead of back to its
    folder (a guard against a task that keeps killing its batch job). ``None``: no cap."""

    nodes: int | None = None
    gpus: int | None = None
    min_wc_time: float | None = None
    attempts: int = 5
    tasks: int = 64
    """At most this many tasks run at once in one batch job (``metaq run --max-tasks``): each is
    a process on the batch node, which is shared with other users."""
    requeues: int = 20
    """A task that exits with a ``REQUEUE_ON`` code this many times in all goes to
    ``failed/``: a requeue spends no retry, so this is the guard against one that always
    asks to be run later."""
    launch_pause: float = 0.05
    """Seconds a batch job waits between two launches (``metaq run --launch-pause``), so a
    burst of starts never floods the batch node or the batch system's controller."""


ALLOC_SYSTEMS = ("slurm", "pbs")
"""The batch systems ``metaq alloc`` submits to."""


@dataclass(frozen=True, slots=True)
class AllocSettings:
    """How ``metaq alloc`` sizes and submits allocations for this queue (``alloc:``).

    An allocation gets between ``min_nodes`` and ``max_nodes`` nodes and a walltime between
    ``min_walltime`` and ``max_walltime``; ``margin`` is added to the longest waiting task's
    ``MIN_WC_TIME`` (start-up, the runner's stop before the end). At most ``max_allocations``
    of this queue's allocations are queued or running at once, of which at most ``max_queued``
    wait to start. After a failed submission none is tried for ``backoff``. ``system`` is
    ``slurm`` or ``pbs`` (``None``: whichever of ``sbatch`` and ``qsub`` is installed);
    ``jobscript`` the batch script (``None``: metaq-py's own, :func:`metaq_py.share.jobscript`);
    ``account``, ``partition`` (a PBS queue), ``qos`` (SLURM only) and ``flags`` (passed as
    they are) go on the submit command line."""

    system: str | None = None
    jobscript: str | None = None
    min_nodes: int = 1
    max_nodes: int = 4
    min_walltime: float = 600.0
    max_walltime: float = 86400.0
    margin: float = 300.0
    max_allocations: int = 1
    max_queued: int = 1
    backoff: float = 300.0
    account: str | None = None
    partition: str | None = None
    qos: str | None = None
    flags: tuple[str, ...] = ()


MPI_LAUNCHERS = ("srun", "mpiexec", "mpirun", "aprun", "jsrun")
"""The launchers ``mpi.launcher`` may name (:mod:`metaq_py.launch.binding` writes their lines)."""


@dataclass(frozen=True, slots=True)
class MpiSettings:
    """How ``$METAQ_MPIRUN`` starts a task's ranks (``mpi:``): ``launcher`` is one of
    :data:`MPI_LAUNCHERS`, the kind of launcher, which says how its line is written (``None``:
    detected, ``srun`` in a SLURM job); ``executable`` is the program that line starts, a name
    on ``PATH`` or a path (``None``: the launcher's own name), for a launcher installed under
    another name (Debian's ``mpirun.openmpi`` beside MPICH's ``mpirun``); ``args`` go right
    after it (``--mpi=pmi2``, ...)."""

    launcher: str | None = None
    executable: str | None = None
    args: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class QueueConfig:
    """The settings of one queue.

    ``folders``: the task folders, scanned in this order (a task in an earlier folder goes
    first). ``order``: one of :data:`ORDERS`, which waiting task goes first among those of the
    same folder and ``PRIORITY``. ``trusted_users``: if not empty, only tasks owned by these
    users are accepted. ``group``: the collaboration's group; files and folders writable by it
    are trusted (any other group- or world-writable path is refused). ``log_roots``: when set,
    the only folders (absolute) a task's ``LOG`` may write under, besides the queue's
    ``jobs/`` (always the first); unset, a ``LOG`` may go wherever the task's owner may write.
    ``heartbeat``: seconds between lease heartbeats; ``stale_after``: a lease not renewed for
    this long is considered lost; ``poll_interval``: seconds between rescans when no
    file-system event arrives (NFS and Lustre deliver none from other hosts).
    """

    folders: tuple[str, ...] = ("priority", "todo")
    order: str = SUBMIT
    trusted_users: tuple[str, ...] = ()
    group: str | None = None
    log_roots: tuple[str, ...] = ()
    defaults: Defaults = field(default_factory=Defaults)
    caps: Caps = field(default_factory=Caps)
    alloc: AllocSettings = field(default_factory=AllocSettings)
    mpi: MpiSettings = field(default_factory=MpiSettings)
    heartbeat: float = 30.0
    stale_after: float = 600.0
    poll_interval: float = 5.0
    output: str = "files"
    """Where tasks' output goes (:data:`OUTPUTS`): ``files``, a log file per task in
    ``jobs/<jobid>/logs/``; ``streams``, a few framed stream files per batch job
    (:mod:`metaq_py.queue.streams`, read with ``metaq log``). A ``LOG`` gets its file
    either way."""

    @property
    def gid(self) -> int | None:
        """The numeric id of :attr:`group`, or ``None``."""
        if self.group is None:
            return None
        return _gid(self.group)

    @property
    def trusted_uids(self) -> frozenset[int]:
        """Numeric ids of :attr:`trusted_users` (empty: everyone)."""
        return frozenset(_uid(u) for u in self.trusted_users)

    @property
    def default_folder(self) -> str:
        """The task folder a task of no stated folder goes to (``metaq submit`` without
        ``--folder``, a running task whose lease is lost): ``todo`` if it is a task folder,
        else the last (least urgent) one, so that such a task never jumps the queue."""
        return default_folder(self.folders)


def default_folder(folders: tuple[str, ...]) -> str:
    """Of the task folders ``folders``, the one a task of no stated folder goes to (see
    :attr:`QueueConfig.default_folder`)."""
    return "todo" if "todo" in folders else folders[-1]


def _gid(name: str) -> int:
    if name.isdigit():
        return int(name)
    return grp.getgrnam(name).gr_gid


def _uid(name: str) -> int:
    if name.isdigit():
        return int(name)
    return pwd.getpwnam(name).pw_uid


# --- loading -------------------------------------------------------------------------------


class _Reader:
    """Turns a composed YAML mapping into typed values, keeping line numbers for errors."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, node: yaml.Node | None, key: str, message: str) -> ConfigError:
        line = node.start_mark.line + 1 if node is not None else None
        return ConfigError(str(self.path), line, key, message)

    def mapping(self, node: yaml.Node, key: str | None) -> dict[str, tuple[yaml.Node, Any]]:
        if not isinstance(node, yaml.MappingNode):
            raise self.fail(node, key or "(top level)", "must be a mapping of settings")
        out: dict[str, tuple[yaml.Node, Any]] = {}
        for k, v in node.value:
            name = k.value if isinstance(k, yaml.ScalarNode) else str(k.value)
            full = f"{key}.{name}" if key else name
            if name in out:
                raise self.fail(k, full, "is given twice")
            out[name] = (k, v)
        return out

    def scalar(self, node: yaml.Node, key: str) -> Any:
        if isinstance(node, yaml.ScalarNode) and node.tag.endswith(":null"):
            return None
        if not isinstance(node, yaml.ScalarNode):
            raise self.fail(node, key, "must be a single value")
        return yaml.safe_load(yaml.serialize(node))

    def words(self, node: yaml.Node, key: str) -> tuple[str, ...]:
        if isinstance(node, yaml.ScalarNode) and node.tag.endswith(":null"):
            return ()
        if not isinstance(node, yaml.SequenceNode):
            raise self.fail(node, key, "must be a list, such as [a, b]")
        out = []
        for item in node.value:
            value = self.scalar(item, key)
            if not isinstance(value, str | int) or isinstance(value, bool) or not str(value):
                raise self.fail(item, key, "must list names")
            out.append(str(value))
        return tuple(out)

    def integer(self, node: yaml.Node, key: str, *, least: int, optional: bool) -> int | None:
        value = self.scalar(node, key)
        if value is None and optional:
            return None
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.fail(node, key, f"must be a whole number, not {value!r}")
        if value < least:
            raise self.fail(node, key, f"must be at least {least}, not {value}")
        return value

    def duration(self, node: yaml.Node, key: str, *, optional: bool,
                 most: float | None = None) -> float | None:
        value = self.scalar(node, key)
        if value is None and optional:
            return None
        if isinstance(value, bool) or value is None:
            raise self.fail(node, key, "must be a duration such as 30s, 10m or 1:00:00")
        if isinstance(value, int | float):
            # YAML 1.1 reads 1:00:00 as a sexagesimal integer; the scalar text is what we want.
            value = node.value
        try:
            seconds = parse_duration(str(value))
        except DurationError as e:
            raise self.fail(node, key, str(e)) from None
        if seconds <= 0:
            raise self.fail(node, key, "must be more than zero")
        if most is not None and seconds > most:
            raise self.fail(node, key, f"must be at most {most:g} seconds")
        return seconds


def load_config(root: str | os.PathLike[str]) -> QueueConfig:
    """The settings of the queue at ``root``: its ``metaq.yaml``, or the defaults without one.
    A file that fails :func:`settings_problem` is refused (:class:`ConfigError`)."""
    root = Path(root)
    path = root / CONFIG_NAME
    try:
        raw, st = read_regular(path, limit=CONFIG_LIMIT)
        text = raw.decode("utf-8")
    except Refused as e:
        if e.vanished:
            return _with_roots(QueueConfig(), root)
        raise ConfigError(str(path), None, None, e.why) from None
    except UnicodeDecodeError:
        raise ConfigError(str(path), None, None, "the file is not UTF-8 text") from None
    try:
        owner = os.stat(root).st_uid
    except OSError:
        owner = st.st_uid
    why = settings_problem(st, owner=owner, reader=os.geteuid())
    if why is not None:
        raise ConfigError(str(path), None, None, f"refused: {why}")
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except RecursionError:
        raise ConfigError(str(path), None, None, "nests too deeply to be settings") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        problem = getattr(e, "problem", None) or "is not valid YAML"
        line = mark.line + 1 if mark is not None else None
        raise ConfigError(str(path), line, None, f"is not valid YAML: {problem}") from None
    if node is None:
        return _with_roots(QueueConfig(), root)
    r = _Reader(path)
    settings = r.mapping(node, None)
    values: dict[str, Any] = {}
    readers: dict[str, Callable[[yaml.Node, yaml.Node, str], Any]] = {
        "folders": lambda k, v, key: _folders(r, v, key),
        "order": lambda k, v, key: _order(r, v, key),
        "trusted_users": lambda k, v, key: _users(r, v, key),
        "group": lambda k, v, key: _group(r, v, key),
        "log_roots": lambda k, v, key: r.words(v, key),
        "defaults": lambda k, v, key: _defaults(r, v, key),
        "caps": lambda k, v, key: _caps(r, v, key),
        "alloc": lambda k, v, key: _alloc(r, v, key),
        "mpi": lambda k, v, key: _mpi(r, v, key),
        "heartbeat": lambda k, v, key: r.duration(v, key, optional=False, most=MAX_INTERVAL),
        "stale_after": lambda k, v, key: r.duration(v, key, optional=False,
                                                    most=MAX_STALE_AFTER),
        "poll_interval": lambda k, v, key: r.duration(v, key, optional=False,
                                                      most=MAX_INTERVAL),
        "output": lambda k, v, key: _output(r, v, key),
    }
    for name, (k, v) in settings.items():
        reader = readers.get(name)
        if reader is None:
            raise r.fail(k, name, f"is unknown; known settings are {', '.join(readers)}")
        values[name] = reader(k, v, name)
    config = QueueConfig(**values)
    if config.stale_after <= config.heartbeat:
        k, _ = settings.get("stale_after", settings.get("heartbeat", (None, None)))
        raise r.fail(k, "stale_after", "must be longer than heartbeat, or every lease would "
                                       "look lost between two heartbeats")
    return _with_roots(config, root)


def _with_roots(config: QueueConfig, root: Path) -> QueueConfig:
    base = root.absolute()
    roots = [str(base / "jobs")]
    for entry in config.log_roots:
        p = Path(entry)
        roots.append(os.path.normpath(p if p.is_absolute() else base / p))
    return replace(config, log_roots=tuple(dict.fromkeys(roots)))


def _folders(r: _Reader, node: yaml.Node, key: str) -> tuple[str, ...]:
    names = r.words(node, key)
    if not names:
        raise r.fail(node, key, "must name at least one task folder")
    for name in names:
        if "/" in name or name.startswith(".") or name in STATE_FOLDERS:
            raise r.fail(node, key, f"cannot use {name!r}; a task folder is a plain name that "
                                    f"is not hidden and not one of {', '.join(STATE_FOLDERS)}")
    if len(set(names)) != len(names):
        raise r.fail(node, key, "lists a folder twice")
    return names


def _order(r: _Reader, node: yaml.Node, key: str) -> str:
    value = r.scalar(node, key)
    if value not in ORDERS:
        known = f"{', '.join(ORDERS[:-1])} and {ORDERS[-1]}"
        given = "is empty" if value is None else f"is {value!r}, which is not a known order"
        raise r.fail(node, key, f"{given}; the known orders are {known}")
    return value


def _output(r: _Reader, node: yaml.Node, key: str) -> str:
    value = r.scalar(node, key)
    if value not in OUTPUTS:
        raise r.fail(node, key, f"is {value!r}; it is one of {' and '.join(OUTPUTS)}")
    return value


def _users(r: _Reader, node: yaml.Node, key: str) -> tuple[str, ...]:
    names = r.words(node, key)
    for name in names:
        try:
            _uid(name)
        except KeyError:
            raise r.fail(node, key, f"names {name!r}, who is not a user on this system") from None
    return names


def _group(r: _Reader, node: yaml.Node, key: str) -> str | None:
    value = r.scalar(node, key)
    if value is None:
        return None
    try:
        _gid(str(value))
    except KeyError:
        raise r.fail(node, key, f"names {value!r}, which is not a group on this system") from None
    return str(value)


def _defaults(r: _Reader, node: yaml.Node, key: str) -> Defaults:
    values: dict[str, Any] = {}
    for name, (k, v) in r.mapping(node, key).items():
        full = f"{key}.{name}"
        if name == "min_wc_time":
            values[name] = r.duration(v, full, optional=False)
        elif name == "retries":
            values[name] = r.integer(v, full, least=0, optional=False)
        elif name in ("retry_delay", "retry_delay_cap"):
            values[name] = _delay(r, v, full)
        elif name == "time_limit":
            values[name] = r.duration(v, full, optional=True)
        elif name in ("requeue_on", "soft_fail_on"):
            single = isinstance(v, yaml.ScalarNode) and not v.tag.endswith(":null")
            words = [str(v.value)] if single else [*r.words(v, full)] or ["none"]
            try:
                values[name] = exit_codes(full, words, timeout=name == "requeue_on")
            except BadValue as e:
                raise r.fail(v, full, str(e).removeprefix(full + " ")) from None
        else:
            raise r.fail(k, full, "is unknown; known defaults are min_wc_time, retries, "
                                  "retry_delay, retry_delay_cap, requeue_on, soft_fail_on "
                                  "and time_limit")
    d = Defaults(**values)
    if d.retry_delay > d.retry_delay_cap:
        raise r.fail(node, f"{key}.retry_delay", "is longer than retry_delay_cap; the cap "
                                                 "must be at least the first delay")
    return d


def _delay(r: _Reader, node: yaml.Node, key: str) -> float:
    zero = isinstance(node, yaml.ScalarNode) and node.value.strip() in ("0", "0s", "0.0")
    value = 0.0 if zero else r.duration(node, key, optional=False)
    assert value is not None  # not optional: a missing value was refused
    if value > MAX_RETRY_DELAY:
        raise r.fail(node, key, f"is longer than the {MAX_RETRY_DELAY / 86400:.0f} days a "
                                f"retry delay may be")
    return value


def _caps(r: _Reader, node: yaml.Node, key: str) -> Caps:
    values: dict[str, Any] = {}
    for name, (k, v) in r.mapping(node, key).items():
        full = f"{key}.{name}"
        if name in ("nodes", "gpus"):
            values[name] = r.integer(v, full, least=0 if name == "gpus" else 1, optional=True)
        elif name == "min_wc_time":
            values[name] = r.duration(v, full, optional=True)
        elif name in ("attempts", "tasks", "requeues"):
            values[name] = r.integer(v, full, least=1, optional=False)
        elif name == "launch_pause":
            # 0 turns the pause off; any other value is a duration like every other one.
            zero = isinstance(v, yaml.ScalarNode) and v.value.strip() in ("0", "0s", "0.0")
            values[name] = 0.0 if zero else r.duration(v, full, optional=False)
        else:
            raise r.fail(k, full, "is unknown; known caps are nodes, gpus, min_wc_time, "
                                  "attempts, requeues, tasks and launch_pause")
    return Caps(**values)


_ALLOC_WORDS = ("system", "jobscript", "account", "partition", "qos")
_ALLOC_COUNTS = {"min_nodes": 1, "max_nodes": 1, "max_allocations": 1, "max_queued": 1}
_ALLOC_TIMES = ("min_walltime", "max_walltime", "margin", "backoff")


def _mpi(r: _Reader, node: yaml.Node, key: str) -> MpiSettings:
    values: dict[str, Any] = {}
    for name, (k, v) in r.mapping(node, key).items():
        full = f"{key}.{name}"
        if name == "launcher":
            value = r.scalar(v, full)
            if value is not None and value not in MPI_LAUNCHERS:
                raise r.fail(v, full, f"is {value!r}, which is not a launcher metaq knows; "
                                      f"the known launchers are {', '.join(MPI_LAUNCHERS)}")
            values[name] = value
        elif name == "executable":
            value = r.scalar(v, full)
            if value is not None and (not isinstance(value, str) or not value.strip()
                                      or any(c.isspace() for c in value)):
                raise r.fail(v, full, f"is {value!r}; give the launcher's program as one word, "
                                      f"a name on PATH or a path without spaces")
            values[name] = value
        elif name == "args":
            values[name] = r.words(v, full)
            bad = [w for w in values[name] if any(c.isspace() for c in w)]
            if bad:
                raise r.fail(v, full, f"has {bad[0]!r}; give each word of the options as its "
                                      f"own list item")
        else:
            raise r.fail(k, full, "is unknown; known mpi settings are launcher, executable "
                                  "and args")
    if values.get("executable") is not None and values.get("launcher") is None:
        raise r.fail(node, f"{key}.executable", "is set without mpi.launcher; name the kind of "
                                                "launcher it is too (its name alone does not "
                                                "tell MPICH's mpirun from Open MPI's)")
    return MpiSettings(**values)


def _alloc(r: _Reader, node: yaml.Node, key: str) -> AllocSettings:
    values: dict[str, Any] = {}
    keys: dict[str, yaml.Node] = {}
    for name, (k, v) in r.mapping(node, key).items():
        full, keys[name] = f"{key}.{name}", k
        if name in _ALLOC_WORDS:
            value = r.scalar(v, full)
            if value is not None and (not isinstance(value, str | int)
                                      or isinstance(value, bool) or not str(value).strip()):
                raise r.fail(v, full, "must be a name, such as debug")
            values[name] = None if value is None else str(value).strip()
        elif name in _ALLOC_COUNTS:
            values[name] = r.integer(v, full, least=_ALLOC_COUNTS[name], optional=False)
        elif name in _ALLOC_TIMES:
            values[name] = r.duration(v, full, optional=False)
        elif name == "flags":
            values[name] = r.words(v, full)
        else:
            known = ", ".join((*_ALLOC_WORDS, *_ALLOC_COUNTS, *_ALLOC_TIMES, "flags"))
            raise r.fail(k, full, f"is unknown; known alloc settings are {known}")
    a = AllocSettings(**values)
    if a.system is not None and a.system not in ALLOC_SYSTEMS:
        raise r.fail(keys["system"], f"{key}.system",
                     f"is {a.system!r}; metaq alloc submits to slurm or pbs")
    for low, high, what in (("min_nodes", "max_nodes", "nodes"),
                            ("min_walltime", "max_walltime", "walltime"),
                            ("max_queued", "max_allocations", "allocations")):
        if getattr(a, low) > getattr(a, high):
            where = keys.get(low) or keys.get(high)
            raise r.fail(where, f"{key}.{low}", f"is more than {key}.{high}; the {what} "
                                               f"range is empty")
    return a
