"""The batch-job loop: ``metaq run`` inside one allocation.

:mod:`~metaq_py.runner.loop` holds the :class:`Runner` itself (start, the event loop, stop);
around it, one module per job:

* :mod:`~metaq_py.runner.wakeups`: the inbox, the queue and run-folder watchers, the signals;
* :mod:`~metaq_py.runner.offers`: waiting tasks turned into policy jobs (the offer window);
* :mod:`~metaq_py.runner.decide`: applying decisions to the Cluster and to processes;
* :mod:`~metaq_py.runner.upkeep`: heartbeats, reclaims (:mod:`~metaq_py.runner.reclaim`)
  and notices;
* :mod:`~metaq_py.runner.events`: the run's event vocabulary and its
  :class:`~metaq_py.runner.events.EventWriter`; :mod:`~metaq_py.runner.options` and
  :mod:`~metaq_py.runner.context`: what they all share;
* :mod:`metaq_py.runner.tasks`: what the runner does to the tasks it holds (the roster,
  placing, launching, resizing, settling exits, one live task).

Nothing is imported here, so that importing a piece imports no more than it needs.
"""
