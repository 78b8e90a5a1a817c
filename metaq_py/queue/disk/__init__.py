"""The queue's dealings with the file system, below the level of tasks: where nothing planted
in a shared folder may crash, hang or mislead a runner.

- :mod:`~metaq_py.queue.disk.fileio`: the one safe reader (regular files only, no links,
  capped sizes) and the writes that never follow a link;
- :mod:`~metaq_py.queue.disk.folders`: the files kept beside a task, how folders are listed,
  and folders made once and remembered;
- :mod:`~metaq_py.queue.disk.moves`: the one rename that moves a task, with what travels with
  it;
- :mod:`~metaq_py.queue.disk.walk`: the walk of one task folder, for the index.
"""
