"""Studies: grids of runs over policies, workloads, seeds and parameters, and what they conclude.

- :mod:`~sim.study.grid`: the named studies and the runs each expands to;
- :mod:`~sim.study.execution`: running them (in parallel, with stored :class:`FinishedRun`
  files); :mod:`~sim.study.task_scripts`: the same runs as ``#METAQ`` task scripts;
- :mod:`~sim.study.metrics`: the figures recorded per run; :mod:`~sim.study.aggregate`: the
  results table over seeds;
- :mod:`~sim.study.findings`: the paper's headline findings, judged; :mod:`~sim.study.figures`,
  :mod:`~sim.study.report`, :mod:`~sim.study.outputs`: what a study writes.
"""
