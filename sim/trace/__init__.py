"""Job traces: reading a machine's job log (SWF, the ALCF composite CSV), cleaning it into one a
simulator can replay, and synthetic Theta-like traces.

- :mod:`~sim.trace.loader`: :class:`Trace` and :func:`load_trace`, the one way in;
- :mod:`~sim.trace.swf`, :mod:`~sim.trace.alcf`: the two formats; :mod:`~sim.trace.textio`:
  reading them line by line, plain or gzipped;
- :mod:`~sim.trace.columns`: a trace as a column table (:class:`JobTable`), one job's row
  (:class:`TraceJob`) and :class:`TraceError`;
- :mod:`~sim.trace.cleaning`: the cleaning rules and their report;
- :mod:`~sim.trace.synthetic`: the synthetic workload, the default without a trace file.
"""
