#!/usr/bin/env bash
# Runs an MPI job across the namespace hosts of hosts.sh (root), e.g.
#   scripts/cluster/hosts.sh create 2
#   scripts/cluster/launch.sh -np 4 build/trident train --tensor-model-parallel-size 2 ...
# Arguments go to mpirun after these settings:
# - the hostfile (slots per host) and ns_agent.sh as Open MPI's remote shell, so each host's
#   daemon and ranks run in its namespace under its hostname;
# - Open MPI's own traffic (oob) and MPI's (btl tcp) on the hosts' network only; shared
#   memory (vader) serves ranks on one host, TCP ranks on different hosts (Open MPI uses
#   shared memory only between ranks of one node). TRIDENT_BTL=tcp,self uses TCP everywhere;
# - ranks fill each host's slots in order (--map-by slot), so consecutive ranks, and with
#   them trident's tensor groups, share a host;
# - mpirun itself runs in the login namespace (hosts.sh), whose kernel gives up on a silent
#   TCP peer within seconds, and with TCP keepalives of a few seconds on the launcher's
#   connections: a host cut off is noticed and the job ends, instead of waiting out the
#   kernel's 15 minutes of retransmissions (or two hours of keepalive);
# - ranks waiting for a message yield the core (mpi_yield_when_idle): every namespace host
#   shares this machine's cores, and the kernel delivers a packet between them in a softirq
#   thread that a rank spinning in MPI starves until the next scheduler tick. Measured with
#   2 hosts on 2 cores: 8 B ping-pong 4.0 ms -> 20 us, 512 KiB 0.044 -> 2.5 GB/s. Real hosts
#   with their own NICs and cores do not need it;
# - no binding of ranks to cores (--bind-to none): each host's daemon binds its first rank
#   to "its" core 0, which on namespace hosts is the same core for every host (measured:
#   gpt2-small d = 2 across 2 hosts 7.75 -> 4.42 s per iteration, both ranks had shared
#   core 0). A --bind-to of your own conflicts with it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
[[ -f $here/hostfile ]] || { echo "launch.sh: no $here/hostfile: run hosts.sh create N first" >&2; exit 2; }
btl=${TRIDENT_BTL:-tcp,vader,self}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec ip netns exec trident-login mpirun --hostfile "$here/hostfile" --map-by slot \
  --mca plm_rsh_agent "$here/ns_agent.sh" \
  --mca oob_tcp_if_include 198.18.0.0/24 --mca btl_tcp_if_include 198.18.0.0/24 --mca btl "$btl" \
  --mca mpi_yield_when_idle 1 --bind-to none \
  --mca oob_tcp_keepalive_time 3 --mca oob_tcp_keepalive_intvl 2 --mca oob_tcp_keepalive_probes 3 \
  "$@"
