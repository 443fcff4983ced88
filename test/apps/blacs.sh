#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# blacs.sh FLAVOUR RUN_MPI LIBVENEER C|F [forced]
# ScaLAPACK's BLACS tester (Debian's scalapack-mpi-test, xCbtest or xFbtest)
# on 4 ranks with the packaged .dat inputs (scalapack-test-common), in a
# folder of its own, with and without Veneer preloaded. It sends vector,
# indexed and struct types, packs, broadcasts and combines (Allreduce, Reduce,
# Bcast on derived types and user-defined operations).
#   Every summary line must report 0 failed, every test section that began
#   must have its summary, the auxiliary tests must pass, and the summaries
#   with Veneer must equal those without it. The tester's last test calls
#   BLACS_ABORT: exit status 255 is accepted only once all of that holds.
#   The run ends in MPI_Abort, so there is no end-of-run report: Veneer's
#   presence is checked by its "loaded" line on every rank.
#   With "forced": Veneer's collectives are forced (one set, 2 pretend nodes)
#   and the debug log must show the forced algorithms chosen.
set -u
flavour=$1; run_mpi=$2; veneer=$3; lang=$4; forced=${5:-}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
case "$flavour" in
  openmpi) bin=/usr/lib/x86_64-linux-gnu/scalapack/openmpi-tests/x${lang}btest ;;
  *) bin=/usr/lib/x86_64-linux-gnu/scalapack/mpich-tests/x${lang}btest ;;
esac
dat=/usr/share/scalapack/BLACS
need scalapack-mpi-test "$bin"
need scalapack-test-common "$dat/bt.dat" "$dat/sdrv.dat" "$dat/bsbr.dat" "$dat/comb.dat"
np=4

run_blacs() {  # run_blacs NAME MODE
  mkdir -p "$tmp/$1"
  cp "$dat"/*.dat "$tmp/$1/"
  launch "$tmp/$1" "$2" $np "$bin"
  rc=$(cat "$tmp/$1/rc")
  out="$tmp/$1/out"
  # Section summaries ("INTEGER SDRV TESTS: 75 TESTS; 50 PASSED, 25 SKIPPED, 0 FAILED.").
  grep -E 'TESTS: +[0-9]+ TESTS;' "$out" >"$tmp/$1/summary"
  begun=$(grep -c 'TESTS: BEGIN\.' "$out")
  ended=$(grep -c 'AUXILIARY TESTS: BEGIN\.' "$out")
  summaries=$(wc -l <"$tmp/$1/summary")
  [ "$summaries" -ge 20 ] && [ "$summaries" -eq $((begun - ended)) ] ||
    { show "$tmp/$1"; fail "$1: $summaries section summaries for $begun sections begun (incomplete)"; }
  bad=$(grep -Evc ' 0 FAILED\.$' "$tmp/$1/summary")
  [ "$bad" -eq 0 ] || { grep -Ev ' 0 FAILED\.$' "$tmp/$1/summary"; fail "$1: $bad section(s) report failures"; }
  # Auxiliary tests: each RUNNING line has its PASSED line, up to the final BLACS_ABORT test.
  grep -q 'The final auxiliary test is for BLACS_ABORT' "$out" ||
    { show "$tmp/$1"; fail "$1: the auxiliary tests did not reach BLACS_ABORT"; }
  # The repeatable-sum test is SKIPPED when the unordered sum happened to be
  # repeatable in that run (it depends on which rank enters last: timing).
  running=$(grep -c '^ *RUNNING ' "$out"); passed=$(grep -c '^ *PASSED ' "$out")
  skipped=$(grep -c '^ *SKIPPED  *REPEATABLE SUM TEST' "$out")
  [ "$running" -ge 5 ] && [ "$running" -eq $((passed + skipped)) ] && ! grep -q '^ *FAILED' "$out" ||
    { show "$tmp/$1"; fail "$1: auxiliary tests: $passed passed, $skipped skipped of $running"; }
  grep -E '^ *(RUNNING|PASSED) ' "$out" | grep -v 'REPEATABLE SUM' >>"$tmp/$1/summary"
  [ "$rc" -eq 255 ] || { show "$tmp/$1"; fail "$1: exit status $rc (255 from BLACS_ABORT expected)"; }
  echo "  $1: $summaries section summaries, 0 failed; $passed auxiliary tests passed, $skipped skipped; exit 255 from BLACS_ABORT"
}

run_blacs plain plain
if [ -z "$forced" ]; then
  run_blacs veneer veneer
  expect_loaded "$tmp/veneer" $np
  name=veneer
else
  # One forced set on 2 pretend nodes; BLACS calls Allreduce, Reduce and Bcast.
  # VENEER_APPS_BLACS_SET="allreduce:A reduce:R bcast:B" tries another set by hand.
  set_=${VENEER_APPS_BLACS_SET:-allreduce:ring reduce:two_level bcast:scatter_allgather}
  for a in $set_; do
    coll=${a%%:*}; alg=${a#*:}
    export "VENEER_$(echo "$coll" | tr a-z A-Z)=$alg"
  done
  VENEER_LOG=debug VENEER_RANKS_PER_NODE=2 run_blacs forced veneer
  expect_loaded "$tmp/forced" $np
  for a in $set_; do
    coll=${a%%:*}; alg=${a#*:}
    # "veneer[0]: allreduce, 90 bytes, 4 ranks on 2 nodes (...), user op, oversubscribed: ring: forced by ..."
    k=$(grep -o "veneer\[0\]: $coll, [0-9]* bytes[^:]*: $alg: forced" "$tmp/forced/err" | wc -l)
    [ "$k" -gt 0 ] || { show "$tmp/forced"; fail "forced: rank 0 never chose $alg for $coll"; }
    echo "  forced: rank 0 logged $k $coll decisions for $alg (a decision is logged when made, not per call)"
  done
  name=forced
fi
cmp -s "$tmp/plain/summary" "$tmp/$name/summary" ||
  { diff "$tmp/plain/summary" "$tmp/$name/summary"; fail "$name: summaries differ from the run without Veneer"; }
echo "blacs x${lang}btest ${forced:-default}: passed (summaries identical with and without Veneer)"
