#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# hpcc.sh FLAVOUR RUN_MPI LIBVENEER MODE
# HPC Challenge (Debian's hpcc, built against Open MPI) on 4 ranks with
# hpccinf.txt (N=500 on a 2x2 grid: Debian ships no input file), with and
# without Veneer preloaded. Every run's hpccoutf.txt must show: the HPL
# residual check PASSED, every PTRANS residual check passed, RandomAccess
# (MPI, Star, Single, and their LCG forms) 0 errors, FFT errors at rounding
# level (at most 1e-12), STREAM validated, no node with an error, Success=1.
#   MODE library: with VENEER_COLLECTIVES=0 the checked values (HPL and
#                 PTRANS residuals, RandomAccess errors, MPI FFT error) equal
#                 those without Veneer; with default settings the checks pass.
#   MODE forced:  three runs on 2 pretend nodes (VENEER_RANKS_PER_NODE=2) that
#                 force each Alltoall algorithm (the FFT's transposes) with
#                 others for Allreduce, Bcast and Reduce; the checks pass and
#                 the report shows the forced algorithms serving calls.
set -u
flavour=$1; run_mpi=$2; veneer=$3; mode=$4
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
hpcc=/usr/bin/hpcc
need hpcc "$hpcc"
np=${VENEER_APPS_NP:-4}

run_hpcc() {  # run_hpcc NAME MODE: one run into $tmp/NAME, then its checks
  d=$tmp/$1
  mkdir -p "$d"
  cp "$here/hpccinf.txt" "$d/"
  launch "$d" "$2" $np "$hpcc"
  rc=$(cat "$d/rc")
  [ "$rc" -eq 0 ] || { show "$d"; fail "$1: hpcc exited $rc"; }
  [ -s "$d/hpccoutf.txt" ] || { show "$d"; fail "$1: no hpccoutf.txt"; }
  # Checks, and the values compared between runs, into $d/values.
  awk '
    function bad(msg) { print "  check failed: " msg; failed = 1 }
    /^Begin of / { section = $3 }
    /^End of / { section = "" }
    section == "HPL" && /\|\|Ax-b\|\|_oo.*=/ { hpl++; if ($NF != "PASSED") bad("HPL residual: " $0); print "HPL residual " $(NF - 2) }
    section == "PTRANS" && /^(WALL|CPU) / { ptrans++; if ($9 != "PASSED") bad("PTRANS: " $0) }
    /tests completed and failed residual checks/ { if ($1 + 0 != 0) bad(section ": " $0) }
    /^Found [0-9]+ errors in/ { ra++; if ($2 + 0 != 0) bad(section ": " $0); print section " errors " $2 }
    /^Node\(s\) with error/ { if ($NF + 0 != 0) bad(section ": " $0) }
    /^max\(\|x-x0\|\):/ { fft++; if ($2 + 0 > 1e-12) bad(section " error " $2); if (section == "MPIFFT") print "MPIFFT error " $2 }
    /^Solution Validates/ { stream++ }
    /^Success=/ { success = substr($0, 9) }
    /^PTRANS_residual=/ { print $0 }
    /^MPIRandomAccess(_LCG)?_Errors=/ { print $0; if (substr($0, index($0, "=") + 1) + 0 != 0) bad($0) }
    END {
      if (hpl < 1) bad("no HPL residual check")
      if (ptrans < 2) bad("no PTRANS residual checks")
      if (ra < 4) bad("RandomAccess: " ra " verifications of 4")
      if (fft < 2) bad("FFT: " fft " error lines of 2 or more")
      if (stream < 1) bad("STREAM did not validate")
      if (success != "1") bad("Success=" success)
      exit failed
    }' "$d/hpccoutf.txt" >"$d/values" || { cat "$d/values"; fail "$1: HPCC's own checks failed"; }
  echo "  $1: HPL PASSED, PTRANS passed, RandomAccess 0 errors, FFT error $(awk '/^MPIFFT error/ {print $3}' "$d/values")"
}

run_hpcc plain plain
case "$mode" in
  library)
    VENEER_COLLECTIVES=0 run_hpcc coll0 veneer
    expect_report "$tmp/coll0" $np
    cmp -s "$tmp/plain/values" "$tmp/coll0/values" ||
      { diff "$tmp/plain/values" "$tmp/coll0/values"; fail "coll0: checked values differ from the run without Veneer"; }
    echo "  coll0: checked values identical to the run without Veneer"
    run_hpcc default veneer
    expect_report "$tmp/default" $np
    grep -A6 "^collectives (calls" "$tmp/default/report"
    ;;
  forced)
    for set in "bruck ring binomial binomial" "pairwise rabenseifner two_level reduce_scatter_gather" \
               "node_aware two_level scatter_allgather two_level"; do
      # shellcheck disable=SC2086
      set -- $set
      echo "forced $1: alltoall=$1 allreduce=$2 bcast=$3 reduce=$4, 2 pretend nodes"
      VENEER_RANKS_PER_NODE=2 VENEER_ALLTOALL=$1 VENEER_ALLREDUCE=$2 VENEER_BCAST=$3 VENEER_REDUCE=$4 \
        run_hpcc "forced-$1" veneer
      expect_report "$tmp/forced-$1" $np
      expect_forced "$tmp/forced-$1" alltoall "$1"
      expect_forced "$tmp/forced-$1" allreduce "$2"
      expect_forced "$tmp/forced-$1" bcast "$3"
      expect_forced "$tmp/forced-$1" reduce "$4"
    done
    ;;
  *) fail "unknown mode $mode" ;;
esac
echo "hpcc $mode: passed"
