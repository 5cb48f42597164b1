#!/usr/bin/env bash
# Open MPI's remote-shell agent for namespace hosts (plm_rsh_agent): where mpirun would
# `ssh HOST COMMAND`, this runs COMMAND in HOST's network namespace with HOST as its
# hostname (a UTS namespace of its own), so Open MPI takes each namespace for a node.
set -euo pipefail
host=$1
shift
# Like ssh, the words form one command line for a shell (Open MPI quotes within them).
exec ip netns exec "$host" unshare --uts sh -c "hostname '$host' && exec $*"
