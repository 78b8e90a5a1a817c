#!/bin/bash
# metaq-py under SLURM: this job backfills tasks from a shared queue into its own nodes.
#
# Copy it (metaq jobscript slurm > slurm.sh), adjust the #SBATCH lines (or override them on
# the command line), then:
#     sbatch slurm.sh                        # queue from $METAQ_QUEUE, else ./queue
#     sbatch -N 8 -t 6:00:00 slurm.sh --linger
# Arguments after the script name go to `metaq run`.
#
#SBATCH --job-name=metaq
#SBATCH --nodes=4
#SBATCH --time=01:00:00
#SBATCH --output=metaq-%j.out
# SIGUSR1 to this batch shell (B:) 120 s before the time limit. metaq then stops its tasks
# gracefully and puts them back in the queue. Make it longer than your tasks' grace periods.
#SBATCH --signal=B:USR1@120

# SLURM starts the job in the directory sbatch was run from, so a relative queue works.
queue="${METAQ_QUEUE:-queue}"

# exec: metaq takes this shell's place, so the signal meant for the batch shell reaches it.
exec metaq run --queue "$queue" "$@"
