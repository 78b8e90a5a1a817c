"""The trace-driven simulator: it replays a machine's job log, or a synthetic Theta-like
workload, through the same policy core the live runner uses (``metaq_py.policy``).

Data side: :mod:`sim.trace` (reading and cleaning traces), :mod:`sim.synthetic` (the default
workload when no trace is given), :mod:`sim.workload` (the hybrid rigid / malleable / on-demand
model of Fan et al.) and :mod:`sim.metrics` (what a run is judged by).
"""
