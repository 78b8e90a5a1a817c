"""``metaq doctor``: every anomaly in a queue's folders, with what to do about each.

A queue written by fifty people collects things no runner made: links, FIFOs, files of
other owners or loose modes, leases of dead jobs or of garbage, notices that are not notices,
names too long to keep, folders where none belongs, and what runners set aside
(``<name>.planted-<hex>``). The runner survives all of them; :func:`examine` lists them for
the queue's owners, reading only (``lstat`` and the one safe reader; it never follows a link
and never opens a FIFO). :func:`repair` applies the fix of each anomaly that has one, and
only what cannot lose anyone's data: it removes links (never what they point to), FIFOs and
empty folders, takes back stale claims, sets bad notices aside, rejects untrusted or
unkeepable waiting tasks (as a runner would), and takes write permission from others on the
files it owns. Anything else is the owners' to judge, and the anomaly says how.

Each anomaly has one :class:`Kind`, the same word in the command's output and the docs.
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from metaq_py.queue.disk.fileio import Refused, name_problem, read_regular
from metaq_py.queue.disk.folders import PLANTED, REASON_SUFFIX, set_aside
from metaq_py.queue.layout import DONE_STATES, HOLD, JOBS, NOTICES, WORKING
from metaq_py.queue.lease import LEASE_LIMIT, LEASE_SUFFIX, Claim
from metaq_py.queue.notices import (
    MAX_AHEAD,
    NOTICE_FOLDERS,
    NoticeError,
    read_notice_file,
    set_notice_aside,
)
from metaq_py.queue.settings.config import CONFIG_NAME
from metaq_py.queue.settings.trust import Trust, settings_problem
from metaq_py.queue.store import Queue
from metaq_py.queue.streams import Torn, read_frames, stream_files

__all__ = ["Anomaly", "Fix", "Kind", "examine", "repair"]

_OTHER_TOP = ("alloc", "examples", "log")
"""Folders at the top of a queue that other parts of metaq make (``metaq alloc``'s journal),
that hold scripts to submit rather than tasks (the example queue's ``examples/``), or the
tasks' own output (METAQ's ``log/``, where a ``LOG`` may go: the user guide's "Logs")."""


class Kind(enum.Enum):
    """What is wrong, in one word (the doctor's output and the user guide use these)."""

    SYMLINK = "symlink"
    SPECIAL = "special"
    OWNER = "owner"
    MODE = "mode"
    STALE_LEASE = "stale-lease"
    BAD_LEASE = "bad-lease"
    ORPHAN_LEASE = "orphan-lease"
    BAD_NOTICE = "bad-notice"
    LONG_NAME = "long-name"
    STRAY = "stray"
    PLANTED = "planted"
    SETTINGS = "settings"
    TORN = "torn"


class Fix(enum.Enum):
    """What ``--fix`` does to an anomaly (none: the owners must judge it)."""

    UNLINK = "remove it (a link is removed, never what it points to)"
    RMDIR = "remove the empty folder"
    RECLAIM = "take the task back into its folder, as metaq reset --dead does"
    NOTICE_ASIDE = "move it to notices/rejected/ with its reason"
    REJECT = "move the task to rejected/ with its reason, as a runner would"
    CHMOD = "take write permission from group and others"
    SET_ASIDE = "rename it aside (<name>.planted-<hex>) so the queue makes its own"
    STICKY = "set its sticky bit (chmod +t)"


@dataclass(frozen=True, slots=True)
class Anomaly:
    """One thing wrong at ``path``: ``problem`` says what, ``remedy`` what the owners should
    do, and ``fix`` what ``metaq doctor --fix`` does (``None``: nothing, by hand only).
    ``claim`` is the claim a lease anomaly is about."""

    kind: Kind
    path: Path
    problem: str
    remedy: str
    fix: Fix | None = None
    claim: Claim | None = None


def examine(q: Queue, *, now: float) -> list[Anomaly]:
    """Every anomaly in the queue ``q``, in path order; reads only."""
    trust = Trust(gid=q.config.gid, uids=q.config.trusted_uids)
    found: list[Anomaly] = []
    found += _top(q, trust)
    for name in (*q.config.folders, HOLD, *DONE_STATES, WORKING, JOBS, NOTICES, *_OTHER_TOP):
        top = q.root / name
        if _is_real_dir(top):
            found += _walk(q, top, name, trust)
    found += _leases(q, now)
    found += _notices(q, now)
    found += _streams(q, now)
    return sorted(found, key=lambda a: (str(a.path), a.kind.value))


def repair(q: Queue, anomalies: list[Anomaly]) -> list[tuple[Anomaly, str]]:
    """Apply the fix of every anomaly that has one; (anomaly, what happened) for each, in
    one sentence. A fix that fails (the file changed meanwhile) says why and goes on."""
    done: list[tuple[Anomaly, str]] = []
    for a in anomalies:
        if a.fix is None:
            continue
        try:
            done.append((a, _apply(q, a)))
        except OSError as e:
            done.append((a, f"not fixed: {e.strerror or e}"))
    return done


# --- the top of the queue ------------------------------------------------------------------


def _sticky(path: Path, what: str) -> list[Anomaly]:
    """A folder the group may write, without the sticky bit: any member may rename or
    remove what another made in it (``metaq.yaml``, a runner's job folder) and put their
    own in its place."""
    try:
        st = os.lstat(path)
    except OSError:
        return []
    if not stat.S_ISDIR(st.st_mode) or not st.st_mode & 0o022 or st.st_mode & stat.S_ISVTX:
        return []
    mine = st.st_uid == os.geteuid()
    return [Anomaly(Kind.MODE, path, f"{what} lets any member rename or remove what another "
                    f"made in it, and put their own in its place",
                    "run chmod +t on it (metaq init --group sets it)" if mine else
                    "ask its owner to run chmod +t on it", Fix.STICKY if mine else None)]


def _top(q: Queue, trust: Trust) -> list[Anomaly]:
    out: list[Anomaly] = [*_sticky(q.root, "the queue folder"),
                          *_sticky(q.root / JOBS, "the jobs/ folder")]
    known = {*q.config.folders, HOLD, WORKING, *DONE_STATES, NOTICES, JOBS, *_OTHER_TOP}
    for e in _entries(q.root):
        path = Path(e.path)
        if e.name == CONFIG_NAME:
            st = e.stat(follow_symlinks=False)
            if stat.S_ISREG(st.st_mode):
                out += _settings(q, path, st)
            continue
        if e.name in known:
            if e.is_symlink():
                out.append(Anomaly(Kind.SYMLINK, path, f"the queue folder {e.name}/ is a link "
                                   f"to {_target(path)}", "remove the link; the queue makes "
                                   "a real folder in its place", Fix.SET_ASIDE))
            elif not e.is_dir(follow_symlinks=False):
                out.append(Anomaly(Kind.STRAY, path, f"a file stands where the queue folder "
                                   f"{e.name}/ belongs", "move it out of the queue",
                                   Fix.SET_ASIDE))
            else:
                out += _mode(path, e.stat(follow_symlinks=False), trust, "the queue folder")
            continue
        if PLANTED in e.name:
            continue  # listed by the walk below as planted
        out.append(_stray(e, "the queue has no use for it at its top"))
    return out


def _stray(e: os.DirEntry, why: str) -> Anomaly:
    path = Path(e.path)
    if e.is_symlink():
        return Anomaly(Kind.SYMLINK, path, f"a link to {_target(path)}; {why}",
                       "remove the link", Fix.UNLINK)
    if not e.is_dir(follow_symlinks=False) and not e.is_file(follow_symlinks=False):
        return Anomaly(Kind.SPECIAL, path, f"a FIFO, socket or device; {why}", "remove it",
                       Fix.UNLINK)
    if e.is_dir(follow_symlinks=False):
        empty = not any(True for _ in _entries(path))
        return Anomaly(Kind.STRAY, path, f"a folder that should not be here; {why}",
                       "move it out of the queue, or remove it if it is junk",
                       Fix.RMDIR if empty else None)
    return Anomaly(Kind.STRAY, path, f"a file that should not be here; {why}",
                   "move it out of the queue, or remove it if it is junk")


# --- the walk -------------------------------------------------------------------------------


def _walk(q: Queue, top: Path, area: str, trust: Trust) -> Iterator[Anomaly]:
    """The anomalies below the queue folder ``top`` (never following a link)."""
    tasks = area in q.config.folders or area == HOLD
    stack = [(top, 0)]
    while stack:
        folder, depth = stack.pop()
        entries = list(_entries(folder))
        names = {e.name for e in entries}
        for e in entries:
            path = Path(e.path)
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue  # gone meanwhile
            if PLANTED in e.name:
                yield _planted(path, st)
                continue
            if stat.S_ISDIR(st.st_mode):
                # hold/ may also hold what METAQ users put there by hand (any folders)
                if depth == 0 and area in DONE_STATES and e.name not in q.config.folders:
                    yield _stray(e, f"{area}/ holds one folder per task folder "
                                    f"({', '.join(q.config.folders)})")
                    continue
                if tasks or area in (WORKING, JOBS):
                    yield from _mode(path, st, trust, "the folder")
                stack.append((path, depth + 1))
                continue
            hidden = e.name[0] == "."
            if stat.S_ISLNK(st.st_mode):
                if _linked_task(area, hidden, e.name, names, q) and not os.path.isdir(path):
                    # A task, whatever its link points to now: never removed (its script
                    # may only have moved). A waiting one is rejected as a runner would.
                    if not _fine_link(path, area, hidden, q, e.name, names):
                        yield Anomaly(Kind.SYMLINK, path, f"a task linked to "
                                      f"{_target(path)}, which is not a script there",
                                      "point the link at its script, or remove it by hand",
                                      Fix.REJECT if area in q.config.folders else None)
                elif not _fine_link(path, area, hidden, q, e.name, names):
                    yield Anomaly(Kind.SYMLINK, path, f"a link to {_target(path)}, where the "
                                  f"queue keeps no link", "remove the link", Fix.UNLINK)
                continue
            if not stat.S_ISREG(st.st_mode):
                yield Anomaly(Kind.SPECIAL, path, "a FIFO, socket or device, which can "
                              "never be a task or a file of the queue", "remove it", Fix.UNLINK)
                continue
            if depth == 0 and area in DONE_STATES and not hidden:
                yield _stray(e, f"{area}/ holds one folder per task folder")
                continue
            if tasks and not hidden and not e.name.endswith(REASON_SUFFIX):
                yield from _task_file(q, path, st, trust, pending=area != HOLD)


def _task_file(q: Queue, path: Path, st: os.stat_result, trust: Trust, *,
               pending: bool) -> Iterator[Anomaly]:
    too_long = name_problem(path.name, path=path)
    if too_long is not None:
        yield Anomaly(Kind.LONG_NAME, path, too_long, "rename the task shorter",
                      Fix.REJECT if pending else None)
        return
    if trust.uids and st.st_uid not in trust.uids:
        why = trust.problem(st, "the task file") or ""
        yield Anomaly(Kind.OWNER, path, why, "ask its owner to submit it from a trusted "
                      "account, or add them to trusted_users", Fix.REJECT if pending else None)
        return
    yield from _mode(path, st, trust, "the task file")


def _settings(q: Queue, path: Path, st: os.stat_result) -> list[Anomaly]:
    """``metaq.yaml`` as the queue's owner's runner judges it (a member's runner also takes
    a file of its own, which the owner's refuses)."""
    try:
        owner = os.stat(q.root).st_uid
    except OSError:
        return []
    why = settings_problem(st, owner=owner)
    if why is None:
        return []
    mine = st.st_uid == os.geteuid() and st.st_uid in (owner, 0)
    return [Anomaly(Kind.SETTINGS, path, f"runners refuse these settings: {why}",
                    "the queue's owner must own metaq.yaml and alone write it",
                    Fix.CHMOD if mine else None)]


def _mode(path: Path, st: os.stat_result, trust: Trust, what: str) -> Iterator[Anomaly]:
    """A file or folder others may write (which the queue then does not trust)."""
    loose = Trust(gid=trust.gid, uids=frozenset()).problem(st, what)
    if loose is None:
        return
    mine = st.st_uid == os.geteuid()
    yield Anomaly(Kind.MODE, path, loose, "run chmod go-w on it" if mine else
                  "ask its owner to run chmod go-w on it", Fix.CHMOD if mine else None)


def _planted(path: Path, st: os.stat_result) -> Anomaly:
    harmless = stat.S_ISLNK(st.st_mode) or not (stat.S_ISREG(st.st_mode)
                                                or stat.S_ISDIR(st.st_mode))
    empty = stat.S_ISDIR(st.st_mode) and not any(True for _ in _entries(path))
    fix = Fix.UNLINK if harmless else Fix.RMDIR if empty else None
    return Anomaly(Kind.PLANTED, path, "a runner found this where the queue keeps a file or "
                   "folder of its own, and set it aside", "look at it, then remove it", fix)


def _linked_task(area: str, hidden: bool, name: str, names: set[str], q: Queue) -> bool:
    """Whether a link named ``name`` in ``area`` stands where the queue keeps a task (any
    state): a name that is not hidden and not the ``.reason`` beside a task. (A link to a
    folder is never a task: the caller removes it, never what it points to.)"""
    if hidden or area in (JOBS, NOTICES, *_OTHER_TOP):
        return False
    return not (name.endswith(REASON_SUFFIX) and name[: -len(REASON_SUFFIX)] in names)


def _fine_link(path: Path, area: str, hidden: bool, q: Queue, name: str,
               names: set[str]) -> bool:
    """A link the queue may hold: a task (a link to a regular file, not hidden) in a task
    folder, hold/, working/ or a done state; the link moves with its task."""
    if hidden or area in (JOBS, NOTICES, *_OTHER_TOP):
        return False
    if name.endswith(REASON_SUFFIX) and name[: -len(REASON_SUFFIX)] in names:
        return False
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


# --- leases and notices --------------------------------------------------------------------


def _leases(q: Queue, now: float) -> Iterator[Anomaly]:
    working = q.root / WORKING
    if not _is_real_dir(working):
        return
    claims = q.leases()
    for c in claims:
        bad = _lease_problem(c.lease)
        beat = c.heartbeat
        if bad is not None:  # the claim's heartbeat fell back on the task's ctime
            with contextlib.suppress(OSError):
                beat = os.lstat(c.lease).st_mtime
        stale = now - beat > q.stale_after(c)
        age = round(now - beat)
        if bad is not None:
            yield Anomaly(Kind.BAD_LEASE, c.lease, f"the lease of {c.id} (job {c.jobid}) is "
                          f"not a runner's lease: {bad}", "once its job is dead, --fix (or "
                          "metaq reset --dead) takes the task back",
                          Fix.RECLAIM if stale else None, c)
        elif stale:
            yield Anomaly(Kind.STALE_LEASE, c.lease, f"the lease of {c.id} (job {c.jobid}) "
                          f"was last renewed {age} s ago, longer than its stale_after",
                          "take the task back: --fix or metaq reset --dead", Fix.RECLAIM, c)
    tasks = {c.path for c in claims}
    for lease in working.rglob(f".*{LEASE_SUFFIX}"):
        task = lease.with_name(lease.name[1: -len(LEASE_SUFFIX)])
        if task not in tasks and not os.path.lexists(task):
            if not _is_real_dir(lease):
                fix: Fix | None = Fix.UNLINK
            else:
                fix = None if any(True for _ in _entries(lease)) else Fix.RMDIR
            yield Anomaly(Kind.ORPHAN_LEASE, lease, "a lease without its task beside it",
                          "remove it", fix)


def _lease_problem(lease: Path) -> str | None:
    """Why the lease file at ``lease`` is not one a runner wrote, or ``None``; a missing
    lease (a claim cut short by a crash) is no anomaly."""
    if not os.path.lexists(lease):
        return None
    try:
        raw, _ = read_regular(lease, limit=LEASE_LIMIT)
        data = json.loads(raw)
    except Refused as e:
        return e.why
    except (ValueError, RecursionError):
        return "it is not valid JSON"
    if not isinstance(data, dict):
        return "it is not a JSON object"
    for key in ("start", "submit"):
        if not isinstance(data.get(key), int | float) or isinstance(data.get(key), bool):
            return f"its {key!r} is not a time"
    for key in ("pid", "attempts"):
        if not isinstance(data.get(key), int) or isinstance(data.get(key), bool):
            return f"its {key!r} is not a whole number"
    return None


def _notices(q: Queue, now: float) -> Iterator[Anomaly]:
    folder = q.root / NOTICES
    if not _is_real_dir(folder):
        return
    for e in _entries(folder):
        path = Path(e.path)
        if e.name[0] == "." or PLANTED in e.name:
            continue
        if e.is_dir(follow_symlinks=False):
            if e.name not in NOTICE_FOLDERS:
                yield _stray(e, "notices/ holds notices and the folders rejected/, "
                                "expired/ and cancelled/")
            continue
        try:
            stored = read_notice_file(path)
            if stored.notice.arrival - now > MAX_AHEAD:
                raise NoticeError(f"{path}: the notice announces work more than "
                                  f"{MAX_AHEAD / 86400:g} days ahead")
        except NoticeError as err:
            yield Anomaly(Kind.BAD_NOTICE, path, str(err), "fix the file or withdraw it; "
                          "runners set it aside", Fix.NOTICE_ASIDE)
        except FileNotFoundError:
            continue


def _streams(q: Queue, now: float) -> Iterator[Anomaly]:
    """Bytes of the batch jobs' stream files that are no whole frame (a runner killed
    mid-frame, or something else wrote there): skipped by every reader, and listed here. A
    file written to within ``stale_after`` may still be finishing its last frame."""
    try:
        jobs = sorted(os.scandir(q.root / JOBS), key=lambda e: e.name)
    except OSError:
        return
    for job in jobs:
        if not job.is_dir(follow_symlinks=False):
            continue
        for path in stream_files(Path(job.path)):
            try:
                ended = now - os.lstat(path).st_mtime > q.config.stale_after
                torn = [t for t in read_frames(path, ended=ended) if isinstance(t, Torn)]
            except (OSError, Refused):
                continue  # a FIFO or a link there is found by the walk of jobs/
            for t in torn:
                yield Anomaly(Kind.TORN, path, t.sentence(), "nothing to do: the task output "
                              "before and after it is read as usual; what it held is lost")


# --- fixing ---------------------------------------------------------------------------------


def _apply(q: Queue, a: Anomaly) -> str:
    if a.fix is Fix.UNLINK:
        os.unlink(a.path)
        return "removed"
    if a.fix is Fix.RMDIR:
        os.rmdir(a.path)
        return "removed the empty folder"
    if a.fix is Fix.SET_ASIDE:
        return f"set aside as {Path(set_aside(a.path)).name}"
    if a.fix is Fix.STICKY:
        mode = stat.S_IMODE(os.lstat(a.path).st_mode)
        os.chmod(a.path, mode | stat.S_ISVTX, follow_symlinks=False)
        return f"mode {mode:o} -> {mode | stat.S_ISVTX:o}"
    if a.fix is Fix.CHMOD:
        mode = stat.S_IMODE(os.lstat(a.path).st_mode)
        os.chmod(a.path, mode & ~0o022, follow_symlinks=False)
        return f"mode {mode:o} -> {mode & ~0o022:o}"
    if a.fix is Fix.NOTICE_ASIDE:
        moved = set_notice_aside(a.path, a.problem)
        return "gone meanwhile" if moved is None else f"moved to {moved.relative_to(q.root)}"
    if a.fix is Fix.REJECT:
        moved = q.reject(a.path, a.problem)
        return "gone meanwhile" if moved is None else f"moved to {moved.relative_to(q.root)}"
    assert a.fix is Fix.RECLAIM and a.claim is not None
    back = q.reclaim(a.claim, reason=f"{a.problem} (metaq doctor --fix)")
    return "gone meanwhile" if back is None else f"back in {back.state}/"


# --- helpers --------------------------------------------------------------------------------


def _entries(folder: Path) -> Iterator[os.DirEntry]:
    """The entries of ``folder``, by name; none when it cannot be listed."""
    try:
        with os.scandir(folder) as it:
            yield from sorted(it, key=lambda e: e.name)
    except OSError:
        return


def _is_real_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _target(path: Path) -> str:
    with contextlib.suppress(OSError):
        return repr(os.readlink(path))
    return "somewhere"
