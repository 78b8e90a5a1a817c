"""Pure decision functions: a snapshot of the world in, a list of actions out.

Nothing in this package reads a clock, a file or the environment, and nothing in it imports a
driver (``metaq_py.runner.loop``, ``sim``). See ``docs/model.md`` for every modelling choice.

Modules, one job each:

- :mod:`~metaq_py.policy.model`: the value types (jobs, running jobs, notices, actions);
- :mod:`~metaq_py.policy.snapshot`: the snapshot, everything a decision may look at;
- :mod:`~metaq_py.policy.order`: the one queue order;
- :mod:`~metaq_py.policy.backfill`: one backfilling pass with a reservation depth (EASY 1,
  conservative all);
- :mod:`~metaq_py.policy.checkpoint`: Daly's interval, the checkpoint schedule, lost work
  (imported from there: a baseline scheduler never loads it);
- :mod:`~metaq_py.policy.notice`: N, CUA, CUP before an on-demand arrival;
- :mod:`~metaq_py.policy.arrival`: PAA, SPAA, SPAA+ at the arrival;
- :mod:`~metaq_py.policy.completion`: when an on-demand job ends, its victims resume (R12);
- :mod:`~metaq_py.policy.mechanisms`: schedulers composed by name, of
  :mod:`~metaq_py.policy.choices`' words;
- :mod:`~metaq_py.policy.work`, :mod:`~metaq_py.policy.pool`: one decision's scratch state;
- :mod:`~metaq_py.policy.spans`: node pools as sorted runs of ids (the Cluster's free and
  reserved pools, which decisions walk lowest id first);
- :mod:`~metaq_py.policy.ending`, :mod:`~metaq_py.policy.lending`: the Cluster's running jobs
  in end order, and the nodes shrunk for (or preempted by) on-demand jobs until they go back.
"""

from metaq_py.policy.mechanisms import MECHANISMS, Scheduler, make_scheduler
from metaq_py.policy.model import (
    Action,
    Decision,
    Expand,
    Job,
    Kind,
    Notice,
    Preempt,
    Release,
    Reserve,
    Running,
    Shrink,
    Start,
)
from metaq_py.policy.order import queue_key
from metaq_py.policy.snapshot import Snapshot

__all__ = [
    "MECHANISMS",
    "Action",
    "Decision",
    "Expand",
    "Job",
    "Kind",
    "Notice",
    "Preempt",
    "Release",
    "Reserve",
    "Running",
    "Scheduler",
    "Shrink",
    "Snapshot",
    "Start",
    "make_scheduler",
    "queue_key",
]
