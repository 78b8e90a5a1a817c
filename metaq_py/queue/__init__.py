"""The queue on disk: the file system is the queue.

:mod:`~metaq_py.queue.layout` holds the folders and the states; :mod:`~metaq_py.queue.claiming`
the runner's scan, claim, heartbeat and the one move; :mod:`~metaq_py.queue.store` the end of a
claim (finish, requeue, reclaim); :mod:`~metaq_py.queue.submit` ``metaq submit``;
:mod:`~metaq_py.queue.admin` the people's other commands (hold, release, cancel, retry, find,
list). Beside them: the index of waiting tasks (``index``), the one judgement of a task file
(``judge``), logbooks, claims and leases, advance notices, the event log, the watcher, the
summary of ended tasks (``tally``) and ``metaq doctor``'s checks (``doctor``). Three
subpackages: the file system below the level of tasks (:mod:`~metaq_py.queue.disk`), arrays and
dependencies (:mod:`~metaq_py.queue.campaign`) and the owners' settings
(:mod:`~metaq_py.queue.settings`). ``docs/architecture.md`` has the table.

This package is ``metaq_py.queue``; the repository's top-level ``queue/`` folder is an example
queue, never a Python package.
"""
