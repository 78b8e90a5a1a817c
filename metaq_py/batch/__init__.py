"""Getting nodes: what the batch job the runner lives in holds, and until when.

``detect_batch()`` returns the adapter for the current job (SLURM, PBS or a local pretend
cluster); its ``allocation()`` gives an :class:`Allocation` with the job id, concrete host
names, GPU ids per node and the real end time; ``end_time()`` asks again later; and
``is_alive(jobid)`` tells whether another job holding leases in the queue still exists::

    batch = detect_batch(overrides=BatchOverrides(nnodes=2))
    alloc = batch.allocation()
    alloc.nodes, alloc.gpus_per_node, alloc.time_left(time.time())
    batch.is_alive("123456")

Every failure is a :class:`BatchError` with one sentence naming the command or variable.
"""

from typing import TYPE_CHECKING

from metaq_py.batch.base import SYSTEMS, Allocation, BatchError, BatchOverrides, BatchSystem
from metaq_py.batch.detect import adapter, detect_batch, detect_system

if TYPE_CHECKING:
    from metaq_py.batch.local import LocalBatch
    from metaq_py.batch.pbs import PbsBatch
    from metaq_py.batch.slurm import SlurmBatch

__all__ = [
    "SYSTEMS",
    "Allocation",
    "BatchError",
    "BatchOverrides",
    "BatchSystem",
    "LocalBatch",
    "PbsBatch",
    "SlurmBatch",
    "detect_batch",
    "detect_system",
]


def __getattr__(name: str) -> object:
    """``LocalBatch``, ``PbsBatch`` and ``SlurmBatch``, loaded when first asked for: a job
    loads only its own system's adapter (:func:`detect_batch`)."""
    systems = {"LocalBatch": "local", "PbsBatch": "pbs", "SlurmBatch": "slurm"}
    if name in systems:
        return adapter(systems[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
