#!/usr/bin/env bash
# Start a throwaway local Slurm (Debian 12: slurm-wlm 22.05 + munge) with fake GPUs, for the tests
# that submit gpuplan's sbatch scripts. Run as root. Everything lives under $GPUPLAN_SLURM_DIR
# (default /tmp/gpuplan-slurm); stop it with cluster-down.sh.
#
# GPU types ($GPUPLAN_SLURM_GPUS, "type:gpus_per_node:live_nodes" each), default
#   h100:8:4 a100:8:4 h200:8:1 b200:8:1 v100:8:1 l40s:8:1 l4:4:1
# Each type has $GPUPLAN_SLURM_NODES nodes (default 128), named TYPE-001, TYPE-002, ...; the first
# live_nodes of them run a slurmd on this machine, so jobs on up to that many nodes really run
# (srun across nodes included). The others are State=FUTURE: never started, not shown by sinfo,
# but counted when Slurm checks a submission, so a 64-node job is accepted (and stays pending,
# Reason ReqNodeNotAvail) while one asking for more nodes, GPUs, CPUs or memory than a node or the
# cluster has is rejected (EnforcePartLimits=ALL, as many sites set).
# Every node claims 128 CPUs and 2,000,000 MB of memory (SlurmdParameters=config_overrides),
# whatever this machine has; jobs get 8000 MB per CPU unless they ask (--mem...).
# Partitions: gpu (the default, all nodes) and one per GPU type, named after it (h100, a100, ...),
# with MaxTime=$GPUPLAN_SLURM_MAX_TIME (default INFINITE).
# The fake GPUs are links to /dev/null: a job sees CUDA_VISIBLE_DEVICES, but no device.
#
# Several slurmd on one host without a --enable-multiple-slurmd build: each live node has its own
# slurmd port (NodeName ... Port=), all slurmd listen on every address, and slurmctld reaches
# each through its NodeAddr 127.0.10.N. Live node names are added to /etc/hosts (127.0.10.N;
# removed by cluster-down.sh) and, where `unshare --uts` is allowed, each slurmd runs with its
# node's hostname, so a job's `hostname` and `scontrol show hostnames $SLURM_JOB_NODELIST` look
# like a real cluster's.
#
# Idempotent: when this same cluster is already up it only reports; otherwise it (re)starts it
# from a clean state (no jobs). Ends by printing `export SLURM_CONF=...`.
#
# Accounting stage (off by default; the cluster above is unchanged without it), for fair-share,
# GPU billing and budgets. With GPUPLAN_SLURM_ACCOUNTING=1 it also installs (when missing)
# slurmdbd and mariadb-server, and runs under $GPUPLAN_SLURM_DIR a private MariaDB (datadir,
# socket and pid file in $D/mysql, TCP on 127.0.0.1:$GPUPLAN_SLURM_DB_PORT, default
# GPUPLAN_SLURM_PORT + 301; never the system's service or /var/lib/mysql) and a slurmdbd (port
# $GPUPLAN_SLURM_DBD_PORT, default GPUPLAN_SLURM_PORT + 300: above the slurmd ports, which are
# at most GPUPLAN_SLURM_PORT + 250). Each (re)start begins with an empty slurm_acct_db with only
# the cluster "gpuplan" in it, and its built-in account `root` holding user root (the default
# account of root's jobs): tests add their own accounts, users and limits with sacctmgr.
# slurm.conf then has AccountingStorageType=accounting_storage/slurmdbd,
# AccountingStorageEnforce=associations,limits,qos,safe (a job needs an association: an
# account that its user is in; with `safe` a job under a GrpTRESMins budget starts only if its
# whole --time fits in what is left, so give such jobs --time or set GPUPLAN_SLURM_MAX_TIME),
# AccountingStorageTRES=gres/gpu plus gres/gpu:TYPE for each type (Slurm counts gres/gpu:TYPE
# only for jobs that name the type; gres/gpu counts any), priority/multifactor with
# fair-share (Fair Tree) and PriorityDecayHalfLife=0 with PriorityUsageResetPeriod=MONTHLY:
# usage does not decay and is reset at each month's start, so GrpTRESMins works as a monthly
# budget. Usage of a job is charged to its association every PriorityCalcPeriod (1 minute) and
# when slurmctld starts. A job held by a used-up budget pends with Reason
# AssocGrpBillingMinutes (GrpTRESMins=billing=N) or AssocGrpGRESMinutes (gres/gpu=N).
#   GPUPLAN_SLURM_BILLING  TRESBillingWeights per partition, "partition:weights ...", e.g.
#       "a100:CPU=0,GRES/gpu:a100=3.2 rtx3090:CPU=0,GRES/gpu:rtx3090=1.4"; partitions are `gpu`
#       and the GPU types. Without weights a partition bills a job its CPU count. Slurm
#       truncates a job's billing to an integer (3 GPUs at 1.4 bill 4).
#
# GPUPLAN_SLURM_EXTRA_CONF (with or without accounting): a file whose lines are appended to
# slurm.conf after the generated ones. A setting given again there wins (slurmctld logs
# "specified more than once, latest value used"). Its NodeName lines add nodes that get no
# slurmd, no gres.conf line and no /etc/hosts line: State=FUTURE ones (counted when Slurm checks
# a submission, never run); its PartitionName lines add partitions over any nodes, e.g.
# "PartitionName=lab Nodes=a100-[001-002],rtx3090-001 TRESBillingWeights=CPU=0,GRES/gpu=1".
# A node or partition name that the script generates cannot be given again: slurmctld then
# fails to start ("duplicate entry for partition gpu").
set -euo pipefail

D=${GPUPLAN_SLURM_DIR:-/tmp/gpuplan-slurm}
GPUS=${GPUPLAN_SLURM_GPUS:-h100:8:4 a100:8:4 h200:8:1 b200:8:1 v100:8:1 l40s:8:1 l4:4:1}
NODES=${GPUPLAN_SLURM_NODES:-128}
MAX_TIME=${GPUPLAN_SLURM_MAX_TIME:-INFINITE}   # partitions' MaxTime (sites often cap it at 1-7 days)
CTLD_PORT=${GPUPLAN_SLURM_PORT:-16817}   # slurmctld; slurmd use the next ports. Not Slurm's 6817+,
                                         # so a system Slurm on this host is left alone
ACCOUNTING=${GPUPLAN_SLURM_ACCOUNTING:-0}   # 1: slurmdbd + MariaDB, fair-share, billing (above)
BILLING=${GPUPLAN_SLURM_BILLING:-}
EXTRA_CONF=${GPUPLAN_SLURM_EXTRA_CONF:-}
HERE=$(cd "$(dirname "$0")" && pwd)
export SLURM_CONF="$D/slurm.conf" PATH="$PATH:/usr/sbin:/sbin"

die() { echo "cluster-up: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root (it starts munged, slurmctld and slurmd)"
# the directory is wiped in parts on each start: only ever one that is empty or already ours
[[ "$D" == /?* ]] || die "GPUPLAN_SLURM_DIR must be an absolute path, not '$D'"
if [ -d "$D" ] && [ -n "$(ls -A "$D")" ] && [ ! -e "$D/.gpuplan-slurm" ] &&
   ! grep -qs 'tests/slurm/cluster-up.sh' "$D/slurm.conf"; then
  die "$D is not empty and was not made by cluster-up.sh (no .gpuplan-slurm in it): set GPUPLAN_SLURM_DIR"
fi
[[ "$NODES" =~ ^[1-9][0-9]{0,2}$ ]] || die "GPUPLAN_SLURM_NODES must be 1..999, not '$NODES'"
for g in $GPUS; do
  [[ "$g" =~ ^[a-z0-9]+:[1-9][0-9]?:[0-9]+$ ]] && [ "${g##*:}" -le "$NODES" ] ||
    die "GPUPLAN_SLURM_GPUS: '$g' is not type:gpus_per_node:live_nodes (live_nodes <= $NODES)"
done
[[ "$CTLD_PORT" =~ ^[0-9]+$ ]] && [ "$CTLD_PORT" -ge 1024 ] && [ "$CTLD_PORT" -le 65000 ] ||
  die "GPUPLAN_SLURM_PORT must be 1024..65000, not '$CTLD_PORT'"
[[ "$ACCOUNTING" =~ ^[01]$ ]] || die "GPUPLAN_SLURM_ACCOUNTING must be 0 or 1, not '$ACCOUNTING'"
if [ -n "$EXTRA_CONF" ]; then
  [ -f "$EXTRA_CONF" ] && [ -r "$EXTRA_CONF" ] || die "GPUPLAN_SLURM_EXTRA_CONF: no file '$EXTRA_CONF'"
fi
if [ "$ACCOUNTING" = 1 ]; then
  DBD_PORT=${GPUPLAN_SLURM_DBD_PORT:-$((CTLD_PORT + 300))}
  DB_PORT=${GPUPLAN_SLURM_DB_PORT:-$((CTLD_PORT + 301))}
  for p in "$DBD_PORT" "$DB_PORT"; do
    [[ "$p" =~ ^[0-9]+$ ]] && [ "$p" -ge 1024 ] && [ "$p" -le 65535 ] && [ "$DBD_PORT" != "$DB_PORT" ] ||
      die "GPUPLAN_SLURM_DBD_PORT and GPUPLAN_SLURM_DB_PORT must be two ports 1024..65535, not '$p'"
  done
  for b in $BILLING; do
    [[ "$b" =~ ^[a-z0-9]+:[A-Za-z0-9/:_-]+=-?[0-9.]+[KMGTP]?(,[A-Za-z0-9/:_-]+=-?[0-9.]+[KMGTP]?)*$ ]] ||
      die "GPUPLAN_SLURM_BILLING: '$b' is not partition:TRES=weight,TRES=weight..."
  done
elif [ -n "$BILLING" ]; then
  die "GPUPLAN_SLURM_BILLING needs GPUPLAN_SLURM_ACCOUNTING=1"
fi

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
if [ "$ACCOUNTING" = 1 ]; then
  missing=0
  for c in slurmdbd sacctmgr mariadbd mariadb-install-db mariadb setsid; do
    command -v "$c" >/dev/null || missing=1
  done
fi
if [ "$ACCOUNTING" = 1 ] && [ "$missing" = 1 ]; then
  command -v apt-get >/dev/null || die "slurmdbd or MariaDB is not installed and there is no apt-get to install it"
  echo "cluster-up: installing slurmdbd and mariadb-server" >&2
  t0=$SECONDS
  export DEBIAN_FRONTEND=noninteractive
  pkgs=(slurmdbd mariadb-server)   # mariadb-server pulls the mariadb client
  log=$(mktemp)
  # mariadb-server's postinst starts the system's MariaDB (/var/lib/mysql, port 3306) unless
  # policy-rc.d forbids it: forbid it during the install where no policy-rc.d says otherwise
  policy=
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    policy=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\n# cluster-up.sh: no service starts while it installs packages\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    trap 'rm -f "$policy"' EXIT
  fi
  apt_install() { apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >>"$log" 2>&1; }
  apt_install || { apt-get update -qq >>"$log" 2>&1 && apt_install; } ||
    { tail -20 "$log" >&2; die "apt-get install ${pkgs[*]} failed"; }
  if [ -n "$policy" ]; then rm -f "$policy"; trap - EXIT; fi
  rm -f "$log"
  echo "cluster-up: installed in $((SECONDS - t0)) s" >&2
fi

# --- the cluster's shape --------------------------------------------------------------------------
nodes=()        # live nodes: "name type gpus address port"
future=()       # the other nodes of each type: "hostlist type gpus"
partitions=()   # "type hostlist"
n=0
for g in $GPUS; do
  IFS=: read -r type gpus live <<<"$g"
  for i in $(seq 1 "$live"); do
    n=$((n + 1))
    nodes+=("$(printf '%s-%03d' "$type" "$i") $type $gpus 127.0.10.$n $((CTLD_PORT + n))")
  done
  if [ "$live" -lt "$NODES" ]; then
    future+=("$(printf '%s-[%03d-%03d]' "$type" $((live + 1)) "$NODES") $type $gpus")
  fi
  partitions+=("$type $(printf '%s-[001-%03d]' "$type" "$NODES")")
done
[ "$n" -ge 1 ] || die "GPUPLAN_SLURM_GPUS has no live node"
[ "$n" -le 250 ] || die "more than 250 live nodes"
declare -A weights=()   # partition -> TRESBillingWeights
for b in $BILLING; do
  part=${b%%:*}
  [ "$part" = gpu ] || [[ " $GPUS" == *" $part:"* ]] ||
    die "GPUPLAN_SLURM_BILLING: no partition '$part' (there are gpu and the GPU types)"
  weights[$part]=${b#*:}
done
billing() {  # billing PARTITION: its TRESBillingWeights setting, if any
  if [ -n "${weights[$1]:-}" ]; then echo " TRESBillingWeights=${weights[$1]}"; fi
}

mkdir -p "$D"
touch "$D/.gpuplan-slurm"
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
AccountingStorageType=accounting_storage/$([ "$ACCOUNTING" = 1 ] && echo slurmdbd || echo none)
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
  if [ "$ACCOUNTING" = 1 ]; then
    tres=gres/gpu
    for g in $GPUS; do tres+=",gres/gpu:${g%%:*}"; done
    cat <<EOF
# accounting stage (GPUPLAN_SLURM_ACCOUNTING=1)
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
AccountingStoragePass=$D/munge/munge.socket
AccountingStorageTRES=$tres
AccountingStorageEnforce=associations,limits,qos,safe
PriorityType=priority/multifactor
PriorityWeightFairshare=10000
PriorityWeightAge=1000
PriorityWeightQOS=1000
PriorityMaxAge=7-0
PriorityDecayHalfLife=0
PriorityUsageResetPeriod=MONTHLY
PriorityCalcPeriod=1
EOF
  fi
  for spec in "${nodes[@]}"; do
    read -r name type gpus addr port <<<"$spec"
    echo "NodeName=$name NodeAddr=$addr Port=$port CPUs=128 RealMemory=2000000" \
         "Gres=gpu:$type:$gpus Feature=$type State=UNKNOWN"
  done
  for spec in "${future[@]}"; do
    read -r names type gpus <<<"$spec"
    echo "NodeName=$names CPUs=128 RealMemory=2000000 Gres=gpu:$type:$gpus Feature=$type State=FUTURE"
  done
  echo "PartitionName=gpu Nodes=ALL Default=YES MaxTime=$MAX_TIME State=UP$(billing gpu)"
  for spec in "${partitions[@]}"; do
    read -r type names <<<"$spec"
    echo "PartitionName=$type Nodes=$names MaxTime=$MAX_TIME State=UP$(billing "$type")"
  done
  if [ -n "$EXTRA_CONF" ]; then
    echo "# from GPUPLAN_SLURM_EXTRA_CONF=$EXTRA_CONF"
    cat "$EXTRA_CONF"
  fi
} >"$conf_new"

gres_new="$D/gres.conf.new"   # slurmd reads gres.conf from SLURM_CONF's directory
for spec in "${nodes[@]}" "${future[@]}"; do
  read -r name type gpus _ <<<"$spec"
  # gres/gpu silently drops a GPU without File=, so each fake GPU gets a device file
  echo "NodeName=$name Name=gpu Type=$type File=$D/dev/nvidia[0-$((gpus - 1))]"
done >"$gres_new"

if [ "$ACCOUNTING" = 1 ]; then
  # the database password, made once per directory (only slurmdbd and root read it)
  if [ ! -s "$D/slurmdbd.pass" ]; then
    (umask 077; od -An -tx1 -N16 /dev/urandom | tr -d ' \n' >"$D/slurmdbd.pass")
  fi
  dbd_new="$D/slurmdbd.conf.new"   # slurmdbd reads slurmdbd.conf from SLURM_CONF's directory
  (umask 077; cat >"$dbd_new" <<EOF
# Written by gpuplan's tests/slurm/cluster-up.sh on each start; edits are overwritten.
AuthType=auth/munge
AuthInfo=socket=$D/munge/munge.socket
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageLoc=slurm_acct_db
StorageUser=slurm
StoragePass=$(cat "$D/slurmdbd.pass")
LogFile=$D/log/slurmdbd.log
PidFile=$D/run/slurmdbd.pid
EOF
  )
fi

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
db() {  # db ARGS...: the private MariaDB's client, as its root (unix socket authentication)
  mariadb --no-defaults --socket="$D/mysql/mysqld.sock" --user=root "$@"
}
accounting_up() {  # slurmdbd and its database answer, and the cluster is registered
  [ "$ACCOUNTING" = 0 ] && return 0
  alive "$D/mysql/mariadbd.pid" mariadbd && alive "$D/run/slurmdbd.pid" slurmdbd &&
    [ -n "$(sacctmgr -n -P show cluster format=cluster 2>/dev/null)" ]
}
report() {
  sinfo -o '%P %D %N %T %G'
  if [ "$ACCOUNTING" = 1 ]; then
    echo "accounting: slurmdbd on 127.0.0.1:$DBD_PORT, MariaDB on 127.0.0.1:$DB_PORT ($D/mysql)"
  fi
  echo "SLURM_CONF is $SLURM_CONF (logs under $D/log)"
  echo "export SLURM_CONF=$SLURM_CONF"
}

# --- already up, with this configuration? ---------------------------------------------------------
if cmp -s "$conf_new" "$D/slurm.conf" && cmp -s "$gres_new" "$D/gres.conf" &&
   { [ "$ACCOUNTING" = 0 ] || cmp -s "$dbd_new" "$D/slurmdbd.conf"; } &&
   [ "$(grep -F -- "$hosts_mark" /etc/hosts)" = "$hosts_want" ] &&
   alive "$D/munge/munged.pid" munged && alive "$D/run/slurmctld.pid" slurmctld; then
  up=1
  for spec in "${nodes[@]}"; do
    read -r name _ <<<"$spec"; alive "$D/run/slurmd-$name.pid" slurmd || up=0
  done
  if [ "$up" = 1 ] && scontrol ping >/dev/null 2>&1 && nodes_up && accounting_up; then
    rm -f "$conf_new" "$gres_new" "${dbd_new:-}"
    echo "cluster-up: already running" >&2
    report
    exit 0
  fi
fi

# --- (re)start from a clean state -----------------------------------------------------------------
bash "$HERE/cluster-down.sh" >/dev/null 2>&1 || true   # whatever of it still runs (about 5 s)
t0=$SECONDS
rm -rf "$D/state" "$D/spool" "$D/run" "$D/log"
mkdir -p "$D"/{state,spool,log,run,munge,dev}
mv "$conf_new" "$D/slurm.conf"
mv "$gres_new" "$D/gres.conf"
if [ "$ACCOUNTING" = 1 ]; then mv "$dbd_new" "$D/slurmdbd.conf"; fi
for spec in "${nodes[@]}"; do read -r name _ <<<"$spec"; mkdir -p "$D/spool/$name"; done
for i in $(seq 0 99); do ln -sfn /dev/null "$D/dev/nvidia$i"; done

# Node names resolve to their own addresses. /etc/hosts is rewritten in place, not renamed over:
# in a container it is often a bind mount.
hosts_new=$(mktemp)
{ grep -vF -- "$hosts_mark" /etc/hosts || true; echo "$hosts_want"; } >"$hosts_new"
cat "$hosts_new" >/etc/hosts || die "cannot write /etc/hosts"
rm -f "$hosts_new"

show_logs() {
  for f in "$D"/log/*.log "$D/munge/munged.log" "$D/mysql/mariadb.log"; do
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

if [ "$ACCOUNTING" = 1 ]; then
  # A private MariaDB: its own datadir, socket, pid file and port, run as user mysql, no
  # /etc/mysql settings (--no-defaults). The datadir is kept across starts (mariadb-install-db
  # takes a few seconds); the Slurm database in it is made anew on each start.
  install -d -o mysql -g mysql -m 755 "$D/mysql"
  if [ ! -d "$D/mysql/data/mysql" ]; then
    rm -rf "$D/mysql/data"
    mariadb-install-db --no-defaults --user=mysql --datadir="$D/mysql/data" --skip-test-db \
      --auth-root-authentication-method=socket >"$D/log/mariadb-install-db.log" 2>&1 ||
      { tail -20 "$D/log/mariadb-install-db.log" >&2; die "mariadb-install-db failed"; }
  fi
  rm -f "$D/mysql/mariadb.log"
  # not a daemon itself: detached, in its own session, so that it outlives this script
  setsid mariadbd --no-defaults --user=mysql --datadir="$D/mysql/data" \
    --socket="$D/mysql/mysqld.sock" --pid-file="$D/mysql/mariadbd.pid" \
    --log-error="$D/mysql/mariadb.log" --port="$DB_PORT" --bind-address=127.0.0.1 \
    --skip-name-resolve --innodb-buffer-pool-size=512M --innodb-log-file-size=64M \
    --innodb-lock-wait-timeout=900 --innodb-flush-log-at-trx-commit=2 </dev/null >/dev/null 2>&1 &
  for _ in $(seq 300); do db -e 'SELECT 1' >/dev/null 2>&1 && break; sleep 0.1; done
  db -e 'SELECT 1' >/dev/null 2>&1 || { show_logs; die "MariaDB did not start"; }
  db <<EOF || { show_logs; die "cannot create the Slurm database"; }
DROP DATABASE IF EXISTS slurm_acct_db;
CREATE DATABASE slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1';
ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$(cat "$D/slurmdbd.pass")';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
EOF
  slurmdbd || { show_logs; die "slurmdbd did not start"; }
  for _ in $(seq 300); do sacctmgr -n show cluster >/dev/null 2>&1 && break; sleep 0.1; done
  sacctmgr -n show cluster >/dev/null 2>&1 || { show_logs; die "slurmdbd does not answer"; }
  # before slurmctld starts, so that it registers at once (and adds its gres TRES to the
  # database: limits that name gres/gpu... can only be set after that)
  sacctmgr -i add cluster gpuplan >/dev/null || { show_logs; die "sacctmgr add cluster failed"; }
fi

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
if [ "$ACCOUNTING" = 1 ]; then  # slurmctld has put its TRES (gres/gpu...) in the database
  gpu_tres() { sacctmgr -n -P show tres format=type,name 2>/dev/null | grep -qx 'gres|gpu'; }
  for _ in $(seq 100); do gpu_tres && break; sleep 0.1; done
  gpu_tres || { show_logs; die "slurmctld did not register its TRES with slurmdbd"; }
fi
echo "cluster-up: started in $((SECONDS - t0)) s$([ "$uts" = 1 ] || echo ' (no per-node hostnames)')" >&2
report
