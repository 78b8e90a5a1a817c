"""One simulated run: what to run, and what it produced.

- :mod:`~sim.run.spec`: a run as a value (:class:`RunSpec`: trace, policy, workload, seed,
  parameters);
- :mod:`~sim.run.result`: :class:`SimulationResult`, what :func:`sim.engine.core.simulate`
  returns; :mod:`~sim.run.metrics`: each job's outcome and the metrics over them;
- :mod:`~sim.run.outputs`, :mod:`~sim.run.plots`: the files and pictures a run leaves behind.
"""
