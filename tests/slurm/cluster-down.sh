#!/usr/bin/env bash
# Stop the Slurm that cluster-up.sh started under $GPUPLAN_SLURM_DIR (default /tmp/gpuplan-slurm):
# cancel its jobs, stop exactly its daemons by pid file (checking that each pid still is that
# daemon) and remove its /etc/hosts lines. Keeps the directory (configuration, logs, munge key);
# `--purge` removes it too. Safe to run when nothing is up.
set -uo pipefail

D=${GPUPLAN_SLURM_DIR:-/tmp/gpuplan-slurm}
export SLURM_CONF="$D/slurm.conf" PATH="$PATH:/usr/sbin:/sbin"

is() {  # is PIDFILE COMM: the pid file names a live process with that command name
  local pid
  [ -s "$1" ] && pid=$(cat "$1") && [ -r "/proc/$pid/comm" ] && [ "$(cat "/proc/$pid/comm")" = "$2" ]
}
stop() {  # stop PIDFILE COMM: SIGTERM, wait up to 10 s, then SIGKILL
  local pid
  is "$1" "$2" || return 0
  pid=$(cat "$1")
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  echo "cluster-down: $2 ($pid) ignored SIGTERM; killing it" >&2
  kill -KILL "$pid" 2>/dev/null
}

# Cancel the jobs first: their processes would outlive a stopped slurmd.
if is "$D/run/slurmctld.pid" slurmctld; then
  jobs=$(squeue -h -o %i 2>/dev/null)
  if [ -n "$jobs" ]; then
    # shellcheck disable=SC2086
    scancel $jobs 2>/dev/null
    for _ in $(seq 50); do [ -z "$(squeue -h -t RUNNING,COMPLETING -o %i 2>/dev/null)" ] && break; sleep 0.2; done
  fi
fi

for f in "$D"/run/slurmd-*.pid; do [ -e "$f" ] && stop "$f" slurmd; done
stop "$D/run/slurmctld.pid" slurmctld
stop "$D/munge/munged.pid" munged

mark="# gpuplan-slurm $D"
if grep -qF -- "$mark" /etc/hosts 2>/dev/null; then
  hosts_new=$(mktemp)
  grep -vF -- "$mark" /etc/hosts >"$hosts_new"
  cat "$hosts_new" >/etc/hosts   # in place: /etc/hosts may be a bind mount
  rm -f "$hosts_new"
fi

[ "${1:-}" = --purge ] && rm -rf "$D"
echo "cluster-down: stopped the Slurm under $D"
exit 0
