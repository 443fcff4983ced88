#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# rsh_agent.sh [-x ...] HOST COMMAND...: the remote shell of a pretend cluster
# made by netns_cluster.sh. Open MPI's rsh launcher (plm_rsh_agent) and
# MPICH's hydra (-launcher ssh -launcher-exec) call it as they would call ssh;
# it runs COMMAND (words joined by spaces and read by sh, as ssh does) on
# pretend host HOST: inside the network namespace $VENEER_CLUSTER_NETNS-HOST,
# with HOST as its hostname (a UTS namespace) and a /dev/shm of its own (a
# mount namespace with a fresh tmpfs), so shared memory cannot cross hosts.
prefix=${VENEER_CLUSTER_NETNS:-}
if [ -z "$prefix" ]; then
  echo "rsh_agent.sh: VENEER_CLUSTER_NETNS is not set (run through netns_cluster.sh)" >&2
  exit 255
fi
# ssh-style flags without values (hydra passes -x): ignored.
while [ $# -gt 0 ]; do
  case $1 in
    -[a-zA-Z]) shift ;;
    *) break ;;
  esac
done
if [ $# -lt 2 ]; then
  echo "usage: rsh_agent.sh HOST COMMAND..." >&2
  exit 255
fi
host=$1
shift
case $host in
  *[!a-zA-Z0-9._-]* | '') echo "rsh_agent.sh: bad host name '$host'" >&2; exit 255 ;;
esac
ns=$prefix-$host
if ! [ -e "/run/netns/$ns" ]; then
  echo "rsh_agent.sh: no pretend host '$host' (network namespace $ns is missing)" >&2
  exit 255
fi
# The inner sh sets the host up, then runs the command as a login shell would.
# Besides hostname and /dev/shm, the host gets a boot id of its own (the
# machine's, its last 12 digits replaced by a digest of the host's name): UCX
# (MPICH's transport) takes ranks with the same boot id for one machine and
# would join them by shared memory and cross-memory attach, past the network.
# SysV IPC is private to the host too.
# shellcheck disable=SC2016  # expanded by that inner sh
exec ip netns exec "$ns" unshare --uts --mount --ipc --propagation private sh -c '
  host=$1; shift
  hostname "$host" || exit 255
  mount -t tmpfs -o mode=1777 "shm-$host" /dev/shm || exit 255
  boot=/proc/sys/kernel/random/boot_id
  if [ -r $boot ]; then
    digest=$(printf %s "$host" | cksum | cut -d" " -f1)
    printf "%s%012x\n" "$(cut -c1-24 $boot)" "$digest" >/dev/shm/.boot_id &&
      mount --bind /dev/shm/.boot_id $boot ||
      echo "rsh_agent.sh: $host shares the machine boot id (UCX may use shared memory across hosts)" >&2
  fi
  exec sh -c "$*"' rsh_agent "$host" "$@"
