#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Rank placement measured on the namespace cluster: halo3d with --reorder
# (a distributed graph of the process grid made with reorder true, the domain
# decomposed by the new rank), launched without and with Veneer preloaded,
# alternating, ROUNDS times each; prints every run's median time per exchange
# and the ratios library / Veneer (above 1: Veneer faster).
#
#   test/cluster/placement_bench.sh BUILD_DIR [--rounds N] [--map-by node|slot]
#       [--hosts 2,2] [--mpi openmpi|mpich] [--timeout S] [-- HALO3D_ARGS...]
#
# Default halo3d arguments: --dims 4,1,1 --reorder --n 128 --iterations 30
# --method isend (a ring of 4 blocks whose faces are 128x128 doubles).
# --map-by node launches round-robin over the hosts (every ring neighbour on
# the other host until Veneer places the ranks); slot fills a host first.
# --timeout (default 120 s) ends a launch: rank 0 writes its results before
# MPI_Finalize, where MPICH over UCX's TCP transport hangs now and then on the
# cluster (test/cluster/README.md), so a run that hangs there still counts.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 1 ] || { sed -n '3,13s/^# \{0,1\}//p' "$0"; exit 2; }
build=$(cd "$1" && pwd); shift
rounds=3 map_by=node hosts=2,2 mpi=() limit=120
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --map-by) map_by=$2; shift 2 ;;
    --hosts) hosts=$2; shift 2 ;;
    --mpi) mpi=(--mpi "$2"); shift 2 ;;
    --timeout) limit=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "placement_bench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--dims 4,1,1 --reorder --n 128 --iterations 30 --method isend)
halo=$build/bench/veneer-halo3d
veneer=$build/interposer/libveneer.so
extra_preload=""
# MPICH: the yield helper keeps UCX from busy-polling on the shared cores (test/cluster/README.md).
[ "${mpi[1]:-}" = mpich ] && [ -f "$build/test/libveneer_test_ucx_yield.so" ] && extra_preload=$build/test/libveneer_test_ucx_yield.so

# One launch; prints "MEDIAN MEAN" microseconds per exchange of the first
# method (per exchange the slowest rank's time; the median over the
# exchanges, and the mean), or nothing if it failed.
json=$(mktemp /tmp/placement_bench.XXXXXX)
trap 'rm -f "$json"' EXIT
run_once() {  # run_once PRELOAD
  local preload=$1
  preload=${extra_preload}${extra_preload:+${preload:+:}}${preload}
  : >"$json"
  LD_PRELOAD=$preload "$here/netns_cluster.sh" --hosts "$hosts" --map-by "$map_by" --timeout "$limit" "${mpi[@]}" -- \
    "$halo" "${args[@]}" --json "$json" >/dev/null 2>&1
  python3 -c 'import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[-1])["results"][0]
print("%.1f %.1f" % (r["median_seconds"] * 1e6, r["seconds_per_exchange"] * 1e6))' "$json" 2>/dev/null
}

echo "halo3d ${args[*]} on hosts $hosts, --map-by $map_by, $rounds rounds (library first, then Veneer)"
echo "per run: the median over exchanges of the slowest rank's time (mean in brackets), microseconds"
ratios=() libs=() vens=() lib_means=() ven_means=()
for ((i = 1; i <= rounds; i++)); do
  read -r lib lib_mean <<<"$(run_once "")"
  read -r ven ven_mean <<<"$(run_once "$veneer")"
  if [ -z "${lib:-}" ] || [ -z "${ven:-}" ]; then echo "round $i: a run failed (library '${lib:-}', Veneer '${ven:-}')"; exit 1; fi
  ratio=$(awk -v a="$lib" -v b="$ven" 'BEGIN {printf "%.3f", a / b}')
  ratios+=("$ratio")
  libs+=("$lib")
  vens+=("$ven")
  lib_means+=("$lib_mean")
  ven_means+=("$ven_mean")
  echo "round $i: library $lib ($lib_mean), Veneer $ven ($ven_mean), library/Veneer $ratio"
done
median() { sort -n | awk '{r[NR] = $1} END {printf "%.3f", NR % 2 ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2}'; }
printf '%s\n' "${ratios[@]}" | sort -n | awk '{r[NR] = $1} END {printf "library/Veneer per round: min %s, max %s, ", r[1], r[NR]}'
echo "median $(printf '%s\n' "${ratios[@]}" | median)"
lib_median=$(printf '%s\n' "${libs[@]}" | median)
ven_median=$(printf '%s\n' "${vens[@]}" | median)
echo "median of the runs' medians: library $lib_median us, Veneer $ven_median us, ratio $(awk -v a="$lib_median" -v b="$ven_median" 'BEGIN {printf "%.3f", a / b}')"
lib_median=$(printf '%s\n' "${lib_means[@]}" | median)
ven_median=$(printf '%s\n' "${ven_means[@]}" | median)
echo "median of the runs' means: library $lib_median us, Veneer $ven_median us, ratio $(awk -v a="$lib_median" -v b="$ven_median" 'BEGIN {printf "%.3f", a / b}')"
