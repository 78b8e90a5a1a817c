#!/usr/bin/env bash
# Install the Debian packages for the local four-node SLURM used by the `slurm` tests,
# with its accounting (slurmdbd and a MariaDB server).
#
# Idempotent: does nothing when the daemons and client commands are already there. Needs root
# (or sudo) and apt; on any other system it says so and fails, and the `slurm` tests then skip.
set -euo pipefail

needed=(slurmctld slurmd slurmdbd munged sbatch srun squeue scontrol sinfo sacct sacctmgr
        mariadbd mariadb-install-db)
missing=()
for cmd in "${needed[@]}"; do
    command -v "$cmd" >/dev/null 2>&1 || missing+=("$cmd")
done
if [ "${#missing[@]}" -eq 0 ]; then
    echo "tests/slurm/install.sh: SLURM, slurmdbd, MariaDB and munge are already installed"
    exit 0
fi
echo "tests/slurm/install.sh: missing ${missing[*]}; installing slurm-wlm, slurmdbd, MariaDB and munge"

if ! command -v apt-get >/dev/null 2>&1; then
    echo "tests/slurm/install.sh: apt-get not found; install slurm-wlm and munge by hand" >&2
    exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null 2>&1; then
        echo "tests/slurm/install.sh: installing packages needs root, and sudo is not available" >&2
        exit 1
    fi
    sudo="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
packages=(slurm-wlm slurmctld slurmd slurm-client slurmdbd mariadb-server munge parallel)
# A fresh machine has no package lists yet; refresh them when apt does not know the packages.
if ! apt-cache show slurm-wlm >/dev/null 2>&1; then
    $sudo apt-get update -q
fi
if ! $sudo apt-get install -y -q --no-install-recommends "${packages[@]}"; then
    # Stale lists point at versions the mirror no longer has: refresh once and retry.
    $sudo apt-get update -q
    $sudo apt-get install -y -q --no-install-recommends "${packages[@]}"
fi
echo "tests/slurm/install.sh: installed"
