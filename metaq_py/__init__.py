"""metaq-py: a file-system task backfiller for supercomputers.

See ``docs/architecture.md`` for the map: ``policy`` is the pure core, ``cluster`` the shared
node bookkeeping, ``runner`` the live driver and the top-level ``sim`` package the simulated one.
"""

__version__ = "0.1.0"


def build() -> str:
    """Which build of the policy core runs here: ``"compiled (mypyc)"`` or ``"pure Python"``
    (``setup.py`` says when each is installed)."""
    from metaq_py.policy.model import Job

    # a native class that mypyc compiled lists its attributes here
    return "compiled (mypyc)" if hasattr(Job, "__mypyc_attrs__") else "pure Python"
