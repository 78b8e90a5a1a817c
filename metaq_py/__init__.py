"""metaq-py: a file-system task backfiller for supercomputers.

See ``docs/architecture.md`` for the map: ``policy`` is the pure core, ``cluster`` the shared
node bookkeeping, ``runner`` the live driver and the top-level ``sim`` package the simulated one.
"""

__version__ = "0.1.0"
