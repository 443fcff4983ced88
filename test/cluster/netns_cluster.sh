#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# netns_cluster.sh: a cluster of pretend hosts on this one machine, and an MPI
# job across it. See test/cluster/README.md.
#
#   netns_cluster.sh [--hosts 2,2] [--rate 1gbit] [--mpi openmpi|mpich] -- PROGRAM [ARGS...]
#   netns_cluster.sh [--hosts 2,1] --check
#
# Every host is a network namespace with its own hostname (nodeI) and its own
# /dev/shm, joined by a veth link to a bridge in a hub namespace, the links
# rate-limited with tc tbf. The launcher runs in the hub and reaches the hosts
# through test/cluster/rsh_agent.sh. Exit status: the program's, 77 when the
# cluster cannot be made here (not root, no ip/unshare, no namespaces), 2 on
# bad usage. Everything is torn down on exit, whatever happens.
set -u

me=netns_cluster.sh
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
agent=$here/rsh_agent.sh

usage() {
  cat <<EOF
usage: $me [options] -- PROGRAM [ARGS...]
       $me [options] --check
  --hosts LIST     ranks per pretend host, e.g. 2,2 or 2,1 (default 2,2)
  --rate RATE      link rate of every host, as tc writes it (1gbit, 500mbit), or none (default 1gbit)
  --burst BYTES    the links' token bucket: bytes that may leave at once, above the rate
                   (default: 2 ms of the rate, at least 64 KiB)
  --mpi FLAVOR     openmpi or mpich (default: what --launcher or mpirun says it is)
  --launcher PATH  mpirun / mpiexec to use (default mpirun, or mpiexec.mpich for mpich)
  --mpicc PATH     compiler for --check (default: the flavor's mpicc)
  --timeout S      seconds before the job is killed (default \$VENEER_TEST_TIMEOUT or 280)
  --map-by WHAT    slot (default: ranks fill a host, then the next) or node (round-robin over the hosts)
  --bind-to WHAT   Open MPI's --bind-to for the ranks (default none; MPICH: -bind-to); core:overload-allowed
                   pins them, so that how they share this machine's cores is the same from
                   one launch to the next (for calibrating and checking the model)
  --check          run a small program proving the hosts are hosts to MPI
  --verbose        print the set-up and the launch command
Exit status: the program's; 77 when the cluster cannot be made here; 2 on bad usage.
EOF
}

skip() {
  echo "$me: skipped: $*" >&2
  exit 77
}
bad_usage() {
  echo "$me: $*" >&2
  usage >&2
  exit 2
}
say() { [ "$verbose" = 1 ] && echo "$me: $*" >&2; return 0; }

hosts_spec=2,2
rate=1gbit
burst=
flavor=
launcher=
mpicc=
limit=${VENEER_TEST_TIMEOUT:-280}
bind=none
map_by=slot
check=0
verbose=0
while [ $# -gt 0 ]; do
  case $1 in
    --hosts) [ $# -ge 2 ] || bad_usage "missing value after $1"; hosts_spec=$2; shift 2 ;;
    --rate) [ $# -ge 2 ] || bad_usage "missing value after $1"; rate=$2; shift 2 ;;
    --burst) [ $# -ge 2 ] || bad_usage "missing value after $1"; burst=$2; shift 2 ;;
    --bind-to) [ $# -ge 2 ] || bad_usage "missing value after $1"; bind=$2; shift 2 ;;
    --map-by) [ $# -ge 2 ] || bad_usage "missing value after $1"; map_by=$2; shift 2 ;;
    --mpi) [ $# -ge 2 ] || bad_usage "missing value after $1"; flavor=$2; shift 2 ;;
    --launcher) [ $# -ge 2 ] || bad_usage "missing value after $1"; launcher=$2; shift 2 ;;
    --mpicc) [ $# -ge 2 ] || bad_usage "missing value after $1"; mpicc=$2; shift 2 ;;
    --timeout) [ $# -ge 2 ] || bad_usage "missing value after $1"; limit=$2; shift 2 ;;
    --check) check=1; shift ;;
    --verbose | -v) verbose=1; shift ;;
    --help | -h) usage; exit 0 ;;
    --) shift; break ;;
    *) bad_usage "unknown option '$1'" ;;
  esac
done
if [ "$check" = 1 ] && [ $# -gt 0 ]; then bad_usage "--check takes no program"; fi
if [ "$check" = 0 ] && [ $# -eq 0 ]; then bad_usage "no program given (or --check)"; fi
[[ $hosts_spec =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || bad_usage "--hosts wants a list like 2,1, not '$hosts_spec'"
[[ $map_by =~ ^(slot|node)$ ]] || bad_usage "--map-by wants slot or node, not '$map_by'"
[ -z "$burst" ] || [[ $burst =~ ^[1-9][0-9]*$ ]] || bad_usage "--burst wants bytes, not '$burst'"
[[ $limit =~ ^[1-9][0-9]*$ ]] || bad_usage "--timeout wants whole seconds, not '$limit'"
IFS=, read -r -a slots <<<"$hosts_spec"
[ "${#slots[@]}" -le 250 ] || bad_usage "at most 250 hosts"
np=0
for s in "${slots[@]}"; do np=$((np + s)); done

# The link rate in bit/s (for the token bucket's burst), or 0 for no limit.
rate_bits=0
case $rate in
  none | 0) ;;
  *)
    [[ $rate =~ ^([0-9]+)(k|m|g)?bit$ ]] || bad_usage "--rate wants e.g. 1gbit, 500mbit or none, not '$rate'"
    rate_bits=${BASH_REMATCH[1]}
    case ${BASH_REMATCH[2]} in
      k) rate_bits=$((rate_bits * 1000)) ;;
      m) rate_bits=$((rate_bits * 1000000)) ;;
      g) rate_bits=$((rate_bits * 1000000000)) ;;
    esac
    [ "$rate_bits" -gt 0 ] || bad_usage "--rate must be positive"
    ;;
esac

# ---- what this machine can do: refuse with 77 (skipped) where it cannot ----
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces, mounts)"
command -v ip >/dev/null 2>&1 || skip "no 'ip' command (iproute2)"
command -v unshare >/dev/null 2>&1 || skip "no 'unshare' command (util-linux)"
command -v timeout >/dev/null 2>&1 || skip "no 'timeout' command (coreutils)"
[ -r "$agent" ] || skip "the agent $agent is missing"
if [ "$rate_bits" -gt 0 ] && ! command -v tc >/dev/null 2>&1; then skip "no 'tc' command for --rate (use --rate none)"; fi

if [ -z "$flavor" ]; then
  version=$("${launcher:-mpirun}" --version 2>&1 || true)
  case $version in
    *"Open MPI"* | *OpenRTE*) flavor=openmpi ;;
    *HYDRA* | *MPICH*) flavor=mpich ;;
    *) skip "cannot tell which MPI '${launcher:-mpirun}' is (give --mpi)" ;;
  esac
fi
case $flavor in
  openmpi) : "${launcher:=mpirun}"; : "${mpicc:=mpicc}" ;;
  mpich) : "${launcher:=mpiexec.mpich}"; : "${mpicc:=mpicc.mpich}" ;;
  *) bad_usage "--mpi wants openmpi or mpich, not '$flavor'" ;;
esac
command -v "$launcher" >/dev/null 2>&1 || skip "no MPI launcher '$launcher'"
launcher=$(command -v "$launcher")
if [ "$check" = 1 ]; then command -v "$mpicc" >/dev/null 2>&1 || skip "no MPI compiler '$mpicc' for --check"; fi

# ---- names: unique per run (this shell's PID), so runs side by side never meet ----
prefix=vncl$$
hub=$prefix-hub
subnet=10.213.0  # inside this run's own namespaces only: runs cannot collide on it
run_dir=
mpi_pid=
made=()  # namespaces this run made, torn down in reverse

# Kills every process inside network namespace $1 (the launcher, daemons, ranks).
kill_inside() {
  local pids
  pids=$(ip netns pids "$1" 2>/dev/null) || return 0
  [ -n "$pids" ] || return 0
  # shellcheck disable=SC2086  # a list of PIDs
  kill -TERM $pids 2>/dev/null
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    pids=$(ip netns pids "$1" 2>/dev/null)
    [ -n "$pids" ] || return 0
    sleep 0.1
  done
  # shellcheck disable=SC2086
  kill -KILL $pids 2>/dev/null
  sleep 0.1
}

# shellcheck disable=SC2317  # called by the traps
teardown() {
  local rc=$?
  trap - EXIT INT TERM HUP
  if [ -n "$mpi_pid" ]; then
    # The launcher first, so that it stops its daemons and reaps them itself.
    kill -TERM "$mpi_pid" 2>/dev/null
    for _ in $(seq 30); do
      kill -0 "$mpi_pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$mpi_pid" 2>/dev/null
    wait "$mpi_pid" 2>/dev/null
  fi
  local i
  for ((i = ${#made[@]} - 1; i >= 0; i--)); do kill_inside "${made[i]}"; done
  for ((i = ${#made[@]} - 1; i >= 0; i--)); do ip netns delete "${made[i]}" 2>/dev/null; done
  [ -n "$run_dir" ] && rm -rf "$run_dir"
  say "torn down"
  exit "$rc"
}
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# Leftovers of earlier runs of this script that died without tearing down
# (their PID is gone): their namespaces, the processes in them, their files.
for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
  [[ $ns =~ ^vncl([0-9]+)- ]] || continue
  owner=${BASH_REMATCH[1]}
  [ "$owner" != $$ ] || continue
  kill -0 "$owner" 2>/dev/null && continue
  say "removing namespace $ns left by run $owner"
  kill_inside "$ns"
  ip netns delete "$ns" 2>/dev/null
done
for d in /tmp/veneer-cluster-[0-9]*-*; do
  [ -d "$d" ] || continue
  [[ $d =~ ^/tmp/veneer-cluster-([0-9]+)- ]] || continue
  kill -0 "${BASH_REMATCH[1]}" 2>/dev/null || rm -rf "$d"
done

# ---- the cluster ----
new_namespace() {
  ip netns add "$1" 2>/dev/null || return 1
  made+=("$1")
  ip -n "$1" link set lo up
  # IPv4 only: no duplicate-address probing, no link-local noise for the MPI transports.
  ip netns exec "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 >/dev/null 2>&1 || true
  ip netns exec "$1" sysctl -qw net.ipv6.conf.default.disable_ipv6=1 >/dev/null 2>&1 || true
  # No TCP autocorking: with a qdisc on the link it holds small writes back
  # until the previous packet leaves the queue (0.5 ms on a busy machine).
  ip netns exec "$1" sysctl -qw net.ipv4.tcp_autocorking=0 >/dev/null 2>&1 || true
}

# Token bucket on the egress of interface $2 in namespace $1: at most the link
# rate leaves it; the bucket holds about 2 ms of traffic (at least 64 KiB).
shape() {
  [ "$rate_bits" -gt 0 ] || return 0
  local bucket=$burst
  if [ -z "$bucket" ]; then
    bucket=$((rate_bits / 8 / 500))
    [ "$bucket" -ge 65536 ] || bucket=65536
  fi
  tc -n "$1" qdisc add dev "$2" root tbf rate "$rate" burst "$bucket" latency 50ms
}

run_dir=$(mktemp -d "/tmp/veneer-cluster-$$-XXXXXX") || skip "cannot make a directory in /tmp"
new_namespace "$hub" || skip "cannot make network namespaces (ip netns add failed)"
ip netns exec "$hub" unshare --uts --mount --propagation private sh -c \
  'hostname probe && mount -t tmpfs probe /dev/shm' >/dev/null 2>&1 ||
  skip "cannot give a namespace its own hostname and /dev/shm (unshare --uts --mount)"
ip -n "$hub" link add br0 type bridge 2>/dev/null || skip "cannot make a bridge"
ip -n "$hub" addr add "$subnet.254/24" dev br0
ip -n "$hub" link set br0 up

hostfile=$run_dir/hostfile
: >"$hostfile"
for i in "${!slots[@]}"; do
  host=node$i
  ns=$prefix-$host
  new_namespace "$ns" || { echo "$me: ip netns add $ns failed" >&2; exit 1; }
  ip link add eth0 netns "$ns" type veth peer name "p$i" netns "$hub" 2>/dev/null || skip "cannot make veth links"
  ip -n "$hub" link set "p$i" master br0 up
  ip -n "$ns" addr add "$subnet.$((i + 1))/24" dev eth0
  ip -n "$ns" link set eth0 up
  if ! shape "$ns" eth0 || ! shape "$hub" "p$i"; then
    echo "$me: tc tbf failed; links are not rate-limited" >&2
    rate_bits=0
  fi
  if [ "$flavor" = openmpi ]; then
    echo "$host slots=${slots[i]}" >>"$hostfile"
  else
    echo "$host:${slots[i]}" >>"$hostfile"
  fi
  say "host $host: namespace $ns, $subnet.$((i + 1)), ${slots[i]} rank(s), rate ${rate}"
done

if [ "$check" = 1 ]; then
  "$mpicc" -O1 -o "$run_dir/cluster_check" "$here/cluster_check.c" || { echo "$me: cannot build cluster_check.c" >&2; exit 1; }
  set -- "$run_dir/cluster_check" "$hosts_spec"
fi

# ---- the job ----
# The ranks get the caller's LD_PRELOAD (Veneer) and VENEER_* variables; the
# launcher, the agent and the daemons run without the preload.
preload=${LD_PRELOAD:-}
unset LD_PRELOAD
export VENEER_CLUSTER_NETNS=$prefix VENEER_CLUSTER_HOSTS=$hosts_spec
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
forward=()
for name in $(compgen -e | grep -E '^(VENEER_|GTEST_|UCX_|LD_LIBRARY_PATH$)'); do
  forward+=("$name")
done
if [ "$flavor" = openmpi ]; then
  # shellcheck disable=SC2054  # self,vader,tcp is one argument
  cmd=("$launcher" --hostfile "$hostfile" -np "$np" --oversubscribe --bind-to "$bind"
    --mca plm_rsh_agent "$agent" --mca plm_rsh_no_tree_spawn 1
    --mca pml ob1 --mca btl self,vader,tcp
    --mca btl_tcp_if_include "$subnet.0/24" --mca oob_tcp_if_include "$subnet.0/24" --map-by "$map_by")
  for name in "${forward[@]}"; do cmd+=(-x "$name"); done
  [ -n "$preload" ] && cmd+=(-x "LD_PRELOAD=$preload")
else
  cmd=("$launcher" -f "$hostfile" -n "$np" -launcher ssh -launcher-exec "$agent" -iface br0)
  [ "$bind" = none ] || cmd+=(-bind-to "${bind%%:*}")  # Hydra's name for it, without Open MPI's qualifier
  [ "$map_by" = node ] && cmd+=(-ppn 1)                # Hydra: one rank per host in turn, round-robin
  for name in "${forward[@]}"; do cmd+=(-genv "$name" "${!name}"); done
  [ -n "$preload" ] && cmd+=(-genv LD_PRELOAD "$preload")
fi
say "launch (in $hub): ${cmd[*]} $*"

# The launcher runs in the hub, under a hostname of its own; in the background,
# so that a signal to this script is handled at once (teardown kills it).
ip netns exec "$hub" unshare --uts sh -c 'hostname hub && exec "$@"' launch \
  timeout -k 5 "$limit" "${cmd[@]}" "$@" &
mpi_pid=$!
wait "$mpi_pid"
rc=$?
mpi_pid=
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then echo "$me: the job ran past ${limit}s and was killed" >&2; fi
exit "$rc"
