#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# preload_test.sh FLAVOUR RUN_MPI LIBVENEER LIBCOUNTING APP
# 1. The unmodified app prints the same thing with and without Veneer preloaded.
# 2. Veneer and a PMPI counting tool preloaded together, in either order, give
#    the same verified output and the tool still counts every send.
set -eu
flavour=$1; run_mpi=$2; veneer=$3; counting=$4; app=$5
np=4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# How to hand LD_PRELOAD to the ranks and not to the launcher.
# A sanitizer build needs its runtime first: $VENEER_TEST_PRELOAD_PREFIX.
pl() {
  v=$1
  if [ -n "${VENEER_TEST_PRELOAD_PREFIX:-}" ]; then v="$VENEER_TEST_PRELOAD_PREFIX:$v"; fi
  if [ "$flavour" = openmpi ]; then echo "-x LD_PRELOAD=$v"; else echo "-genv LD_PRELOAD $v"; fi
}
run() {  # run OUTFILE [PRELOAD]
  out=$1; shift
  if [ $# -gt 0 ]; then
    VENEER_TEST_LAUNCH_FLAGS="$(pl "$1")" VENEER_REPORT=1 VENEER_P2P_MIN_BYTES=0 "$run_mpi" $np "$app" >"$out" 2>"$out.err" || { cat "$out" "$out.err"; exit 1; }
  else
    "$run_mpi" $np "$app" >"$out" 2>"$out.err" || { cat "$out" "$out.err"; exit 1; }
  fi
}
run "$tmp/plain"
run "$tmp/veneer" "$veneer"
grep -q "verified" "$tmp/plain" || { echo "plain run not verified"; cat "$tmp/plain"; exit 1; }
cmp "$tmp/plain" "$tmp/veneer" || { echo "output differs with Veneer preloaded"; diff "$tmp/plain" "$tmp/veneer"; exit 1; }
grep -q "sends taken over" "$tmp/veneer.err" || { echo "no Veneer report: was it preloaded?"; cat "$tmp/veneer.err"; exit 1; }
taken=$(awk '/sends taken over/ {print $4}' "$tmp/veneer.err")
[ "$taken" -gt 0 ] || { echo "Veneer took over no sends"; cat "$tmp/veneer.err"; exit 1; }
for order in "$veneer:$counting" "$counting:$veneer"; do
  run "$tmp/both" "$order"
  grep "ring_app" "$tmp/both" > "$tmp/both.app"
  grep "ring_app" "$tmp/plain" > "$tmp/plain.app"
  cmp "$tmp/plain.app" "$tmp/both.app" || { echo "order $order: output differs"; cat "$tmp/both"; exit 1; }
  # 10 rounds: one send and one receive each, on every rank.
  n=$(grep -c "counting-tool: rank .* send=10 recv=10 barrier=10" "$tmp/both" || true)
  [ "$n" -eq $np ] || { echo "order $order: tool counts wrong"; cat "$tmp/both"; exit 1; }
done
echo "preload_test: identical output with and without Veneer; tool stacking works in both orders"
