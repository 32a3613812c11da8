#!/usr/bin/env bash
# Stop the Slurm that cluster-up.sh started under $GPUPLAN_SLURM_DIR (default /tmp/gpuplan-slurm):
# cancel its jobs, stop exactly its daemons by pid file (checking that each pid still is that
# daemon; with the accounting stage also its slurmdbd and private MariaDB) and remove its
# /etc/hosts lines. Keeps the directory (configuration, logs, munge key, MariaDB datadir);
# `--purge` removes it too. Safe to run when nothing is up.
set -uo pipefail

D=${GPUPLAN_SLURM_DIR:-/tmp/gpuplan-slurm}
export SLURM_CONF="$D/slurm.conf" PATH="$PATH:/usr/sbin:/sbin"

is() {  # is PIDFILE COMM: the pid file names a live process with that command name
  local pid
  [ -s "$1" ] && pid=$(cat "$1") && [ -r "/proc/$pid/comm" ] && [ "$(cat "/proc/$pid/comm")" = "$2" ]
}
stop() {  # stop COMM PIDFILE...: SIGTERM each such daemon, wait up to 15 s for all, then SIGKILL
  local comm=$1 f pids=() pid
  shift
  for f in "$@"; do is "$f" "$comm" && pids+=("$(cat "$f")"); done
  [ ${#pids[@]} -gt 0 ] || return 0
  kill "${pids[@]}" 2>/dev/null
  for _ in $(seq 150); do
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && break; pid=; done
    [ -z "$pid" ] && return 0
    sleep 0.1
  done
  for pid in "${pids[@]}"; do
    kill -0 "$pid" 2>/dev/null && echo "cluster-down: $comm ($pid) ignored SIGTERM; killing it" >&2 &&
      kill -KILL "$pid" 2>/dev/null
  done
  return 0
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

stop slurmd "$D"/run/slurmd-*.pid   # all at once: each takes about 2 s to exit
stop slurmctld "$D/run/slurmctld.pid"
stop slurmdbd "$D/run/slurmdbd.pid"   # after slurmctld, which sends it the last job records
stop mariadbd "$D/mysql/mariadbd.pid"
stop munged "$D/munge/munged.pid"

mark="# gpuplan-slurm $D"
if grep -qF -- "$mark" /etc/hosts 2>/dev/null; then
  hosts_new=$(mktemp)
  grep -vF -- "$mark" /etc/hosts >"$hosts_new"
  cat "$hosts_new" >/etc/hosts   # in place: /etc/hosts may be a bind mount
  rm -f "$hosts_new"
fi

[ "${1:-}" = --purge ] && [ -e "$D/.gpuplan-slurm" ] && rm -rf "$D"
echo "cluster-down: stopped the Slurm under $D"
exit 0
