#!/usr/bin/env bash
# Start the local four-node SLURM (nodes n1..n4 on 127.0.0.1) used by the `slurm` tests.
#
# Idempotent: a cluster that is already up is left alone. Writes /etc/slurm/slurm.conf,
# /etc/slurm/topology.conf and /etc/slurm/slurmdbd.conf from the templates beside this script
# (refusing to replace files it did not write; rewriting them, and restarting the cluster, when
# a template changed), starts munged as the munge user, a MariaDB on 127.0.0.1:16306 for the
# accounting, slurmdbd (so that `sacct` answers), then slurmctld and one `slurmd -N nX` per
# node, and waits until sinfo shows the nodes ready. State and logs go to $METAQ_SLURM_STATE (default
# /var/spool/metaq-slurm).
# Stop it with tests/slurm/stop.sh.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
state="${METAQ_SLURM_STATE:-/var/spool/metaq-slurm}"
conf=/etc/slurm/slurm.conf
marker="# metaq-py local test cluster"
nodes=(n1 n2 n3 n4)
say() { echo "tests/slurm/start.sh: $*"; }
die() { echo "tests/slurm/start.sh: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "must run as root (the daemons run as root and munge)"
for cmd in munged slurmctld slurmd slurmdbd mariadbd mariadb-install-db sacctmgr sinfo scontrol; do
    command -v "$cmd" >/dev/null 2>&1 || die "$cmd is not installed; run tests/slurm/install.sh first"
done

# Ready means: the controller answers and all four nodes are idle, mixed or allocated.
ready() {
    local states
    states=$(sinfo -h -N -o '%N %t' 2>/dev/null | sort -u) || return 1
    [ "$(grep -cE '^n[1-4] (idle|mix|alloc|comp)$' <<<"$states")" -eq 4 ]
}
alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
started=0  # set when this run starts a daemon

# 1. munge: the key, its run directory, and the daemon as the munge user.
if ! munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
    install -d -o munge -g munge -m 0700 /etc/munge /var/lib/munge /var/log/munge
    install -d -o munge -g munge -m 0755 /run/munge
    if [ ! -s /etc/munge/munge.key ]; then
        say "creating a munge key"
        if command -v mungekey >/dev/null 2>&1; then
            mungekey --create --keyfile=/etc/munge/munge.key
        else  # munge before 0.5.14 has no mungekey
            dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
        fi
        chown munge:munge /etc/munge/munge.key
        chmod 0400 /etc/munge/munge.key
    fi
    if command -v runuser >/dev/null 2>&1; then
        runuser -u munge -- munged
    else
        su -s /bin/sh munge -c munged
    fi
    for _ in $(seq 50); do
        munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1 && break
        sleep 0.1
    done
    munge -n </dev/null | unmunge >/dev/null || die "munged does not answer (see /var/log/munge/munged.log)"
    say "munged started"
fi

# 2. The configuration (slurm.conf and the topology.conf beside it), written from the
#    templates unless a foreign file is in place; a running cluster is restarted when either
#    changed.
changed=0
write_conf() {  # write_conf TEMPLATE TARGET
    local text
    if [ -f "$2" ] && ! grep -qF "$marker" "$2"; then
        die "$2 exists and was not written by this script; move it away first"
    fi
    text=$(sed -e "s|@HOST@|$(hostname -s)|g" -e "s|@STATE@|$state|g" "$1")
    if [ ! -f "$2" ] || [ "$text" != "$(cat "$2")" ]; then
        install -d "$(dirname "$2")"
        printf '%s\n' "$text" >"$2"
        say "wrote $2"
        changed=1
    fi
}
install -d "$state"/ctld "$state"/log "${nodes[@]/#/$state/spool/}"
write_conf "$here/slurm.conf.in" "$conf"
write_conf "$here/topology.conf.in" "$(dirname "$conf")/topology.conf"
write_conf "$here/slurmdbd.conf.in" "$(dirname "$conf")/slurmdbd.conf"
chmod 0600 "$(dirname "$conf")/slurmdbd.conf"  # slurmdbd refuses a readable one (a password)
# A running cluster with an old configuration must be restarted to pick up the new one.
if [ "$changed" -eq 1 ] && { alive "$state/slurmctld.pid" || alive "$state/slurmdbd.pid"; }; then
    bash "$here/stop.sh"
fi

# 3. Accounting: a MariaDB of our own (its files in $state/mariadb, listening on 127.0.0.1
#    only; it writes its pid and log there too, as the mysql user), the database user slurmdbd.conf names, slurmdbd, and the cluster registered in it.
db="$state/mariadb"
sql() { mariadb --no-defaults --socket="$db/mariadb.sock" -u root "$@"; }
if ! alive "$db/mariadb.pid"; then
    if [ ! -d "$db/mysql" ]; then
        install -d -o mysql -g mysql "$db"
        mariadb-install-db --no-defaults --user=mysql --datadir="$db" --auth-root-authentication-method=socket \
            >"$state/log/mariadb-install.log" 2>&1 || die "mariadb-install-db failed (see $state/log/mariadb-install.log)"
    fi
    setsid mariadbd --no-defaults --user=mysql --datadir="$db" --socket="$db/mariadb.sock" \
        --pid-file="$db/mariadb.pid" --port=16306 --bind-address=127.0.0.1 --skip-name-resolve \
        --log-error="$db/mariadb.err" </dev/null >/dev/null 2>&1 &
    for _ in $(seq 300); do sql -e 'select 1' >/dev/null 2>&1 && break; sleep 0.1; done
    sql -e 'select 1' >/dev/null || die "MariaDB does not answer (see $db/mariadb.err)"
    say "MariaDB started"
fi
sql -e "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'metaq-test';
        GRANT ALL ON metaq_slurm_acct.* TO 'slurm'@'127.0.0.1';" || die "cannot create the database user"
if ! alive "$state/slurmdbd.pid"; then
    slurmdbd
    say "slurmdbd started"
fi
for _ in $(seq 300); do sacctmgr -n -P show cluster format=cluster >/dev/null 2>&1 && break; sleep 0.1; done
clusters=$(sacctmgr -n -P show cluster format=cluster) || die "slurmdbd does not answer (see $state/log/slurmdbd.log)"
if ! grep -qx metaqtest <<<"$clusters"; then
    sacctmgr -i add cluster metaqtest >/dev/null || die "cannot register the cluster with slurmdbd"
    say "cluster metaqtest registered with slurmdbd"
fi

# 4. The controller, then one slurmd per pretend node.
if ! alive "$state/slurmctld.pid"; then
    slurmctld
    started=1
    say "slurmctld started"
fi
for _ in $(seq 100); do
    scontrol ping 2>/dev/null | grep -q UP && break
    sleep 0.1
done
scontrol ping | grep -q UP || die "slurmctld does not answer (see $state/log/slurmctld.log)"
for node in "${nodes[@]}"; do
    if ! alive "$state/slurmd-$node.pid"; then
        slurmd -N "$node"
        started=1
        say "slurmd -N $node started"
    fi
done

# 5. Wait until the nodes are ready; nodes left down or drained by an earlier run are resumed.
up=0
for i in $(seq 300); do
    ready && { up=1; break; }
    if [ "$i" -eq 50 ]; then
        scontrol update NodeName=n[1-4] State=RESUME 2>/dev/null || true
    fi
    sleep 0.1
done
if [ "$up" -ne 1 ]; then
    sinfo -N >&2 || true
    die "the nodes did not become idle within 30 s (see $state/log)"
fi

# 6. Prove a fresh start with a step on all four nodes. (A controller restored from its state
#    files can show nodes idle a moment before their slurmd has really registered.)
if [ "$started" -eq 1 ] && ! timeout 60 srun -N 4 -t 1 --job-name=metaq-smoke true; then
    die "a one-second job on all four nodes failed (see $state/log)"
fi
say "SLURM is up: $(sinfo -h -o '%P %D %t %N' | tr '\n' ' ')"
