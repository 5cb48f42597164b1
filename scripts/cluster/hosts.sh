#!/usr/bin/env bash
# Network-namespace "hosts" on this machine, for multi-host runs without a cluster (root).
#   hosts.sh create N   # trident-h0 .. trident-h<N-1>, and scripts/cluster/hostfile
#   hosts.sh destroy    # removes every trident-h* namespace and the bridge
#   hosts.sh cut HOST | mend HOST   # takes a host's link down / up again (hang tests)
# Each host is a namespace with one veth link to a bridge in the root namespace; addresses
# come from 198.18.0.0/24 (RFC 2544's benchmarking range, never routed): host i has
# 198.18.0.<i+1>, the bridge 198.18.0.254. A login namespace, trident-login (198.18.0.253),
# runs mpirun (launch.sh). Processes started in a host get its name as their hostname
# (ns_agent.sh), so MPI sees separate nodes: ranks on different hosts talk over TCP, never
# shared memory. Every namespace gives up on a silent TCP peer after ~13 s (tcp_retries2 = 5,
# the kernel's default 15 takes ~15 minutes): Open MPI's launcher then notices a cut-off host
# instead of waiting for it with unacknowledged data. Create and destroy are idempotent:
# create first removes what an earlier run left; destroy ends the processes still in the
# namespaces (the runs started there).
set -euo pipefail

BRIDGE=trbr0
PREFIX=trident-h
SUBNET=198.18.0
HOSTFILE="$(cd "$(dirname "$0")" && pwd)/hostfile"

LOGIN=trident-login

namespaces() { ip netns list | awk '{print $1}' | grep -E "^($PREFIX[0-9]+|$LOGIN)$" || true; }

destroy() {
  for ns in $(namespaces); do
    ip netns pids "$ns" | xargs -r kill -9
    ip link del "tv${ns#"$PREFIX"}" 2> /dev/null || true
    ip netns del "$ns"
  done
  ip link del tvlogin 2> /dev/null || true
  ip link del "$BRIDGE" 2> /dev/null || true
  rm -f "$HOSTFILE"
}

add_namespace() {  # NAME LINK ADDRESS
  local ns=$1 link=$2 address=$3
  ip netns add "$ns"
  ip link add "$link" type veth peer name eth0 netns "$ns"
  ip link set "$link" master "$BRIDGE" up
  ip -n "$ns" addr add "$address/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  ip netns exec "$ns" sysctl -q -w net.ipv4.tcp_retries2=5
}

create() {
  local n=$1 slots=${2:-2}
  [[ $n =~ ^[0-9]+$ && $n -ge 1 && $n -le 200 ]] || { echo "hosts.sh: N must be 1..200, got '$n'" >&2; exit 2; }
  destroy
  ip link add "$BRIDGE" type bridge
  ip addr add "$SUBNET.254/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  : > "$HOSTFILE"
  add_namespace "$LOGIN" tvlogin "$SUBNET.253"
  for ((i = 0; i < n; i++)); do
    add_namespace "$PREFIX$i" "tv$i" "$SUBNET.$((i + 1))"
    echo "$PREFIX$i slots=$slots" >> "$HOSTFILE"
  done
  echo "hosts.sh: $n hosts (${PREFIX}0..${PREFIX}$((n - 1)), $SUBNET.1-$n), hostfile $HOSTFILE"
}

link() {  # link HOST up|down
  local host=$1 state=$2
  [[ $host =~ ^$PREFIX([0-9]+)$ ]] || { echo "hosts.sh: no host '$host' (want ${PREFIX}N)" >&2; exit 2; }
  ip link set "tv${BASH_REMATCH[1]}" "$state"
}

case "${1:-}" in
  create) create "${2:?usage: hosts.sh create N [slots per host]}" "${3:-2}" ;;
  destroy) destroy ;;
  cut) link "${2:?usage: hosts.sh cut HOST}" down ;;
  mend) link "${2:?usage: hosts.sh mend HOST}" up ;;
  *) echo "usage: hosts.sh create N [slots] | destroy | cut HOST | mend HOST" >&2; exit 2 ;;
esac
