#!/usr/bin/env bash
# Stop the Slurm that cluster-up.sh started under $GPUPLAN_SLURM_DIR: cancel its jobs, then stop
# exactly its daemons, by pid file (checking each pid still is that daemon). Leaves the directory
# (configuration, logs) in place; `--purge` removes it too. Safe to run when nothing is up.
set -uo pipefail

D=${GPUPLAN_SLURM_DIR:-/tmp/gpuplan-slurm}
export SLURM_CONF="$D/slurm.conf" PATH="$PATH:/usr/sbin:/sbin"

stop() {  # stop PIDFILE COMM: TERM the process if the pid file names a live COMM, wait up to 10 s
  local pid
  [ -s "$1" ] && pid=$(cat "$1") || return 0
  [ -r "/proc/$pid/comm" ] && [ "$(cat "/proc/$pid/comm")" = "$2" ] || return 0
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  echo "cluster-down: $2 ($pid) ignored SIGTERM; killing it" >&2
  kill -KILL "$pid" 2>/dev/null || true
}

if [ -f "$SLURM_CONF" ] && [ -r /proc/"$(cat "$D/run/slurmctld.pid" 2>/dev/null || echo none)"/comm ]; then
  # cancel first: a job's processes outlive a stopped slurmd
  if scancel --quiet --full --signal=KILL --state=RUNNING 2>/dev/null; then :; fi
  squeue -h -o %i 2>/dev/null | xargs -r scancel 2>/dev/null
  for _ in $(seq 50); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.2; done
fi

for f in "$D"/run/slurmd-*.pid; do [ -e "$f" ] && stop "$f" slurmd; done
stop "$D/run/slurmctld.pid" slurmctld
stop "$D/munge/munged.pid" munged

# the node-name lines cluster-up.sh added to /etc/hosts
if grep -qF -- "# gpuplan-slurm $D" /etc/hosts 2>/dev/null; then
  hosts_tmp=$(mktemp)
  grep -vF -- "# gpuplan-slurm $D" /etc/hosts >"$hosts_tmp"
  cat "$hosts_tmp" >/etc/hosts
  rm -f "$hosts_tmp"
fi

if [ "${1:-}" = --purge ]; then
  rm -rf "$D"
fi
echo "cluster-down: stopped the Slurm under $D"
