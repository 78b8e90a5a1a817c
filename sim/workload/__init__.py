"""The hybrid workload model of Fan et al. (IPDPS 2022): a trace's jobs made rigid, malleable or
on-demand, with notices, setups and checkpoints.

- :mod:`~sim.workload.model`: :class:`WorkloadModel` and :func:`hybrid_workload`;
- :mod:`~sim.workload.grouping`: which jobs form a "project", the unit the types are drawn for.
"""
