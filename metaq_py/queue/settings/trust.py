"""Who may write a task, and the settings: tasks are code that runs under the batch job
owner's account, and ``metaq.yaml`` decides whose.

A task file, and every folder from the queue root down to it, must be writable only by its
owner and the queue's configured group. A group-writable path is also accepted when the group
is its owner's private group (the user-private-group scheme of Debian and Red Hat, where umask
002 is the default). With ``trusted_users`` set, the owner must be one of them, and the task
file itself must not be writable by the queue's group: any member could otherwise edit a
trusted user's script in place.

:class:`Trust` answers with a reason string, or ``None`` when the path is trusted; it never
raises, and it caches the (cheap but repeated) group look-ups.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from functools import lru_cache

__all__ = ["Trust", "private_group", "settings_problem", "user_name"]


@lru_cache(maxsize=256)
def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


@lru_cache(maxsize=256)
def _group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


@lru_cache(maxsize=256)
def private_group(gid: int, uid: int) -> bool:
    """True when ``gid`` is the private group of ``uid``: same name, no other members."""
    try:
        group = grp.getgrgid(gid)
    except KeyError:
        return False
    owner = user_name(uid)
    return group.gr_name == owner and set(group.gr_mem) <= {owner}


class Trust:
    """The trust rule of one queue: its group id and trusted user ids (empty: anyone)."""

    __slots__ = ("gid", "uids")

    def __init__(self, *, gid: int | None, uids: frozenset[int]) -> None:
        self.gid = gid
        self.uids = uids

    def problem(self, st: os.stat_result, what: str) -> str | None:
        """Why the file or folder with status ``st`` (called ``what`` in the message) cannot be
        trusted, or ``None`` if it can."""
        mode = st.st_mode
        if stat.S_ISLNK(mode):
            # A link's own mode means nothing (always rwxrwxrwx on Linux): only who made it.
            if self.uids and st.st_uid not in self.uids:
                return (f"{what} belongs to {user_name(st.st_uid)}, who is not in the "
                        f"queue's trusted_users")
            return None
        if mode & stat.S_IWOTH:
            return (f"{what} is writable by every user (mode {stat.filemode(mode)}), so anyone "
                    f"could change the code; run chmod o-w on it")
        shared = mode & stat.S_IWGRP and not private_group(st.st_gid, st.st_uid)
        if shared and st.st_gid != self.gid:
            return (f"{what} is writable by group {_group_name(st.st_gid)}, which is not the "
                    f"queue's group; run chmod g-w on it or set 'group' in metaq.yaml")
        if shared and self.uids and not stat.S_ISDIR(mode):
            # With trusted_users, a trusted user's file that the group may write lets any
            # member change its code in place (its owner, still trusted, stays the same). A
            # folder may stay group-writable: whatever a member puts in it is theirs.
            return (f"{what} is writable by group {_group_name(st.st_gid)}, so with "
                    f"trusted_users set any member could change a trusted user's code; "
                    f"run chmod g-w on it")
        if self.uids and st.st_uid not in self.uids:
            return (f"{what} belongs to {user_name(st.st_uid)}, who is not in the queue's "
                    f"trusted_users")
        return None


def settings_problem(st: os.stat_result, *, owner: int, reader: int | None = None
                     ) -> str | None:
    """Why a ``metaq.yaml`` of status ``st`` may not decide a queue's trust and commands,
    ``None`` if it may. ``owner`` is the uid of the queue (its root folder's owner); a file
    of ``reader`` (the process reading, a runner trusting its own file) or of root is taken
    too. Whoever may write the settings decides whose code runs as the runner's owner and
    which batch script ``metaq alloc`` submits, so the file must belong to one of those and be
    writable by no one else (a group-writable file only when the group is its owner's
    private group)."""
    if st.st_uid not in (owner, reader, 0):
        return (f"it belongs to {user_name(st.st_uid)}, not to the queue's owner "
                f"{user_name(owner)}; what decides trust and commands is taken only from a "
                f"file of the queue's owner")
    mode = st.st_mode
    if mode & stat.S_IWOTH or (mode & stat.S_IWGRP and not private_group(st.st_gid, st.st_uid)):
        return (f"it is writable by others (mode {stat.filemode(mode)}), so any of them "
                f"could decide whose code runs; its owner must run chmod go-w on it")
    return None
