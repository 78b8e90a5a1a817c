#!/usr/bin/env bash
# Stop the local SLURM started by tests/slurm/start.sh: its slurmd processes and slurmctld, by
# the pids in their pid files. munged is left running (other software may use it).
set -uo pipefail

state="${METAQ_SLURM_STATE:-/var/spool/metaq-slurm}"
say() { echo "tests/slurm/stop.sh: $*"; }

pidfiles=("$state"/slurmd-n*.pid "$state"/slurmctld.pid)
pids=()
for file in "${pidfiles[@]}"; do
    [ -f "$file" ] || continue
    pid=$(cat "$file")
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" && pids+=("$pid") && say "stopping $(basename "$file" .pid) (pid $pid)"
    fi
done
# Wait up to 10 s for them to go; the daemons remove their own pid files.
for _ in $(seq 100); do
    left=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && left=1; done
    [ "$left" -eq 0 ] && { say "stopped"; exit 0; }
    sleep 0.1
done
for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" && say "killed $pid"; done
exit 0
