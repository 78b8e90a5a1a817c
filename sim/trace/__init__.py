"""Job traces: reading a machine's job log, cleaning it into one a simulator can replay, and
synthetic Theta-like traces.

- :mod:`~sim.trace.loader`: :class:`Trace` and :func:`load_trace`, the one way in;
- :mod:`sim.trace.formats`: the formats as their tools write them (SWF, the ALCF composite CSV,
  SLURM ``sacct --parsable2``, PBS accounting logs), reading them line by line plain or
  gzipped, and ``metaq trace convert`` to SWF;
- :mod:`~sim.trace.machine`: the machine's size and the unit of job sizes (processors or
  nodes); :mod:`~sim.trace.sanity`: the offered load and the warnings that make a wrong
  answer loud;
- :mod:`~sim.trace.columns`: a trace as a column table (:class:`JobTable`), one job's row
  (:class:`TraceJob`) and :class:`TraceError`;
- :mod:`~sim.trace.cleaning`: the cleaning rules and their report;
- :mod:`~sim.trace.cache`: parsed traces kept under the user's cache directory;
- :mod:`~sim.trace.scaling`: the same jobs arriving F times as fast (``--load F``);
- :mod:`~sim.trace.synthetic`: the synthetic workload, the default without a trace file.
"""
