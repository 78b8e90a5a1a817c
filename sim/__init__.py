"""The trace-driven simulator: it replays a machine's job log, or a synthetic Theta-like
workload, through the same policy core the live runner uses (``metaq_py.policy``).

- :mod:`sim.trace`: reading SWF, ALCF, sacct and PBS logs, cleaning them, synthetic traces;
- :mod:`sim.workload`: the hybrid rigid / malleable / on-demand model of Fan et al.;
- :mod:`sim.engine`: the simulated driver (fake clock, agenda, arrivals, node failures);
- :mod:`sim.run`: one run (its spec, metrics, result, outputs and plots);
- :mod:`sim.study`: grids of runs, their aggregation, findings, figures and report.
"""
