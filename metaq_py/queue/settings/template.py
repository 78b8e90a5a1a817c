"""The ``metaq.yaml`` that ``metaq init`` writes: every setting, commented out, at its default
(:mod:`metaq_py.queue.settings.config` reads it back). Text for people, kept apart from the
code that parses it."""

from __future__ import annotations

__all__ = ["TEMPLATE"]

TEMPLATE = """\
# metaq queue settings. Every setting is optional; the values shown are the defaults.
# See docs/user-guide.md for what each one means.

# Task folders, scanned in this order: a task in an earlier folder always goes first.
folders: [priority, todo]

# Order among waiting tasks of the same folder and PRIORITY: submit (earlier submit time
# first) or largest-first (more nodes first, then earlier submit time; packs a campaign of
# tasks dropped at once more tightly, like SLURM's job-size priority favouring large jobs).
order: submit

# Only tasks owned by these users are accepted (empty: any owner).
trusted_users: []

# The collaboration's group. Files and folders writable by this group are trusted; any other
# group- or world-writable task or folder is refused.
group: {group}

# A task's #METAQ LOG may go wherever the task's owner may write. If set, only under these
# folders (and the queue's jobs/). Relative paths are relative to the queue root.
log_roots: []

# What a task gets when it does not say.
defaults:
  min_wc_time: "1:00:00"   # wall clock of a task without #METAQ MIN_WC_TIME
  retries: 0               # extra runs of a task that fails, without #METAQ RETRIES
  retry_delay: 0s          # wait after a failure before a retry (#METAQ RETRY_DELAY) ...
  retry_delay_cap: 1h      # ... doubled after each failure in a row, up to this
  requeue_on: [75]         # exit codes that requeue a task, no retry spent (EX_TEMPFAIL)
  soft_fail_on: []         # exit codes that finish a task with a warning
  time_limit:              # a running task is warned and stopped after this (#METAQ TIME_LIMIT)

# Upper limits: a task asking for more is rejected. Empty means no limit.
caps:
  nodes:
  gpus:
  min_wc_time:
  attempts: 5              # runs ended without success before a task goes to failed/
  requeues: 20             # REQUEUE_ON exits before a task goes to failed/
  tasks: 64                # tasks one batch job runs at once (metaq run --max-tasks)
  launch_pause: 0.05s      # pause between two launches (metaq run --launch-pause)

# metaq alloc: allocations submitted for this queue when tasks wait (docs/user-guide.md).
alloc:
  system:                  # slurm or pbs (empty: whichever of sbatch and qsub is installed)
  jobscript:               # empty: metaq-py's own (metaq jobscript slurm or pbs prints it)
  min_nodes: 1
  max_nodes: 4
  min_walltime: 10m
  max_walltime: "24:00:00"
  margin: 5m               # added to the longest waiting task's MIN_WC_TIME
  max_allocations: 1       # this queue's allocations queued or running at once
  max_queued: 1            # of which waiting to start
  backoff: 5m              # no submission for this long after one failed
  account:
  partition:               # a SLURM partition, or a PBS queue
  qos:                     # SLURM only
  flags: []                # more sbatch or qsub arguments, as they are

# $METAQ_MPIRUN, a task's launch prefix (docs/user-guide.md): srun, mpiexec (MPICH's
# Hydra), mpirun (Open MPI), aprun or jsrun; empty: srun in a SLURM job, else what is installed.
mpi:
  launcher:
  executable:              # its program, if not the launcher's name: mpirun.openmpi, a path
  args: []                 # options right after the launcher's name, such as [--mpi=pmi2]

heartbeat: 30s             # how often a running job renews its leases
stale_after: 10m           # a lease not renewed for this long is lost and its task requeued
poll_interval: 5s          # rescan period when no file-system event arrives (NFS, Lustre)
output: files              # or streams: tasks' output in a few files per batch job (metaq log)
"""
