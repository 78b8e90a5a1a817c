"""The files metaq-py ships beside its code, installed with it as package data.

- ``queue/``: the example queue that ``metaq demo`` runs on a scratch copy, with the campaign
  of the user guide in ``queue/examples/`` (never a Python package: it holds no
  ``__init__.py``, so that nothing imports it by the name ``queue``);
- ``jobscripts/``: ``slurm.sh``, ``pbs.sh`` and ``local.sh``, the batch scripts that run
  ``metaq run``. ``metaq jobscript SYSTEM`` prints one to copy, and ``metaq alloc`` submits
  them when ``alloc.jobscript`` names none.

They are found beside this module, so a checkout, an editable install and a wheel installed
anywhere all find their own copy.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["JOBSCRIPT_SYSTEMS", "example_queue", "jobscript"]

HERE = Path(__file__).resolve().parent

JOBSCRIPT_SYSTEMS = ("slurm", "pbs", "local")
"""The batch systems metaq-py ships a job script for."""


def example_queue() -> Path:
    """The example queue's folder (read it, or copy it: never run a queue in place here)."""
    return HERE / "queue"


def jobscript(system: str) -> Path:
    """The job script metaq-py ships for ``system`` (one of :data:`JOBSCRIPT_SYSTEMS`)."""
    if system not in JOBSCRIPT_SYSTEMS:
        raise ValueError(f"no job script for {system!r}; there is one for "
                         f"{', '.join(JOBSCRIPT_SYSTEMS)}")
    return HERE / "jobscripts" / f"{system}.sh"
