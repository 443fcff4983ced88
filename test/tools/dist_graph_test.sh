#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# dist_graph_test.sh FLAVOUR RUN_MPI LIBVENEER APP [RUNS] [ROUNDS]
# Issue 11, hidden communicators: an unmodified program runs collectives with
# Veneer's default settings, then MPI_Dist_graph_create with reorder=1 (Open
# MPI 4.1: the treematch component, among its defaults), ROUNDS times per
# launch, RUNS launches, each under a timeout. Every launch must finish and
# verify its neighbours' data; a hang or a wrong value fails the test. Under
# Open MPI 4.1 this graph creation was seen to hang in ompi_comm_nextcid (7 of
# 20 runs) once the application's communicator sequence was shifted (one extra
# MPI_Comm_dup of MPI_COMM_WORLD did it without Veneer), which is why Veneer must make no
# communicator where the library serves every collective: the first launch
# also checks, through the report, that it made none.
# Extra settings for every launch (e.g. forced algorithms): $VENEER_TEST_DIST_GRAPH_ENV
# ("NAME=VALUE ..."), for measuring by hand; CI runs the defaults.
set -eu
flavour=$1; run_mpi=$2; veneer=$3; app=$4
runs=${5:-50}; rounds=${6:-4}
# The 50 launches are for Open MPI with its default components; the CI's other
# passes over the same build (UCX pml through VENEER_TEST_LAUNCH_FLAGS, the
# sanitizer build) check the data and the report with 10.
if [ -n "${VENEER_TEST_LAUNCH_FLAGS:-}${VENEER_TEST_PRELOAD_PREFIX:-}" ] && [ "$runs" -gt 10 ]; then runs=10; fi
np=4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
flags() {  # how to hand the environment to the ranks (not to the launcher)
  v=$veneer
  if [ -n "${VENEER_TEST_PRELOAD_PREFIX:-}" ]; then v="$VENEER_TEST_PRELOAD_PREFIX:$v"; fi
  if [ "$flavour" = openmpi ]; then
    f="-x LD_PRELOAD=$v -x VENEER_REPORT=1"
    for kv in ${VENEER_TEST_DIST_GRAPH_ENV:-}; do f="$f -x $kv"; done
  else
    f="-genv LD_PRELOAD $v -genv VENEER_REPORT 1"
    for kv in ${VENEER_TEST_DIST_GRAPH_ENV:-}; do f="$f -genv ${kv%%=*} ${kv#*=}"; done
  fi
  echo "$f"
}
launch_flags="${VENEER_TEST_LAUNCH_FLAGS:-} $(flags)"  # keep the harness's own (e.g. the UCX pml)
hung=0; wrong=0
i=1
while [ "$i" -le "$runs" ]; do
  rc=0
  VENEER_TEST_TIMEOUT=${VENEER_TEST_DIST_GRAPH_TIMEOUT:-30} VENEER_TEST_LAUNCH_FLAGS="$launch_flags" \
    "$run_mpi" $np "$app" "$rounds" >"$tmp/out" 2>"$tmp/err" || rc=$?
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    hung=$((hung + 1)); echo "run $i: hung (timeout)"; tail -5 "$tmp/err"
  elif [ "$rc" -ne 0 ] || ! grep -q "dist_graph_app: verified $rounds rounds" "$tmp/out"; then
    wrong=$((wrong + 1)); echo "run $i: failed (exit $rc)"; cat "$tmp/out"; tail -20 "$tmp/err"
  elif [ "$i" -eq 1 ]; then
    grep -q "collectives passed through" "$tmp/err" || { echo "no Veneer report: was it preloaded?"; cat "$tmp/err"; exit 1; }
    # Algorithms other than the library's in the report's per-algorithm lines?
    own=$(awk '/^collectives \(calls per algorithm\)/ {on = 1; next}
               on && /^  [a-z_]+:/ {for (i = 2; i <= NF; i += 2) if ($i != "library" && $i != "library,") n++}
               END {print n + 0}' "$tmp/err")
    made=$(awk '/communicators made/ {print $NF}' "$tmp/err")
    if [ "$own" -eq 0 ] && [ -n "$made" ] && [ "$made" != 0 ]; then
      echo "Veneer made $made communicators with the library serving every collective"; cat "$tmp/err"; exit 1
    fi
    echo "run 1: Veneer's own algorithms in $own report entries, communicators made on rank 0: $made"
  fi
  i=$((i + 1))
done
echo "dist_graph_test: $runs launches x $rounds graphs on $np ranks: $hung hung, $wrong failed"
[ "$hung" -eq 0 ] && [ "$wrong" -eq 0 ]
