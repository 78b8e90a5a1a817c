"""The ground floor: the queue's dealings with the file system, below the level of tasks,
where nothing planted in a shared folder may crash, hang or mislead a runner. Nothing here
imports anything of metaq_py's above the floor (``docs/architecture.md``, "Layers").

- :mod:`~metaq_py.queue.disk.fileio`: the one safe reader (regular files only, no links,
  capped sizes) and the writes that never follow a link;
- :mod:`~metaq_py.queue.disk.folders`: the files kept beside a task, how folders are listed,
  folders made once and remembered, and an array's indices as people name them
  (``todo/prop.sh[13]``, for the commands, the runner and the reports alike);
- :mod:`~metaq_py.queue.disk.lock`: the lock of a multi-file update, never through a link;
- :mod:`~metaq_py.queue.disk.logfile`: where a task's ``LOG`` may go, opened without
  following a link.

A task's move (:mod:`metaq_py.queue.moves`) and the walk of a task folder
(:mod:`metaq_py.queue.walk`) know what a task is, and live one floor up.
"""
