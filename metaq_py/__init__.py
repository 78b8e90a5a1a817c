"""metaq-py: a file-system task backfiller for supercomputers.

See ``docs/architecture.md`` for the map: ``policy`` is the pure core, ``cluster`` the shared
node bookkeeping, ``runner`` the live driver and the top-level ``sim`` package the simulated one.

Tasks are made from Python with :func:`open_queue` (``metaq_py.open_queue("queue").submit(...)``)
and :class:`TaskKind` (:mod:`metaq_py.api`). Both are loaded on first use, so importing
``metaq_py`` stays as light as the command a batch node starts.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from metaq_py.api import TaskKind, open_queue

__all__ = ["TaskKind", "build", "open_queue"]

__version__ = "0.1.0"


def build() -> str:
    """Which build of the policy core runs here: ``"compiled (mypyc)"`` or ``"pure Python"``
    (``setup.py`` says when each is installed)."""
    from metaq_py.policy.model import Job

    # a native class that mypyc compiled lists its attributes here
    return "compiled (mypyc)" if hasattr(Job, "__mypyc_attrs__") else "pure Python"


def __getattr__(name: str) -> Any:
    """``open_queue`` and ``TaskKind``, imported from :mod:`metaq_py.api` when first asked for."""
    if name in ("open_queue", "TaskKind"):
        import metaq_py.api

        return getattr(metaq_py.api, name)
    raise AttributeError(f"module 'metaq_py' has no attribute {name!r}")
