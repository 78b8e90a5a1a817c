#!/usr/bin/env bash
# Stop the local SLURM started by tests/slurm/start.sh: its slurmd processes, slurmctld and
# slurmdbd, then its MariaDB, by the pids in their pid files. munged is left running (other
# software may use it).
set -uo pipefail

state="${METAQ_SLURM_STATE:-/var/spool/metaq-slurm}"
say() { echo "tests/slurm/stop.sh: $*"; }

# stop PIDFILE...: TERM each daemon, wait up to 10 s for all of them to go, then KILL.
stop() {
    local file pid pids=() left
    for file in "$@"; do
        [ -f "$file" ] || continue
        pid=$(cat "$file")
        if kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" && pids+=("$pid") && say "stopping $(basename "$file" .pid) (pid $pid)"
        fi
    done
    for _ in $(seq 100); do
        left=0
        for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && left=1; done
        [ "$left" -eq 0 ] && return 0
        sleep 0.1
    done
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" && say "killed $pid"; done
    return 0
}
# The SLURM daemons first (slurmctld may still be telling slurmdbd of jobs), the database last.
stop "$state"/slurmd-n*.pid "$state"/slurmctld.pid "$state"/slurmdbd.pid
stop "$state"/mariadb/mariadb.pid
say "stopped"
exit 0
