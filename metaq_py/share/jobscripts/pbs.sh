#!/bin/bash
# metaq-py under PBS Pro, OpenPBS or Torque: this job backfills tasks from a shared queue into
# its own nodes.
#
# Copy it (metaq jobscript pbs > pbs.sh), adjust the #PBS lines (or override them on the
# command line), then:
#     qsub pbs.sh
#     qsub -v METAQ_QUEUE=/lus/proj/queue,METAQ_ARGS=--linger pbs.sh
# qsub cannot pass arguments to a script, so extra `metaq run` arguments come in METAQ_ARGS
# (split at spaces; no quoting, globbing or other shell expansion).
#
#PBS -N metaq
#PBS -l select=4
#PBS -l place=scatter:excl
#PBS -l walltime=01:00:00
#PBS -j oe
# (select + place: four whole nodes on PBS Pro. Torque: replace both with `#PBS -l nodes=4`.)
#
# PBS sends no warning before the walltime; metaq reads the job's end from `qstat -f` and
# stops its tasks gracefully, putting them back in the queue, before it arrives.

# PBS starts the job in $HOME; go where qsub was run, so that a relative queue works.
cd "${PBS_O_WORKDIR:-.}" || exit 1
queue="${METAQ_QUEUE:-queue}"
read -r -a extra <<<"${METAQ_ARGS:-}"

# exec: metaq takes this shell's place, so the SIGTERM PBS sends at the end reaches it.
exec metaq run --queue "$queue" "${extra[@]}" "$@"
