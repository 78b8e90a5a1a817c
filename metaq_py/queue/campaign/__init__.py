"""What makes a queue run a campaign rather than loose tasks.

- :mod:`~metaq_py.queue.campaign.arrays`: task arrays, one small task file per index of one
  stored script (``metaq submit --array``, ``run.sh[17]``);
- :mod:`~metaq_py.queue.campaign.deps`: ``AFTER`` and ``AFTER_ANY``: names resolved at submit,
  readiness read off the queue's folders, a failed dependency failing its dependents.
"""
