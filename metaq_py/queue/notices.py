"""Advance notices on disk: one JSON file per notice in ``<queue>/notices/``.

A notice announces that on-demand work needing ``nodes`` nodes will arrive at about
``arrival`` and run for ``walltime``; running allocations then collect nodes for it (CUA, CUP).
The on-demand task that redeems it names it with ``#METAQ NOTICE <name>``.

The file ``notices/<name>.json`` holds one JSON object::

    {"name": "beamline-7", "nodes": 4, "arrival": 1740839400.0, "walltime": 3600.0,
     "issued": 1740838200.0, "who": "alice"}

``arrival`` and ``issued`` are Unix seconds, ``walltime`` seconds, ``who`` the user who wrote
it. Nothing else is allowed in the object, so a misspelt key is caught rather than ignored.

Where notices go when they stop being live, always with a ``<file>.reason`` beside them::

    notices/cancelled/<name>.json   withdrawn by ``metaq notice --cancel``
    notices/expired/<name>.json     never redeemed: :data:`EXPIRE_AFTER` past its release
    notices/rejected/<file>         not a readable notice (the reason says what is wrong)

These live under ``notices/`` rather than the queue's ``rejected/``, whose sub-folders are task
folders. Nothing is ever deleted, so a bad or old notice can always be looked at again.

A notice file is written under a hidden temporary name and then hard-linked to its real name,
so a runner never reads half a notice and an existing notice is never overwritten.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from metaq_py.durations import format_duration, format_time
from metaq_py.errors import MetaqError
from metaq_py.hybrid import Notice
from metaq_py.queue.disk.fileio import Refused, create_new, read_regular
from metaq_py.queue.settings.trust import user_name

__all__ = [
    "EXPIRE_AFTER",
    "NOTICES",
    "NOTICE_FOLDERS",
    "RELEASE_AFTER",
    "NodeLimit",
    "NoticeError",
    "NoticeFile",
    "cancel_notice",
    "check_name",
    "format_notice",
    "load_notices",
    "parse_notice",
    "read_notice_file",
    "read_notices",
    "set_notice_aside",
    "write_notice",
]

NOTICES = "notices"
CANCELLED, EXPIRED, REJECTED = "cancelled", "expired", "rejected"
NOTICE_FOLDERS = (CANCELLED, EXPIRED, REJECTED)
"""The folders inside ``notices/``, where past notices are kept."""
SUFFIX = ".json"
REASON_SUFFIX = ".reason"

RELEASE_AFTER = 600.0
"""Seconds after its estimated arrival at which a runner releases a notice's reservation
(the policy's ``release_after``, as in Fan et al.)."""

EXPIRE_AFTER = 3600.0
"""Seconds after the release at which :func:`load_notices` moves an unredeemed notice to
``notices/expired/``. Until then it is still handed to runners, so that each runner sees the
notice pass its release time and gives back the nodes it holds for it."""

SETTLE = 2.0
"""Seconds a malformed notice file must stay unchanged before it is moved aside: a person
writing one by hand in an editor may save it half-done for a moment."""

_NAME = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,99}\Z")

NOTICE_LIMIT = 16 * 1024
"""The largest notice file (bytes) a runner reads; a notice is a few hundred bytes."""

MAX_NODES = 1_000_000
"""The most nodes a notice may ask for, with no cap set: more than any machine has."""

MAX_AHEAD = 30 * 86400.0
"""How far ahead of its writing (seconds) a notice may announce work: 30 days. A notice for
the year 9999 would hold its reservation for ever."""

MAX_WALLTIME = 30 * 86400.0
"""The longest walltime (seconds) a notice may announce: 30 days."""
_KEYS = ("name", "nodes", "arrival", "walltime", "issued", "who")
_REQUIRED = ("name", "nodes", "arrival", "walltime", "issued")

_log = logging.getLogger("metaq.notices")


class NoticeError(MetaqError):
    """A notice that cannot be written, cancelled or read; ``str()`` is one sentence."""

    def __str__(self) -> str:
        text = str(self.args[0]).strip() if self.args else "bad notice"
        return text if text.endswith((".", "?", "!")) else text + "."


@dataclass(frozen=True, slots=True)
class NoticeFile:
    """A notice as stored: the policy's :class:`~metaq_py.policy.model.Notice` plus who wrote
    it. ``path`` is the file it was read from (``None`` before it is written)."""

    notice: Notice
    who: str
    path: Path | None = None

    @property
    def name(self) -> str:
        return self.notice.id

    @property
    def release(self) -> float:
        """When runners give back the nodes still held for it, if its task has not come."""
        return self.notice.arrival + RELEASE_AFTER


@dataclass(frozen=True, slots=True)
class NodeLimit:
    """The most nodes a notice may ask for, and where that number comes from (said in the
    error), such as ``"caps.nodes in metaq.yaml"`` or ``"the largest live allocation"``."""

    nodes: int
    source: str


# --- the file format -----------------------------------------------------------------------


def format_notice(stored: NoticeFile) -> bytes:
    """The bytes of the notice file for ``stored`` (one JSON object and a newline)."""
    n = stored.notice
    data = {"name": n.id, "nodes": n.nodes, "arrival": n.arrival, "walltime": n.walltime,
            "issued": n.issued, "who": stored.who}
    return (json.dumps(data, indent=1) + "\n").encode()


def parse_notice(data: bytes, *, path: str | os.PathLike[str]) -> NoticeFile:
    """Read a notice file's bytes. Raises :class:`NoticeError` naming ``path`` and the one
    thing wrong. The name inside must match the file name (``<name>.json``)."""
    where = str(path)
    try:
        obj = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise NoticeError(f"{where}: the notice is not UTF-8 text") from None
    except RecursionError:
        raise NoticeError(f"{where}: the notice nests too deeply to be a notice") from None
    except ValueError as e:
        raise NoticeError(f"{where}: the notice is not valid JSON ({_json_problem(e)})") from None
    if not isinstance(obj, dict):
        raise NoticeError(f"{where}: the notice must be one JSON object, not "
                          f"{type(obj).__name__}")
    unknown = sorted(set(obj) - set(_KEYS))
    if unknown:
        raise NoticeError(f"{where}: the notice has unknown key {unknown[0]!r}; the keys are "
                          f"{', '.join(_KEYS)}")
    missing = [k for k in _REQUIRED if k not in obj]
    if missing:
        raise NoticeError(f"{where}: the notice lacks {missing[0]!r}")
    name = obj["name"]
    if not isinstance(name, str) or not _NAME.match(name):
        raise NoticeError(f"{where}: the notice's name {name!r} is not a plain name of "
                          f"letters, digits, '.', '_' and '-'")
    stem = Path(where).name
    if stem.endswith(SUFFIX) and stem[: -len(SUFFIX)] != name:
        raise NoticeError(f"{where}: the notice calls itself {name!r}, but its file is named "
                          f"{stem!r}; the file must be {name}{SUFFIX}")
    nodes = obj["nodes"]
    if isinstance(nodes, bool) or not isinstance(nodes, int) or not 1 <= nodes <= MAX_NODES:
        raise NoticeError(f"{where}: the notice's 'nodes' must be a whole number from 1 to "
                          f"{MAX_NODES}, not {_short(nodes)}")
    arrival = _number(obj, "arrival", where)
    issued = _number(obj, "issued", where)
    walltime = _number(obj, "walltime", where)
    if not 0 < walltime <= MAX_WALLTIME:
        raise NoticeError(f"{where}: the notice's 'walltime' must be more than zero and at "
                          f"most {format_duration(MAX_WALLTIME)}, not {walltime!r}")
    if arrival - issued > MAX_AHEAD:
        raise NoticeError(f"{where}: the notice announces work more than "
                          f"{format_duration(MAX_AHEAD)} ahead")
    who = obj.get("who", "unknown")
    if not isinstance(who, str) or len(who) > 64 or _UNPRINTABLE.search(who):
        raise NoticeError(f"{where}: the notice's 'who' must be a user name of printable "
                          f"characters, not {_short(who)}")
    return NoticeFile(Notice(name, nodes, arrival, walltime, issued), who, Path(where))


_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _short(value: object) -> str:
    """``repr(value)`` cut to a length fit for one line of an error."""
    text = repr(value) if not isinstance(value, int) or abs(value) < 10**30 else "a huge number"
    return text if len(text) <= 60 else text[:57] + "..."


def _number(obj: dict, key: str, where: str) -> float:
    value = obj[key]
    try:
        number = float(value) if isinstance(value, int | float) else math.nan
    except OverflowError:
        number = math.inf
    if isinstance(value, bool) or not math.isfinite(number) or abs(number) > 1e12:
        raise NoticeError(f"{where}: the notice's {key!r} must be a number of seconds, not "
                          f"{_short(value)}")
    return number


def _json_problem(e: ValueError) -> str:
    msg = getattr(e, "msg", None)
    line = getattr(e, "lineno", None)
    return f"{msg} on line {line}" if msg and line else str(e)


# --- writing and cancelling ----------------------------------------------------------------


def check_name(name: str) -> str:
    """``name`` if it can name a notice, else a :class:`NoticeError`."""
    if not _NAME.match(name):
        raise NoticeError(f"{name!r} cannot name a notice; use up to 100 letters, digits, '.', "
                          f"'_' and '-', starting with a letter or digit")
    return name


def write_notice(root: str | os.PathLike[str], *, nodes: int, arrival: float, walltime: float,
                 now: float, name: str | None = None, who: str | None = None,
                 limit: NodeLimit | None = None) -> NoticeFile:
    """Announce on-demand work: write ``notices/<name>.json`` and return what was written.

    ``name`` is generated from the arrival time when absent. Raises :class:`NoticeError` for
    a bad name or size, an arrival before ``now``, more nodes than ``limit``, or a live notice
    of the same name (which is never overwritten).
    """
    name = check_name(name) if name is not None else _generated_name(arrival)
    if isinstance(nodes, bool) or nodes < 1:
        raise NoticeError(f"a notice needs at least 1 node, not {nodes}")
    if nodes > MAX_NODES:
        raise NoticeError(f"a notice may ask for at most {MAX_NODES} nodes, not {nodes}")
    if not math.isfinite(walltime) or not 0 < walltime <= MAX_WALLTIME:
        raise NoticeError(f"the walltime of a notice must be more than zero and at most "
                          f"{format_duration(MAX_WALLTIME)}, not {walltime!r}")
    if not math.isfinite(arrival):
        raise NoticeError(f"the arrival time {arrival!r} is not a point in time")
    if arrival - now > MAX_AHEAD:
        raise NoticeError(f"the arrival time {format_time(arrival)} is more than "
                          f"{format_duration(MAX_AHEAD)} away; a notice announces work to "
                          f"come soon")
    if arrival < now:
        raise NoticeError(f"the arrival time {format_time(arrival)} is already past (it is now "
                          f"{format_time(now)}); give a future time such as +20m")
    if limit is not None and nodes > limit.nodes:
        raise NoticeError(f"a notice of {nodes} nodes can never be served: {limit.source} has "
                          f"only {limit.nodes}")
    stored = NoticeFile(Notice(name, nodes, float(arrival), float(walltime), float(now)),
                        who or _user())
    folder = Path(root) / NOTICES
    folder.mkdir(exist_ok=True)
    dst = folder / f"{name}{SUFFIX}"
    tmp = folder / f".{name}{SUFFIX}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    create_new(tmp, format_notice(stored), mode=0o664)
    try:
        os.link(tmp, dst)  # unlike rename, link refuses to replace an existing notice
    except FileExistsError:
        raise NoticeError(f"a notice named {name!r} already exists "
                          f"({_describe_existing(dst)}); choose another --name, or withdraw "
                          f"it first with 'metaq notice --cancel {name}'") from None
    finally:
        tmp.unlink(missing_ok=True)
    return NoticeFile(stored.notice, stored.who, dst)


def cancel_notice(root: str | os.PathLike[str], name: str, *, now: float,
                  who: str | None = None) -> Path:
    """Withdraw the live notice ``name``: move it to ``notices/cancelled/`` with a reason, and
    return its new path. Runners then release the nodes they hold for it."""
    check_name(name)
    src = Path(root) / NOTICES / f"{name}{SUFFIX}"
    reason = f"cancelled by {who or _user()} at {format_time(now)}"
    moved = _move_aside(src, CANCELLED, reason)
    if moved is None:
        raise NoticeError(f"there is no live notice named {name!r}; 'metaq notice --list' "
                          f"shows them")
    return moved


# --- reading -------------------------------------------------------------------------------


def read_notices(root: str | os.PathLike[str]) -> tuple[list[NoticeFile], list[str]]:
    """Every notice file in ``notices/`` (live or past its time), earliest issued first, and
    one sentence for each file that is not a readable notice. Reads only; moves nothing."""
    found: list[NoticeFile] = []
    problems: list[str] = []
    for path in _notice_files(Path(root) / NOTICES):
        try:
            found.append(_read(path))
        except NoticeError as e:
            problems.append(str(e))
        except FileNotFoundError:
            continue  # cancelled or moved meanwhile
    found.sort(key=lambda f: (f.notice.issued, f.notice.arrival, f.name))
    return found, problems


def load_notices(root: str | os.PathLike[str], *, now: float,
                 report: Callable[[str], None] | None = None) -> list[Notice]:
    """The notices a runner should act on, earliest issued first; this is what the runner
    calls before each decision.

    Housekeeping on the way: a notice :data:`EXPIRE_AFTER` past its release time goes to
    ``notices/expired/``, and a file that is not a readable notice goes to
    ``notices/rejected/``, each with a ``.reason``. Every such move is told to ``report``
    (default: a warning on the ``metaq.notices`` logger) in one sentence naming the file. A
    malformed notice never raises. A notice past its release time but not yet expired is still
    returned: the policy releases its reservation itself.
    """
    tell = report or _log.warning
    live: list[Notice] = []
    for path in _notice_files(Path(root) / NOTICES):
        try:
            stored = _read(path)
            _check_ahead(stored, now)
        except FileNotFoundError:
            continue
        except NoticeError as e:
            if _settling(path, now):
                continue
            if _move_aside(path, REJECTED, str(e)) is not None:
                tell(f"{e} It was moved to {NOTICES}/{REJECTED}/.")
            continue
        if now > stored.release + EXPIRE_AFTER:
            why = (f"the notice {stored.name!r} for {stored.notice.nodes} nodes at "
                   f"{format_time(stored.notice.arrival)} was never redeemed and was released "
                   f"at {format_time(stored.release)}")
            if _move_aside(path, EXPIRED, why) is not None:
                tell(f"{path}: {why}; it was moved to {NOTICES}/{EXPIRED}/.")
            continue
        live.append(stored.notice)
    live.sort(key=lambda n: (n.issued, n.arrival, n.id))
    return live


def _check_ahead(stored: NoticeFile, now: float) -> None:
    """Raise :class:`NoticeError` for a notice whose work is more than :data:`MAX_AHEAD`
    from ``now``: one that claims to have been issued in the far future would otherwise
    announce work at any distance (its file is judged against its own issue time)."""
    if stored.notice.arrival - now > MAX_AHEAD:
        raise NoticeError(f"{stored.path}: the notice announces work more than "
                          f"{format_duration(MAX_AHEAD)} ahead")


def _notice_files(folder: Path) -> Iterator[Path]:
    """Every non-hidden file directly in ``folder`` that is not a folder (sub-folders hold
    past notices). A ``folder`` that is a symlink is not listed: the queue never follows one."""
    if folder.is_symlink():
        return
    try:
        with os.scandir(folder) as it:
            entries = sorted(it, key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return
    for e in entries:
        if e.name.startswith("."):
            continue
        with contextlib.suppress(OSError):
            if e.is_dir(follow_symlinks=False):
                continue
        yield Path(e.path)


def read_notice_file(path: Path) -> NoticeFile:
    """The notice in the file ``path``; :class:`NoticeError` (one sentence) when it is not
    a readable notice, ``FileNotFoundError`` when it is gone. Reads only."""
    return _read(path)


def set_notice_aside(path: Path, reason: str) -> Path | None:
    """Move the notice file ``path`` to ``notices/rejected/`` with ``reason`` beside it;
    ``None`` when it is gone."""
    return _move_aside(path, REJECTED, reason)


def _read(path: Path) -> NoticeFile:
    if not path.name.endswith(SUFFIX):
        raise NoticeError(f"{path}: this is not a notice file; notices are named "
                          f"<name>{SUFFIX}")
    try:
        data, _ = read_regular(path, limit=NOTICE_LIMIT)
    except Refused as e:
        if e.vanished:
            raise FileNotFoundError(str(path)) from None  # moved by someone else: skipped
        raise NoticeError(f"{path}: {e.why}") from None
    return parse_notice(data, path=path)


def _settling(path: Path, now: float) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return True
    return now - st.st_mtime < SETTLE


def _move_aside(src: Path, where: str, reason: str) -> Path | None:
    """Move ``src`` into ``notices/<where>/`` (never over another file) with a ``.reason``.
    ``None`` when ``src`` is gone: another runner or person moved it first."""
    if not os.path.lexists(src):
        return None
    folder = src.parent / where
    try:
        folder.mkdir(exist_ok=True)
    except OSError:
        return None  # a full disk, a file in its place: set aside at a later look
    if folder.is_symlink() or not folder.is_dir():
        return None  # a planted link or file in place of the folder: leave the notice be
    dst = folder / src.name
    n = 0
    while os.path.lexists(dst) or os.path.lexists(f"{dst}{REASON_SUFFIX}"):
        n += 1
        dst = folder / f"{src.name}.{n}"
    try:
        os.rename(src, dst)
    except OSError:
        return None  # moved by someone else first, or a full disk: tried again later
    with contextlib.suppress(OSError):  # a name taken meanwhile: the reason is in the log
        create_new(f"{dst}{REASON_SUFFIX}", (reason.rstrip() + "\n").encode())
    return dst


def _describe_existing(path: Path) -> str:
    try:
        r = _read(path)
    except (OSError, NoticeError):
        return "its file cannot be read"
    return (f"by {r.who} for {r.notice.nodes} nodes at {format_time(r.notice.arrival)}, "
            f"walltime {format_duration(r.notice.walltime)}")


def _generated_name(arrival: float) -> str:
    stamp = datetime.fromtimestamp(arrival).strftime("%Y%m%d-%H%M")
    return f"notice-{stamp}-{secrets.token_hex(2)}"


def _user() -> str:
    """Who runs this command: the process's uid, never ``$USER`` (anyone may set that)."""
    return user_name(os.getuid())
