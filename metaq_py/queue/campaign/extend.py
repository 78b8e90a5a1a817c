"""Growing an array: ``metaq submit --array 20-23 prop.sh`` on a queue whose ``prop.sh`` array
exists (waiting, partly run or ended) adds the indices 20 to 23 to it: next week's
configurations join the same array, and ``AFTER prop.sh[{index}]`` binds to them.

The script must be the array's own (its ``.script``, byte for byte): another script under the
same name is another array, to be submitted under another name or with ``--folder``. An
index the array already has is refused, naming it and its state, unless the submission says
to queue it once more (``--again``), which an index still waiting, held or running never is:
an identity is queued once at a time.

Two members extending one array at once are put one after the other by the lock of every
move of an array's own files (:func:`~metaq_py.queue.campaign.arrays.array_lock`): each
reads the array's indices under it, so no index is lost (written over) or queued twice. The
new index files are written into a hidden folder inside the array's and linked into place
one by one (a link never replaces a file), and the ``.array`` is replaced last.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from pathlib import Path

from metaq_py.errors import QueueError
from metaq_py.queue.campaign.arrays import (
    ArrayInfo,
    Resolve,
    array_lock,
    move_home,
    read_array,
    read_script,
    write_indices,
)
from metaq_py.queue.disk.fileio import Refused, replace_file
from metaq_py.queue.disk.folders import ARRAY_FILE, ENDED_ARRAYS, SCRIPT_FILE, array_home
from metaq_py.queue.disk.lock import LockTimeout
from metaq_py.queue.finding import STATE_WORDS
from metaq_py.queue.layout import DONE_STATES, HOLD, PENDING, WORKING, Layout
from metaq_py.ranges import MAX_ARRAY, format_indices, parse_array
from metaq_py.task_spec import TaskSpec

__all__ = ["extend_array", "extension_problem"]

def extension_problem(q: Layout, info: ArrayInfo, data: bytes, name: str,
                      indices: tuple[int, ...], *, again: bool) -> str | None:
    """Why ``indices`` of the script ``data`` (submitted as ``name``) may not be added to the
    array ``info``, in one sentence; ``None`` when they may."""
    stored = read_script(q.root, info.id)
    if isinstance(stored, Refused):
        return f"the array {info.id} has no readable script to add indices to: {stored}"
    if stored[1] != data:
        return (f"{name} is not the script of the array {info.id} (its .script differs), so "
                f"it cannot add indices to it; submit it under another name, or with --folder "
                f"to make it an array of its own")
    have = set(info.indices)
    if len(have | set(indices)) > MAX_ARRAY:
        return (f"the array {info.id} would have more than {MAX_ARRAY} indices with these; "
                f"submit the new ones as an array of another name")
    old = [i for i in indices if i in have]
    if not old:
        return None
    states = _states(q, info.id, old)
    live = {i: s for i, s in states.items() if s in (PENDING, HOLD, WORKING)}
    if again and not live:
        return None
    shown = live if again else states
    by_state: dict[str, list[int]] = {}
    for i, s in shown.items():
        by_state.setdefault(s, []).append(i)
    said = ", ".join(f"{format_indices(v)} ({STATE_WORDS.get(s, s)})"
                     for s, v in by_state.items())
    if again:
        return (f"the indices {said} of the array {info.id} are in the queue still; an "
                f"index is queued once at a time, so submit only the others")
    return (f"the array {info.id} already has the indices {said}; submit only new indices, "
            f"or with --again to queue those once more")


def _states(q: Layout, ident: str, indices: list[int]) -> dict[int, str]:
    """The state of each of ``indices`` of the array ``ident`` (``missing`` if none)."""
    folder, _, rel = ident.partition("/")
    running = {c.relpath for c in q.leases() if c.folder == folder}
    out: dict[int, str] = {}
    for i in indices:
        sub = f"{rel}/{i}"
        if sub in running:
            out[i] = WORKING
        elif os.path.lexists(q.path_of(PENDING, folder, sub)):
            out[i] = PENDING
        elif any(os.path.lexists(p) for p in q.held_paths(folder, sub)):
            out[i] = HOLD
        else:
            out[i] = next((s for s in DONE_STATES
                           if os.path.lexists(q.path_of(s, folder, sub))), "missing")
    return out


def extend_array(q: Layout, data: bytes, spec: TaskSpec, *, array_id: str,
                 indices: tuple[int, ...], mode: int, now: float, again: bool,
                 resolve: Resolve) -> Path:
    """Add ``indices`` of the script ``data`` (judged as ``spec``) to the array ``array_id``,
    under the array lock, checked again there (see :func:`extension_problem`). An ended
    array comes back to its task folder first. A throttle given (``%4``) replaces the
    array's; without one it keeps its own. Returns the array's folder. Raises
    :class:`QueueError` with one sentence; nothing is added then."""
    root = q.root
    try:
        with array_lock(root):
            info = read_array(root, array_id)
            if info is None:
                raise QueueError(f"the array {array_id} left the queue meanwhile; nothing "
                                 f"was written")
            why = extension_problem(q, info, data, Path(spec.path).name, indices, again=again)
            if why is not None:
                raise QueueError(why)
            if array_home(root, array_id) != array_id:
                move_home(root, f"{ENDED_ARRAYS}/{array_id}", array_id)
            dst = root / array_id
            throttle = parse_array(spec.array)[1] if spec.array else None
            _add(dst, spec, info, indices, mode=mode, now=now, resolve=resolve,
                 throttle=throttle)
    except LockTimeout as e:
        raise QueueError(f"cannot add indices to {array_id}: {e}; nothing was written") \
            from None
    except OSError as e:
        raise QueueError(f"cannot add indices to the array {array_id}: {e.strerror or e}") \
            from None
    return dst


def _add(dst: Path, spec: TaskSpec, info: ArrayInfo, indices: tuple[int, ...], *, mode: int,
         now: float, resolve: Resolve, throttle: int | None) -> None:
    """Link the new index files into the array folder ``dst``, then replace its ``.array``;
    a failure unlinks those linked."""
    tmp = dst / f".extend.{secrets.token_hex(4)}.tmp"
    os.mkdir(tmp, 0o777)
    linked: list[Path] = []
    try:
        write_indices(tmp, spec, script=dst.absolute() / SCRIPT_FILE, array_id=info.id,
                      indices=indices, mode=mode, now=now, resolve=resolve)
        for i in indices:
            os.link(tmp / str(i), dst / str(i))
            linked.append(dst / str(i))
        union = format_indices([*info.indices, *indices])
        meta = {"script": info.script, "indices": union, "submit": info.submit,
                "throttle": info.throttle if throttle is None else throttle}
        replace_file(dst / ARRAY_FILE, json.dumps(meta).encode())
    except BaseException:
        for path in linked:
            path.unlink(missing_ok=True)
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
