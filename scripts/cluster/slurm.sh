#!/usr/bin/env bash
# A real Slurm on the namespace hosts (root): a munge daemon and slurmctld in the root
# namespace (the login node, at the bridge's 198.18.0.254) and one slurmd in each host's
# namespace, under the host's name, so jobs run on "nodes" that MPI tells apart.
#   slurm.sh start N   # creates N hosts (hosts.sh create N), configures and starts Slurm
#   slurm.sh env       # prints the export that points sbatch/srun/sinfo at this Slurm
#   slurm.sh stop      # stops what start started (by pid), removes its state and the hosts
# Everything lives in $TRIDENT_SLURM_DIR (default /var/tmp/trident-slurm): its own munge key
# and socket, slurm.conf, state and logs; nothing of a system Slurm or munge is touched. Each
# host has its own /tmp (as real nodes do; Slurm's PMIx plugin keeps per-step directories
# there under names that would collide), so jobs write results to a shared directory.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
DIR=${TRIDENT_SLURM_DIR:-/var/tmp/trident-slurm}
CONF=$DIR/slurm.conf

write_conf() {
  local n=$1 cpus=$2 addrs=()
  for ((i = 0; i < n; i++)); do addrs+=("198.18.0.$((i + 1))"); done
  cat > "$CONF" << CONF
# Written by scripts/cluster/slurm.sh: namespace hosts trident-h0..$((n - 1)).
ClusterName=trident
SlurmctldHost=$(hostname)(198.18.0.254)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge.socket
StateSaveLocation=$DIR/ctld
SlurmdSpoolDir=$DIR/slurmd-%n
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd-%n.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd-%n.log
# No cgroups in a container: processes are tracked by their parent, not confined.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=pmix
ReturnToService=2
# Hosts claim the CPUs given to start (its slots), not this machine's: several share it.
SlurmdParameters=config_overrides
SlurmdTimeout=30
NodeName=trident-h[0-$((n - 1))] NodeAddr=$(IFS=,; echo "${addrs[*]}") CPUs=$cpus State=UNKNOWN
PartitionName=hosts Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
CONF
}

start_munge() {
  [[ -f $DIR/munge.key ]] || { dd if=/dev/urandom of="$DIR/munge.key" bs=1024 count=1 status=none; chmod 600 "$DIR/munge.key"; }
  munged --force --key-file "$DIR/munge.key" --socket "$DIR/munge.socket" \
    --pid-file "$DIR/munged.pid" --log-file "$DIR/munged.log" --seed-file "$DIR/munged.seed"
}

# In the host's network namespace, with its hostname and its own /tmp. nsenter, not `ip netns
# exec`: that one mounts a fresh /sys, without the cgroup hierarchy slurmd insists on reading.
start_slurmd() {
  local host=$1
  mkdir -p "$DIR/slurmd-$host" "$DIR/tmp-$host"
  chmod 1777 "$DIR/tmp-$host"
  nsenter --net="/run/netns/$host" unshare --uts --mount --propagation private sh -c \
    "mount --bind $DIR/tmp-$host /tmp && hostname $host && exec slurmd -f $CONF -N $host"
}

wait_idle() {  # until every node is idle, or 30 s
  local n=$1
  for ((t = 0; t < 60; t++)); do
    [[ $(SLURM_CONF=$CONF sinfo -h -N -t idle -o %N 2> /dev/null | wc -l) -ge $n ]] && return 0
    sleep 0.5
  done
  echo "slurm.sh: nodes not idle after 30 s:" >&2
  SLURM_CONF=$CONF sinfo -N >&2 || true
  tail -n 5 "$DIR"/*.log >&2 || true
  return 1
}

start() {
  local n=$1 cpus=${2:-2}
  stop
  bash "$here/hosts.sh" create "$n" "$cpus"
  mkdir -p "$DIR/ctld"
  write_conf "$n" "$cpus"
  start_munge
  slurmctld -f "$CONF"
  for ((i = 0; i < n; i++)); do start_slurmd "trident-h$i"; done
  wait_idle "$n"
  echo "slurm.sh: Slurm up on $n hosts; $(print_env)"
}

stop_pid() {
  local file=$1
  [[ -f $file ]] || return 0
  local pid
  pid=$(cat "$file")
  kill "$pid" 2> /dev/null || true
  for ((t = 0; t < 20 && $(kill -0 "$pid" 2> /dev/null && echo 1 || echo 0); t++)); do sleep 0.25; done
  kill -9 "$pid" 2> /dev/null || true
}

stop() {
  if [[ -d $DIR ]]; then
    for f in "$DIR"/slurmd-*.pid "$DIR/slurmctld.pid" "$DIR/munged.pid"; do stop_pid "$f"; done
    rm -rf "$DIR"
  fi
  bash "$here/hosts.sh" destroy
}

print_env() { echo "export SLURM_CONF=$CONF"; }

mkdir -p "$DIR" 2> /dev/null || true
case "${1:-}" in
  start) start "${2:?usage: slurm.sh start N [cpus per host]}" "${3:-2}" ;;
  stop) stop ;;
  env) print_env ;;
  *) echo "usage: slurm.sh start N [cpus] | env | stop" >&2; exit 2 ;;
esac
