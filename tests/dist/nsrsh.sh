#!/bin/sh
# Open MPI's remote-launch agent for two simulated hosts on one machine: called as
# `nsrsh.sh HOST COMMAND...` in place of ssh, it runs COMMAND inside the network namespace of
# HOST. SPMD_NSRSH_HOSTS maps hosts to namespaces: "10.213.77.1=ns_a 10.213.77.2=ns_b".
# COMMAND is Open MPI's orted command line, run by sh as ssh would run it.
set -eu
host=$1
shift
for pair in $SPMD_NSRSH_HOSTS; do
  if [ "${pair%%=*}" = "$host" ]; then
    exec ip netns exec "${pair#*=}" sh -c "$*"
  fi
done
echo "nsrsh.sh: no namespace for host '$host' in SPMD_NSRSH_HOSTS" >&2
exit 255
