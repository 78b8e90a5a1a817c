"""Trace formats as their tools write them, each recognised from its content.

- :mod:`~sim.trace.formats.swf`: the Standard Workload Format (reader, fast reader, writer);
- :mod:`~sim.trace.formats.alcf`: ALCF's ``DIM_JOB_COMPOSITE`` CSV;
- :mod:`~sim.trace.formats.sacct`: SLURM ``sacct --parsable2`` output, job steps and all;
- :mod:`~sim.trace.formats.pbs`: the ``E`` records of PBS Pro / OpenPBS accounting logs;
- :mod:`~sim.trace.formats.timefields`: the time and duration spellings the logs share;
- :mod:`~sim.trace.formats.textio`: reading a file line by line, plain or gzipped;
- :mod:`~sim.trace.formats.convert`: any of them written as SWF (``metaq trace convert``).
"""
