"""What a queue's owners decide: its settings file, which tasks it admits, and whose files it
trusts.

- :mod:`~metaq_py.queue.settings.config`: ``metaq.yaml``, read into a typed
  :class:`~metaq_py.queue.settings.config.QueueConfig`, with the defaults and caps;
- :mod:`~metaq_py.queue.settings.admission`: whether a parsed task fits this queue's caps and
  log roots;
- :mod:`~metaq_py.queue.settings.trust`: who may write a task, judged on the file as found.
"""
