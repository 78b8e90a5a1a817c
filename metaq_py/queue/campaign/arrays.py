"""Task arrays: one script queued once per index (``metaq submit --array 0-999 run.sh``, or
``#METAQ ARRAY 0-999`` in the script), as SLURM's job arrays.

An array is a folder in its task folder, named after the script, holding one small task file
per index, named by the index::

    todo/run.sh/.array     what the array is: script, indices, submit time (JSON, hidden)
    todo/run.sh/.script    the script as submitted (hidden: never a task itself)
    todo/run.sh/0          index 0: the script's #METAQ lines and an exec of .script
    todo/run.sh/1 ...

Each index is an ordinary task of identity ``todo/run.sh/<index>``: the runner claims it by
one atomic rename and runs it exactly once, knowing nothing of arrays. Its file is a few
lines of ``/bin/sh`` that set ``METAQ_ARRAY_INDEX`` and ``METAQ_ARRAY_ID`` (the array's
identity, ``todo/run.sh``) and ``exec`` the submitted script, whatever its interpreter. So
the script itself is stored once, and the index files are made cheaply: all of them are
written into a hidden folder beside their place, which one ``rename`` then puts in place, so
no scan sees half an array and a failed submission leaves nothing behind. Their modification
times go up with the index, so the indices wait in index order.

People name a whole array by its identity or script name (``todo/run.sh``, ``run.sh``), and
some of its indices as ``run.sh[17]``, ``run.sh[0-9]`` or ``run.sh[*]`` (see :func:`split_ref`).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from metaq_py.directive_keys import INDEX, parse_array, parse_indices
from metaq_py.directives import SCRIPT_LIMIT, format_directives
from metaq_py.errors import QueueError
from metaq_py.program import Program
from metaq_py.queue.disk.fileio import Refused, read_regular, write_all
from metaq_py.queue.disk.folders import (
    ARRAY_FILE,
    ENDED_ARRAYS,
    SCRIPT_FILE,
    array_home,
    make_folders,
)
from metaq_py.queue.disk.lock import FolderLock
from metaq_py.queue.judge import folders_problem
from metaq_py.queue.layout import Layout
from metaq_py.queue.settings.trust import Trust, user_name
from metaq_py.task_spec import TaskSpec

__all__ = ["ArrayInfo", "array_lock", "index_file", "index_program", "make_array", "move_home",
           "read_array", "read_script", "recall", "retire", "split_ref", "write_indices"]

ARRAY_LIMIT = 64 * 1024
"""The largest ``.array`` (bytes) that is read: it holds a script name, indices and a time."""


@dataclass(frozen=True, slots=True)
class ArrayInfo:
    """An array as its ``.array`` file tells it: its identity ``id`` (``todo/run.sh``), the
    ``script`` name it was submitted as, its ``indices`` in order, its ``submit`` time and
    its ``throttle``."""

    id: str
    script: str
    indices: tuple[int, ...]
    submit: float
    throttle: int | None = None
    """At most this many of its indices run at once (``ARRAY 0-19%4``); ``None``: no limit."""

    def member(self, index: int) -> str:
        """The identity of the task of ``index``."""
        return f"{self.id}/{index}"


def read_array(root: Path, array_id: str) -> ArrayInfo | None:
    """The array of identity ``array_id`` (``folder/relpath``), waiting or ended (wherever
    :func:`~metaq_py.queue.disk.folders.array_home` finds it), or ``None`` if that is not an
    array (no readable ``.array`` there)."""
    for _ in range(2):  # it may move to finished/ between finding it and reading it
        home = array_home(root, array_id)
        if home is None:
            return None
        info = _read_info(root / home / ARRAY_FILE, array_id)
        if info is not None:
            return info
    return None


def _read_info(path: Path, array_id: str) -> ArrayInfo | None:
    try:
        raw, _ = read_regular(path, limit=ARRAY_LIMIT)
        data = json.loads(raw)
        throttle = data.get("throttle")
        return ArrayInfo(array_id, str(data["script"]), parse_indices(str(data["indices"])),
                         float(data["submit"]),
                         int(throttle) if throttle is not None and int(throttle) >= 1 else None)
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None


_INDEX_STUB = re.compile(
    rb"\A#!/bin/sh\n(?:#[^\n]*\n)*# index (\d+) of the task array [^\n]* \(metaq submit "
    rb"--array\)\nMETAQ_ARRAY_INDEX=(\d+) METAQ_ARRAY_ID=[^\n]*\nexport METAQ_ARRAY_INDEX "
    rb"METAQ_ARRAY_ID\nexec [^\n]* \"\$@\"\n\Z")
"""An index file as :func:`index_file` writes it: its directives, then the exec."""


def index_program(root: Path, folder: str, relpath: str, stub: Program, *,
                  trust: Trust) -> Program | str | None:
    """What the claimed index file ``stub`` of identity ``folder/relpath`` runs: the script
    stored beside its index files (``.script`` in its array folder), read through the safe
    reader, trusted as any task and of the index file's owner, with ``METAQ_ARRAY_INDEX``
    and ``METAQ_ARRAY_ID`` set. ``None`` when ``stub`` is no index file (a task of its own);
    a sentence when the stored script may not run (the index is then rejected)."""
    match = _INDEX_STUB.match(stub.data)
    array_rel, _, index = relpath.rpartition("/")
    if match is None or not array_rel or match.group(1) != match.group(2) or \
            match.group(1).decode() != index:
        return None
    what = f"the script of the task array {folder}/{array_rel}"
    found = read_script(root, f"{folder}/{array_rel}")
    if isinstance(found, Refused):
        return f"{what} cannot be run: {found}"
    array, data, st = found
    why = trust.problem(st, what) or folders_problem(array, root=root, trust=trust)
    if why is None and st.st_uid != stub.owner:
        why = (f"{what} belongs to {user_name(st.st_uid)}, and its index files to "
               f"{user_name(stub.owner)}: someone put another script in its place")
    if why is not None:
        return why
    return Program(data, str(array / SCRIPT_FILE), st.st_uid,
                   {"METAQ_ARRAY_INDEX": index, "METAQ_ARRAY_ID": f"{folder}/{array_rel}"})


def read_script(root: Path, ident: str) -> tuple[Path, bytes, os.stat_result] | Refused:
    """The array ``ident``'s folder, script and its status, read where the array waits or
    else where it ended (its last other index may end meanwhile, moving it there); what
    refused the first read if neither is readable."""
    first: Refused | None = None
    for home in (ident, f"{ENDED_ARRAYS}/{ident}", ident):
        try:
            data, st = read_regular(root / home / SCRIPT_FILE, limit=SCRIPT_LIMIT)
        except Refused as e:
            first = first or e
            continue
        return root / home, data, st
    assert first is not None
    return first


def split_ref(ref: str) -> tuple[str, str | None]:
    """``run.sh[0-9]`` -> (``run.sh``, ``0-9``); a ref without a trailing ``[...]`` has no
    selector. ``*`` selects every index."""
    if ref.endswith("]") and "[" in ref:
        base, _, sel = ref[:-1].rpartition("[")
        if base and "[" not in base and (sel == "*" or _index_list(sel)):
            return base, sel
    return ref, None


def _index_list(text: str) -> bool:
    try:
        parse_indices(text)
    except ValueError:
        return False
    return True


def index_file(spec: TaskSpec, *, script: Path, index: int, array_id: str,
               after: tuple[str, ...], after_any: tuple[str, ...]) -> bytes:
    """The task file of one index: the script's directives (``ARRAY`` left out, the
    dependencies as resolved for this index, ``{index}`` in its ``LOG`` filled in) and an
    ``exec`` of the stored script."""
    log = spec.log.replace(INDEX, str(index)) if spec.log is not None else None
    header = format_directives(replace(spec, array=None, after=after, after_any=after_any,
                                       log=log))
    return (f"#!/bin/sh\n{header}"
            f"# index {index} of the task array {array_id} (metaq submit --array)\n"
            f"METAQ_ARRAY_INDEX={index} METAQ_ARRAY_ID={shlex.quote(array_id)}\n"
            f"export METAQ_ARRAY_INDEX METAQ_ARRAY_ID\n"
            f"exec {shlex.quote(str(script))} \"$@\"\n").encode()


Resolve = Callable[[int], tuple[tuple[str, ...], tuple[str, ...]]]
"""For an index, the resolved ``AFTER`` and ``AFTER_ANY`` names of its task."""


def make_array(data: bytes, spec: TaskSpec, *, dst: Path, array_id: str, indices_text: str,
               mode: int, now: float, resolve: Resolve) -> Path:
    """Make the array folder ``dst`` (which must not exist) for the script ``data``: its
    ``.array``, ``.script`` and one task file per index, all written in a hidden folder beside
    ``dst`` and then renamed into place at once. Returns ``dst``."""
    indices, throttle = parse_array(indices_text)
    tmp = dst.with_name(f".{dst.name}.{secrets.token_hex(4)}.tmp")
    os.mkdir(tmp, 0o777)
    try:
        _write(tmp / SCRIPT_FILE, data, mode)
        meta = {"script": Path(spec.path).name, "indices": indices_text.partition("%")[0],
                "submit": now, "throttle": throttle}
        _write(tmp / ARRAY_FILE, json.dumps(meta).encode(), 0o644)
        write_indices(tmp, spec, script=dst.absolute() / SCRIPT_FILE, array_id=array_id,
                      indices=indices, mode=mode, now=now, resolve=resolve)
        os.rename(tmp, dst)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if e.errno in (errno.EEXIST, errno.ENOTEMPTY):  # dst appeared meanwhile
            raise QueueError(f"{array_id} appeared in the queue meanwhile; nothing was "
                             f"written") from None
        raise QueueError(f"cannot write the array {array_id}: {e.strerror or e}") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dst


def write_indices(folder: Path, spec: TaskSpec, *, script: Path, array_id: str,
                  indices: tuple[int, ...], mode: int, now: float, resolve: Resolve) -> None:
    """Write the task file of each of ``indices`` into ``folder`` (new files), each an
    ``exec`` of ``script``; their modification times go up with the index from ``now``."""
    plain = None
    if not any(INDEX in n for n in (*spec.after, *spec.after_any, spec.log or "")):
        after, after_any = resolve(indices[0])
        plain = index_file(spec, script=script, index=0, array_id=array_id,
                           after=after, after_any=after_any)
    base_ns = int(now * 1e9)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    for n, i in enumerate(indices):
        if plain is not None:
            # Only the two index lines differ from index 0's file.
            body = plain.replace(b"index 0 of", f"index {i} of".encode(), 1).replace(
                b"METAQ_ARRAY_INDEX=0 ", f"METAQ_ARRAY_INDEX={i} ".encode(), 1)
        else:
            after, after_any = resolve(i)
            body = index_file(spec, script=script, index=i, array_id=array_id,
                              after=after, after_any=after_any)
        fd = os.open(folder / str(i), flags, mode)
        try:
            write_all(fd, body)
            # Submit times one microsecond apart, in index order: the queue order.
            at = base_ns + n * 1000
            os.utime(fd, ns=(at, at))
        finally:
            os.close(fd)


def _write(path: Path, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    try:
        write_all(fd, data)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


# --- where an array's own files sit --------------------------------------------------------


def retire(q: Layout, ident: str) -> bool:
    """After an index of the array ``ident`` ended, move the array's ``.array`` and
    ``.script`` to ``finished/<ident>/`` if none of its indices waits, is held or runs any
    more, so that a finished array no longer sits in its task folder. Whether it moved.

    Under the queue's array lock (:func:`array_lock`), as :func:`recall` and an array's
    extension. A task's lease is written before its claim and removed after its way back,
    so the folders are looked at before the leases, and once more after the move: an index
    requeued meanwhile brings the files straight back."""
    root = q.root
    if not os.path.lexists(root / ident / ARRAY_FILE):
        return False
    folder, _, rel = ident.partition("/")
    try:
        with array_lock(root):
            if array_home(root, ident) != ident or _busy(q, folder, rel, leases=True):
                return False
            move_home(root, ident, f"{ENDED_ARRAYS}/{ident}")
            if _busy(q, folder, rel, leases=False):
                move_home(root, f"{ENDED_ARRAYS}/{ident}", ident)
                return False
    except OSError:
        return False  # it stays in its task folder, where every reader finds it too
    with contextlib.suppress(OSError):
        os.rmdir(root / ident)  # the folder made for its indices, empty now
    return True


def recall(q: Layout, ident: str) -> bool:
    """After an index of the array ``ident`` went back to wait (``metaq retry``), bring its
    ``.array`` and ``.script`` back from ``finished/`` into its task folder. Whether they
    moved."""
    root = q.root
    if not os.path.lexists(root / ENDED_ARRAYS / ident / ARRAY_FILE):
        return False
    with array_lock(root):
        if array_home(root, ident) == ident:
            return False
        make_folders(root, root / ident)
        move_home(root, f"{ENDED_ARRAYS}/{ident}", ident)
    return True


def array_lock(root: Path) -> FolderLock:
    """The lock of every move of an array's own files and of an array's extension:
    ``finished/.arrays.lock`` (hidden: never a task)."""
    return FolderLock(root / ENDED_ARRAYS / ".arrays.lock", timeout=LOCK_TIMEOUT)


LOCK_TIMEOUT = 60.0
"""The longest (seconds) a move of an array's files waits for another one."""


def _busy(q: Layout, folder: str, rel: str, *, leases: bool) -> bool:
    """Whether an index of the array ``folder/rel`` waits or is held (or, with ``leases``,
    runs)."""
    places = [q.root / folder / rel, *q.held_paths(folder, rel)]
    if any(_has_task(p) for p in places):
        return True
    prefix = f"{rel}/"
    return leases and any(c.folder == folder and c.relpath.startswith(prefix)
                          for c in q.leases())


def _has_task(path: Path) -> bool:
    try:
        with os.scandir(path) as it:
            return any(not e.name.startswith(".") for e in it)
    except OSError:
        return False


def move_home(root: Path, src: str, dst: str) -> None:
    """Move an array's ``.script`` and then its ``.array`` from ``src`` to ``dst`` (both
    relative to ``root``): a reader finds the array by its ``.array``, and reads the script
    from wherever it is (see :func:`index_program`)."""
    make_folders(root, root / dst)
    for name in (SCRIPT_FILE, ARRAY_FILE):
        os.rename(root / src / name, root / dst / name)
