"""The simulated driver: one run of a trace or workload through the policy core and the
:class:`~metaq_py.cluster.Cluster`, the same calls the live runner makes.

- :mod:`~sim.engine.core`: :func:`simulate` and :class:`Engine`, the loop;
- :mod:`~sim.engine.agenda`: what is due to happen, in one deterministic order;
- :mod:`~sim.engine.arrivals`: the jobs and notices, fed lazily in order;
- :mod:`~sim.engine.waiting`: the waiting jobs in queue order; :mod:`~sim.engine.ledger`: every
  job's outcome as columns; :mod:`~sim.engine.samples`: the machine sampled over the run;
- :mod:`~sim.engine.failures`: node failures a run may add; :mod:`~sim.engine.errors`: the
  simulator's error.

The policy core, the Cluster and the engine's hot modules are compiled by mypyc when installed
(``setup.py``); the pure-Python source behaves identically.
"""
