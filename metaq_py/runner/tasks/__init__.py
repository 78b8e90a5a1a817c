"""What the runner does to the tasks it holds, from claim to exit.

- :mod:`~metaq_py.runner.tasks.live_task`: one claimed task, its process, and what is being done
  to it;
- :mod:`~metaq_py.runner.tasks.roster`: the tasks this runner holds and the hosts they hold;
- :mod:`~metaq_py.runner.tasks.placing`: a multi-node task moved inside one block of
  neighbouring nodes;
- :mod:`~metaq_py.runner.tasks.launching`: starting placed tasks once their hosts are free;
- :mod:`~metaq_py.runner.tasks.resizing`: shrinking and expanding in place, or by a restart;
- :mod:`~metaq_py.runner.tasks.exits`: settling an exit: where the task goes in the queue.
"""
