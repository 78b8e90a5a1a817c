"""Making tasks from Python: ``metaq_py.open_queue(path).submit(...)``.

- :mod:`~metaq_py.api.handle`: :func:`open_queue` and :class:`TaskQueue`, whose ``submit``
  makes one task from keyword arguments named as the ``#METAQ`` directives, judged exactly as
  ``metaq submit`` judges a file;
- :mod:`~metaq_py.api.kinds`: :class:`TaskKind`, a class per kind of task with its resources
  and its ``prologue``, ``run`` and ``epilogue`` steps;
- :mod:`~metaq_py.api.script`: the task script written from those values.

``docs/user-guide.md`` ("From Python") shows them at work;
``metaq_py/share/queue/examples/api_campaign.py``
builds a lattice campaign with them.
"""

from metaq_py.api.handle import Submitted, TaskQueue, open_queue
from metaq_py.api.kinds import TaskKind
from metaq_py.api.script import Directives, Line, Shape

__all__ = ["Directives", "Line", "Shape", "Submitted", "TaskKind", "TaskQueue", "open_queue"]
