"""``metaq alloc``: batch allocations submitted for a queue when its tasks wait.

- :mod:`~metaq_py.alloc.policy`: whether to submit now, and the size (pure, no I/O);
- :mod:`~metaq_py.alloc.journal`: the queue's ``alloc/`` folder: the event log of every
  submission and refusal, the allocations last seen, and the lock two alloc processes share;
- :mod:`~metaq_py.alloc.loop`: one pass (look, decide, submit, write down) and the watch loop.

The batch commands themselves (``sbatch``, ``qsub``, listing this queue's allocations) are in
:mod:`metaq_py.batch.submit`.
"""
