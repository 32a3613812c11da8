#!/usr/bin/env bash
# Start a throwaway local Slurm (Debian 12: slurm-wlm 22.05 + munge) with fake GPUs, for the tests
# that submit gpuplan's sbatch scripts. Run as root. Everything lives under $GPUPLAN_SLURM_DIR.
#
# Nodes (one slurmd each, all on this machine, each bound to its own loopback address 127.0.10.N,
# so several slurmd run side by side without a multiple-slurmd build of Slurm):
#   h100-[01-NN]  8 x gres gpu:h100 each   (NN = $GPUPLAN_SLURM_MULTI_NODES, default 4)
#   a100-[01-NN]  8 x gres gpu:a100 each
#   l40s-01       8 x gres gpu:l40s
#   l4-01         4 x gres gpu:l4
# Each node claims 128 CPUs and 2 TB of memory (SlurmdParameters=config_overrides), whatever the
# machine has. Partitions: gpu (default, all nodes), and one per GPU type (h100, a100, l40s, l4).
# The fake GPUs are symlinks to /dev/null: jobs see CUDA_VISIBLE_DEVICES but no real device.
#
# Idempotent: if the same cluster is already up it only reports; otherwise it (re)starts it.
# Prints SLURM_CONF's path last (as an `export` line). Stop it with cluster-down.sh.
set -euo pipefail

D=${GPUPLAN_SLURM_DIR:-/tmp/gpuplan-slurm}
MULTI=${GPUPLAN_SLURM_MULTI_NODES:-4}
CTLD_PORT=${GPUPLAN_SLURM_CTLD_PORT:-16817}   # not 6817/6818, so a system Slurm on this host is left alone
SLURMD_PORT=${GPUPLAN_SLURM_SLURMD_PORT:-16818}
HERE=$(cd "$(dirname "$0")" && pwd)
export SLURM_CONF="$D/slurm.conf"

die() { echo "cluster-up: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root (starts munged, slurmctld and slurmd)"
[[ "$MULTI" =~ ^[1-9][0-9]?$ ]] || die "GPUPLAN_SLURM_MULTI_NODES must be 1..99, not '$MULTI'"

# --- packages -------------------------------------------------------------------------------------
need_install=0
for c in munged mungekey slurmctld slurmd sbatch; do
  command -v "$c" >/dev/null 2>&1 || [ -x "/usr/sbin/$c" ] || need_install=1
done
if [ "$need_install" = 1 ]; then
  command -v apt-get >/dev/null || die "Slurm is not installed and there is no apt-get to install it"
  echo "cluster-up: installing slurm-wlm and munge" >&2
  t0=$SECONDS
  export DEBIAN_FRONTEND=noninteractive
  pkgs=(slurm-wlm munge)   # slurm-wlm pulls slurmctld, slurmd and slurm-client
  apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >"/tmp/gpuplan-slurm-apt.log" 2>&1 ||
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${pkgs[@]}" \
        >"/tmp/gpuplan-slurm-apt.log" 2>&1; } ||
    { tail -20 /tmp/gpuplan-slurm-apt.log >&2; die "apt-get install ${pkgs[*]} failed"; }
  echo "cluster-up: installed in $((SECONDS - t0)) s" >&2
fi
export PATH="$PATH:/usr/sbin:/sbin"

# --- configuration --------------------------------------------------------------------------------
mkdir -p "$D"
nodes=()   # "name type count"
for i in $(seq 1 "$MULTI"); do nodes+=("$(printf 'h100-%02d' "$i") h100 8"); done
for i in $(seq 1 "$MULTI"); do nodes+=("$(printf 'a100-%02d' "$i") a100 8"); done
nodes+=("l40s-01 l40s 8" "l4-01 l4 4")
for i in "${!nodes[@]}"; do   # "name type count address port"
  nodes[i]="${nodes[i]} 127.0.10.$((i + 1)) $((SLURMD_PORT + i))"
done
h100_nodes=$(printf 'h100-[01-%02d]' "$MULTI"); [ "$MULTI" = 1 ] && h100_nodes=h100-01
a100_nodes=${h100_nodes//h100/a100}

conf_new="$D/slurm.conf.new"
{
  cat <<EOF
# Written by gpuplan tests/slurm/cluster-up.sh; regenerated on each start.
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
ReturnToService=2
SlurmdParameters=config_overrides
MinJobAge=600
KillWait=5
InactiveLimit=0
SlurmdTimeout=300
EOF
  for spec in "${nodes[@]}"; do
    read -r name type count addr port <<<"$spec"
    echo "NodeName=$name NodeAddr=$addr Port=$port CPUs=128 RealMemory=2000000 Gres=gpu:$type:$count Feature=$type State=UNKNOWN"
  done
  echo "PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
  echo "PartitionName=h100 Nodes=$h100_nodes MaxTime=INFINITE State=UP"
  echo "PartitionName=a100 Nodes=$a100_nodes MaxTime=INFINITE State=UP"
  echo "PartitionName=l40s Nodes=l40s-01 MaxTime=INFINITE State=UP"
  echo "PartitionName=l4 Nodes=l4-01 MaxTime=INFINITE State=UP"
} >"$conf_new"

gres_new="$D/gres.conf.new"
{
  # gres/gpu silently drops a GPU without File=, so each fake GPU gets a device file (see dev/ below)
  for spec in "${nodes[@]}"; do
    read -r name type count _ <<<"$spec"
    echo "NodeName=$name Name=gpu Type=$type File=$D/dev/nvidia[0-$((count - 1))]"
  done
} >"$gres_new"

hosts_mark="# gpuplan-slurm $D"   # /etc/hosts lines for the node names end with this
hosts_want=$(for spec in "${nodes[@]}"; do read -r name _ _ addr _ <<<"$spec"; echo "$addr $name $hosts_mark"; done)

alive() {  # alive PIDFILE COMM: the pid file names a live process with that command name
  local pid
  [ -s "$1" ] && pid=$(cat "$1") && [ -r "/proc/$pid/comm" ] && [ "$(cat "/proc/$pid/comm")" = "$2" ]
}

all_idle() {  # every node is up (idle, or busy with jobs) and none is down/drained/unknown
  local states
  states=$(sinfo -h -N -o '%T' 2>/dev/null | sort -u) || return 1
  [ -n "$states" ] && ! grep -qvE '^(idle|mixed|allocated|completing)$' <<<"$states"
}

report() {
  sinfo -N -o '%N %P %T %G' | sort -u
  echo "SLURM_CONF is $SLURM_CONF (logs in $D/log)"
  echo "export SLURM_CONF=$SLURM_CONF"
}

# --- already up with this configuration? ----------------------------------------------------------
if cmp -s "$conf_new" "$D/slurm.conf" && cmp -s "$gres_new" "$D/gres.conf" &&
   [ "$(grep -F -- "$hosts_mark" /etc/hosts)" = "$hosts_want" ] &&
   alive "$D/munge/munged.pid" munged && alive "$D/run/slurmctld.pid" slurmctld; then
  up=1
  for spec in "${nodes[@]}"; do
    read -r name _ _ <<<"$spec"; alive "$D/run/slurmd-$name.pid" slurmd || up=0
  done
  if [ "$up" = 1 ] && scontrol ping >/dev/null 2>&1 && all_idle; then
    rm -f "$conf_new" "$gres_new"
    echo "cluster-up: already running" >&2
    report
    exit 0
  fi
fi

# --- (re)start from a clean state -----------------------------------------------------------------
t0=$SECONDS
"$HERE/cluster-down.sh" >/dev/null 2>&1 || true
rm -rf "$D/state" "$D/spool" "$D/run" "$D/log"
mkdir -p "$D"/{state,spool,log,run,munge,dev}
mv "$conf_new" "$D/slurm.conf"; mv "$gres_new" "$D/gres.conf"   # gres.conf is read from SLURM_CONF's dir
for spec in "${nodes[@]}"; do read -r name _ _ <<<"$spec"; mkdir -p "$D/spool/$name"; done
for i in $(seq 0 7); do ln -sfn /dev/null "$D/dev/nvidia$i"; done
# node names resolve to their loopback addresses (cluster-down.sh removes these lines again);
# rewritten in place, as /etc/hosts is often a bind mount that cannot be renamed over
hosts_tmp=$(mktemp)
{ grep -vF -- "$hosts_mark" /etc/hosts || true; echo "$hosts_want"; } >"$hosts_tmp"
cat "$hosts_tmp" >/etc/hosts || die "cannot write /etc/hosts"
rm -f "$hosts_tmp"

# munge with a private key and socket (never the system's /etc/munge or /run/munge)
chmod 755 "$D/munge"   # munged wants its socket directory world-searchable, not writable
[ -s "$D/munge/munge.key" ] || mungekey -c -k "$D/munge/munge.key"
chown -R munge:munge "$D/munge"; chmod 600 "$D/munge/munge.key"
runuser -u munge -- munged --socket="$D/munge/munge.socket" --key-file="$D/munge/munge.key" \
  --pid-file="$D/munge/munged.pid" --log-file="$D/munge/munged.log" --seed-file="$D/munge/munged.seed" ||
  die "munged did not start: $(tail -5 "$D/munge/munged.log" 2>/dev/null)"

show_logs() {
  for f in "$D"/log/*.log "$D/munge/munged.log"; do
    [ -s "$f" ] && { echo "--- $f"; tail -15 "$f"; }
  done >&2
}

slurmctld -i || { show_logs; die "slurmctld did not start"; }
for _ in $(seq 100); do scontrol ping >/dev/null 2>&1 && break; sleep 0.1; done
scontrol ping >/dev/null 2>&1 || { show_logs; die "slurmctld does not answer"; }
# Each slurmd runs in its own UTS namespace with hostname = its node name, which /etc/hosts maps
# to the node's own loopback address: with NoInAddrAny, slurmd (and srun/slurmstepd under it) bind
# to gethostname()'s address, so the slurmd do not collide on SlurmdPort, and jobs see their node's
# name (`hostname`, `scontrol show hostnames` -> resolvable, like a rendezvous host on a cluster).
for spec in "${nodes[@]}"; do
  read -r name _ _ addr _ <<<"$spec"
  unshare --uts sh -c 'hostname "$1" && exec slurmd -N "$1"' slurmd-launch "$name" ||
    { show_logs; die "slurmd -N $name did not start"; }
done
for _ in $(seq 300); do all_idle && break; sleep 0.1; done
all_idle || { sinfo -N -o '%N %T %E' >&2; show_logs; die "nodes did not all come up within 30 s"; }
echo "cluster-up: started in $((SECONDS - t0)) s" >&2
report
