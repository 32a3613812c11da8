#!/usr/bin/env bash
# Start a throwaway local Slurm (Debian 12: slurm-wlm 22.05 + munge) with fake GPUs, for the tests
# that submit gpuplan's sbatch scripts. Run as root. Everything lives under $GPUPLAN_SLURM_DIR
# (default /tmp/gpuplan-slurm); stop it with cluster-down.sh.
#
# Nodes, one slurmd each, all on this machine (so multi-node jobs are accepted *and* can run):
#   h100-01..NN  8 x gres gpu:h100 each   (NN = $GPUPLAN_SLURM_MULTI_NODES, default 4)
#   a100-01..NN  8 x gres gpu:a100 each
#   l40s-01      8 x gres gpu:l40s
#   l4-01        4 x gres gpu:l4
# Every node claims 128 CPUs and 2,000,000 MB of memory (SlurmdParameters=config_overrides),
# whatever this machine has; jobs get 8000 MB per CPU unless they ask (--mem...).
# Partitions: gpu (the default, all nodes) and one per GPU type: h100, a100, l40s, l4.
# The fake GPUs are links to /dev/null: a job sees CUDA_VISIBLE_DEVICES, but no device.
#
# Several slurmd on one host without a --enable-multiple-slurmd build: each node has its own
# slurmd port (NodeName ... Port=), all slurmd listen on every address, and slurmctld reaches
# each through its NodeAddr 127.0.10.N. Each node name is added to /etc/hosts (127.0.10.N; removed
# by cluster-down.sh) and, where `unshare --uts` is allowed, its slurmd runs with that hostname, so
# a job's `hostname` and `scontrol show hostnames $SLURM_JOB_NODELIST` look like a real cluster's.
#
# Idempotent: when this same cluster is already up it only reports; otherwise it (re)starts it
# from a clean state (no jobs). Ends by printing `export SLURM_CONF=...`.
set -euo pipefail

D=${GPUPLAN_SLURM_DIR:-/tmp/gpuplan-slurm}
MULTI=${GPUPLAN_SLURM_MULTI_NODES:-4}
CTLD_PORT=${GPUPLAN_SLURM_PORT:-16817}   # slurmctld; slurmd use the next ports. Not Slurm's 6817+,
                                         # so a system Slurm on this host is left alone
HERE=$(cd "$(dirname "$0")" && pwd)
export SLURM_CONF="$D/slurm.conf" PATH="$PATH:/usr/sbin:/sbin"

die() { echo "cluster-up: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root (it starts munged, slurmctld and slurmd)"
[[ "$MULTI" =~ ^[1-9][0-9]?$ ]] || die "GPUPLAN_SLURM_MULTI_NODES must be 1..99, not '$MULTI'"
[[ "$CTLD_PORT" =~ ^[0-9]+$ ]] && [ "$CTLD_PORT" -ge 1024 ] && [ "$CTLD_PORT" -le 65000 ] ||
  die "GPUPLAN_SLURM_PORT must be 1024..65000, not '$CTLD_PORT'"

# --- packages -------------------------------------------------------------------------------------
missing=0
for c in munged mungekey slurmctld slurmd slurmstepd sbatch scontrol sinfo unshare runuser; do
  command -v "$c" >/dev/null || missing=1
done
if [ "$missing" = 1 ]; then
  command -v apt-get >/dev/null || die "Slurm is not installed and there is no apt-get to install it"
  echo "cluster-up: installing slurm-wlm and munge" >&2
  t0=$SECONDS
  export DEBIAN_FRONTEND=noninteractive
  pkgs=(slurm-wlm munge util-linux)   # slurm-wlm pulls slurmctld, slurmd and slurm-client
  log=$(mktemp)
  apt_install() { apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >>"$log" 2>&1; }
  # a fresh image has no package lists: update only when the install needs it
  apt_install || { apt-get update -qq >>"$log" 2>&1 && apt_install; } ||
    { tail -20 "$log" >&2; die "apt-get install ${pkgs[*]} failed"; }
  rm -f "$log"
  echo "cluster-up: installed in $((SECONDS - t0)) s" >&2
fi

# --- the cluster's shape --------------------------------------------------------------------------
nodes=()   # "name type gpus address port"
for i in $(seq 1 "$MULTI"); do nodes+=("$(printf 'h100-%02d' "$i") h100 8"); done
for i in $(seq 1 "$MULTI"); do nodes+=("$(printf 'a100-%02d' "$i") a100 8"); done
nodes+=("l40s-01 l40s 8" "l4-01 l4 4")
for i in "${!nodes[@]}"; do nodes[i]="${nodes[i]} 127.0.10.$((i + 1)) $((CTLD_PORT + 1 + i))"; done
h100_nodes=$(printf 'h100-[01-%02d]' "$MULTI")
a100_nodes=$(printf 'a100-[01-%02d]' "$MULTI")

mkdir -p "$D"
conf_new="$D/slurm.conf.new"
{
  cat <<EOF
# Written by gpuplan's tests/slurm/cluster-up.sh on each start; edits are overwritten.
ClusterName=gpuplan
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$D/munge/munge.socket
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool/%n
SlurmctldPidFile=$D/run/slurmctld.pid
SlurmdPidFile=$D/run/slurmd-%n.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=8000
GresTypes=gpu
SlurmdParameters=config_overrides
ReturnToService=2
SlurmdTimeout=300
InactiveLimit=0
KillWait=5
MinJobAge=600
EnforcePartLimits=ALL
EOF
  for spec in "${nodes[@]}"; do
    read -r name type gpus addr port <<<"$spec"
    echo "NodeName=$name NodeAddr=$addr Port=$port CPUs=128 RealMemory=2000000" \
         "Gres=gpu:$type:$gpus Feature=$type State=UNKNOWN"
  done
  echo "PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
  echo "PartitionName=h100 Nodes=$h100_nodes MaxTime=INFINITE State=UP"
  echo "PartitionName=a100 Nodes=$a100_nodes MaxTime=INFINITE State=UP"
  echo "PartitionName=l40s Nodes=l40s-01 MaxTime=INFINITE State=UP"
  echo "PartitionName=l4 Nodes=l4-01 MaxTime=INFINITE State=UP"
} >"$conf_new"

gres_new="$D/gres.conf.new"   # slurmd reads gres.conf from SLURM_CONF's directory
for spec in "${nodes[@]}"; do
  read -r name type gpus _ <<<"$spec"
  # gres/gpu silently drops a GPU without File=, so each fake GPU gets a device file
  echo "NodeName=$name Name=gpu Type=$type File=$D/dev/nvidia[0-$((gpus - 1))]"
done >"$gres_new"

hosts_mark="# gpuplan-slurm $D"   # our /etc/hosts lines end with this
hosts_want=$(for spec in "${nodes[@]}"; do
  read -r name _ _ addr _ <<<"$spec"; echo "$addr $name $hosts_mark"; done)

alive() {  # alive PIDFILE COMM: the pid file names a live process with that command name
  local pid
  [ -s "$1" ] && pid=$(cat "$1") && [ -r "/proc/$pid/comm" ] && [ "$(cat "/proc/$pid/comm")" = "$2" ]
}
nodes_up() {  # every node responds and none is down, drained or not yet registered
  local states
  states=$(sinfo -h -N -o '%T' 2>/dev/null | sort -u) || return 1
  [ -n "$states" ] && ! grep -qvE '^(idle|mixed|allocated|completing)$' <<<"$states"
}
report() {
  sinfo -o '%P %D %N %T %G'
  echo "SLURM_CONF is $SLURM_CONF (logs under $D/log)"
  echo "export SLURM_CONF=$SLURM_CONF"
}

# --- already up, with this configuration? ---------------------------------------------------------
if cmp -s "$conf_new" "$D/slurm.conf" && cmp -s "$gres_new" "$D/gres.conf" &&
   [ "$(grep -F -- "$hosts_mark" /etc/hosts)" = "$hosts_want" ] &&
   alive "$D/munge/munged.pid" munged && alive "$D/run/slurmctld.pid" slurmctld; then
  up=1
  for spec in "${nodes[@]}"; do
    read -r name _ <<<"$spec"; alive "$D/run/slurmd-$name.pid" slurmd || up=0
  done
  if [ "$up" = 1 ] && scontrol ping >/dev/null 2>&1 && nodes_up; then
    rm -f "$conf_new" "$gres_new"
    echo "cluster-up: already running" >&2
    report
    exit 0
  fi
fi

# --- (re)start from a clean state -----------------------------------------------------------------
t0=$SECONDS
bash "$HERE/cluster-down.sh" >/dev/null 2>&1 || true
rm -rf "$D/state" "$D/spool" "$D/run" "$D/log"
mkdir -p "$D"/{state,spool,log,run,munge,dev}
mv "$conf_new" "$D/slurm.conf"
mv "$gres_new" "$D/gres.conf"
for spec in "${nodes[@]}"; do read -r name _ <<<"$spec"; mkdir -p "$D/spool/$name"; done
for i in $(seq 0 7); do ln -sfn /dev/null "$D/dev/nvidia$i"; done

# Node names resolve to their own addresses. /etc/hosts is rewritten in place, not renamed over:
# in a container it is often a bind mount.
hosts_new=$(mktemp)
{ grep -vF -- "$hosts_mark" /etc/hosts || true; echo "$hosts_want"; } >"$hosts_new"
cat "$hosts_new" >/etc/hosts || die "cannot write /etc/hosts"
rm -f "$hosts_new"

show_logs() {
  for f in "$D"/log/*.log "$D/munge/munged.log"; do
    [ -s "$f" ] && { echo "--- $f"; grep -v 'pmix' "$f" | tail -15; }
  done >&2
}

# munge with its own key and socket (never the system's /etc/munge or /run/munge)
chmod 755 "$D/munge"   # munged wants the socket directory searchable by all, writable only by it
[ -s "$D/munge/munge.key" ] || mungekey -c -k "$D/munge/munge.key"
rm -f "$D/munge/munged.log"
chown -R munge:munge "$D/munge"
chmod 600 "$D/munge/munge.key"
runuser -u munge -- munged --socket="$D/munge/munge.socket" --key-file="$D/munge/munge.key" \
  --pid-file="$D/munge/munged.pid" --log-file="$D/munge/munged.log" --seed-file="$D/munge/munged.seed" ||
  { show_logs; die "munged did not start"; }

slurmctld -i || { show_logs; die "slurmctld did not start"; }
for _ in $(seq 100); do scontrol ping >/dev/null 2>&1 && break; sleep 0.1; done
scontrol ping >/dev/null 2>&1 || { show_logs; die "slurmctld does not answer"; }

# A slurmd gets its node's name as hostname in its own UTS namespace where that is allowed (root
# in a VM or gVisor; not in a default Docker container, which lacks CAP_SYS_ADMIN). Cosmetic only:
# without it, jobs just see this machine's hostname.
if unshare --uts true 2>/dev/null; then uts=1; else uts=0; fi
for spec in "${nodes[@]}"; do
  read -r name _ <<<"$spec"
  if [ "$uts" = 1 ]; then
    unshare --uts sh -c 'hostname "$1" && exec slurmd -N "$1"' slurmd-launch "$name"
  else
    slurmd -N "$name"
  fi || { show_logs; die "slurmd -N $name did not start"; }
done
for _ in $(seq 300); do nodes_up && break; sleep 0.1; done
nodes_up || { sinfo -N -o '%N %T %E' >&2; show_logs; die "the nodes did not all come up within 30 s"; }
echo "cluster-up: started in $((SECONDS - t0)) s$([ "$uts" = 1 ] || echo ' (no per-node hostnames)')" >&2
report
